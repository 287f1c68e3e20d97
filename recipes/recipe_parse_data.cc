// Parsing of the `data` section (recipes/README.md).
#include <cstdlib>
#include <filesystem>

#include "recipes/data_layout.h"
#include "recipes/recipe_parse_internal.h"

namespace dltune::recipes::internal {
namespace {

// mnist / cifar10 / imagefolder `path` (a directory), text `path` (a file) or tokens `path` (a
// glob): required, resolved against the recipe's directory.
void read_data_path(YamlReader& r, const Fields& f, const YAML::Node& node, const std::string& kind,
                    const std::string& base_dir, DataConfig* d) {
  const std::string what = kind == "text"     ? "file"
                           : kind == "tokens" ? "file or glob"
                                              : "directory";
  const Fields::Entry* e = f.find("path");
  std::string path;
  if (e == nullptr) {
    r.report(
        node, "data",
        kind + " data needs 'path': " +
            (kind == "text"          ? "the text file to learn from"
             : kind == "tokens"      ? "llm.c .bin token shards, a file or a glob (DIR/*.bin)"
             : kind == "imagefolder" ? "the directory of class folders (or of train/ and val/ ones)"
                                     : "the directory holding its files"));
    return;
  }
  if (!r.get_string(f, "path", &path)) return;
  if (path.empty()) {
    r.report(*e, "expected a " + what + " path, got an empty string");
    return;
  }
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::absolute(std::filesystem::path(base_dir) / p);
  d->path = p.lexically_normal().string();
}

// `heldout`: a fraction in (0, 0.5], or `test` / `val` (the dataset's own held-out files:
// mnist's and cifar10's test files, imagefolder's DIR/val, the last token shard), or 0 (no
// held-out evaluation) for synthetic data, whose samples are all generated alike.
void read_heldout(YamlReader& r, const Fields::Entry& e, bool has_test_files, bool synthetic,
                  DataConfig* d) {
  if (e.value.IsScalar() && (e.value.Scalar() == "test" || e.value.Scalar() == "val")) {
    if (!has_test_files)
      r.report(e, "'" + e.value.Scalar() +
                      "' needs held-out files (mnist's and cifar10's test files, imagefolder's "
                      "val/ folder, the last of several token shards); synthetic and text data "
                      "take a fraction such as 0.1");
    d->heldout_test_files = true;
    d->heldout_fraction = 0;
    return;
  }
  double fraction = 0;
  char* end = nullptr;
  const std::string& s = e.value.IsScalar() ? e.value.Scalar() : std::string();
  if (e.value.IsScalar() && e.value.Tag() == "?" && !s.empty())
    fraction = std::strtod(s.c_str(), &end);
  const bool none = synthetic && fraction == 0;
  if (end == nullptr || end != s.c_str() + s.size() ||
      !((fraction > 0 || none) && fraction <= 0.5)) {
    r.report(e, std::string(synthetic ? "expected a fraction in [0, 0.5] (0: no held-out "
                                        "evaluation), "
                                      : "expected a fraction in (0, 0.5], 'test' or 'val', ") +
                    describe_value(e.value));
    return;
  }
  d->heldout_fraction = fraction;
}

// What the files of imagefolder and tokens data say at parse time: imagefolder's class count
// (the model's outputs) and, when the recipe gives no `heldout`, whether the dataset has its own
// held-out files (DIR/val; several token shards). A path that does not exist yet keeps the
// defaults: the recipe checks report it (recipe_validate.cc).
void read_layout(const Fields& f, DataConfig* d) {
  if (d->path.empty()) return;
  if (d->kind == DataKind::kImageFolder) {
    auto classes = imagefolder_classes(imagefolder_train_root(d->path));
    if (classes) d->classes = static_cast<int64_t>(classes->size());
    if (!f.has("heldout")) d->heldout_test_files = !imagefolder_val_root(d->path).empty();
  } else if (d->kind == DataKind::kTokens && !f.has("heldout")) {
    auto files = glob_files(d->path);
    d->heldout_test_files = files && files->size() >= 2;
  }
  if (d->heldout_test_files) d->heldout_fraction = 0;
}

}  // namespace

void parse_data(YamlReader& r, const YAML::Node& node, const std::string& base_dir, DataConfig* d) {
  const std::vector<std::string> kinds = {"synthetic-digits", "synthetic-imagenet",
                                          "synthetic-cifar",  "mnist",
                                          "cifar10",          "text",
                                          "imagefolder",      "tokens"};
  std::string kind;
  Fields f;
  if (node.IsScalar()) {
    if (!r.scalar_choice(node, "data", kinds, &kind)) return;
  } else {
    if (!r.fields(node, "data",
                  {"kind", "path", "samples", "classes", "shape", "heldout", "context", "size"},
                  &f))
      return;
    if (!f.has("kind")) {
      r.report(node, "data", "missing required key 'kind' (" + strings::join(kinds, ", ") + ")");
      return;
    }
    if (!r.get_choice(f, "kind", kinds, &kind)) return;
  }
  d->kind = *parse_data_kind(kind);
  const bool synthetic = kind.starts_with("synthetic");
  const bool imagenet = d->kind == DataKind::kSyntheticImagenet;
  const bool text = d->kind == DataKind::kText;
  const bool tokens = d->kind == DataKind::kTokens;
  const bool folder = d->kind == DataKind::kImageFolder;
  const bool cifar = d->kind == DataKind::kCifar10 || d->kind == DataKind::kSyntheticCifar;
  d->shape = cifar ? Shape{3, 32, 32} : imagenet || folder ? Shape{3, 224, 224} : Shape{1, 28, 28};
  d->classes = imagenet ? 1000 : text ? 256 : tokens ? kGpt2Vocab : 10;
  d->samples = !synthetic ? 0 : imagenet ? 4096 : 20000;
  if (text || tokens) {
    d->context = text ? 128 : 1024;  // tokens: GPT-2's context
    d->shape = {d->context};
  }
  // Keys that only some kinds take.
  auto only_for = [&](const char* key, bool allowed, const std::string& which) {
    if (const Fields::Entry* e = f.find(key); e != nullptr && !allowed)
      r.report(e->key, e->path, "only " + which + " data takes '" + key + "', not " + kind);
  };
  only_for("path", !synthetic, "mnist, cifar10, text, imagefolder and tokens");
  only_for("samples", synthetic, "synthetic");
  only_for("classes", imagenet, "synthetic-imagenet");
  only_for("shape", imagenet, "synthetic-imagenet");
  only_for("context", text || tokens, "text and tokens");
  only_for("size", folder, "imagefolder");
  if (synthetic) r.get_int(f, "samples", 1, kMaxInt, &d->samples);
  if (imagenet) r.get_int(f, "classes", 2, kMaxInt, &d->classes);
  if ((text || tokens) && r.get_int(f, "context", 2, 1 << 16, &d->context)) d->shape = {d->context};
  int64_t size = 224;  // imagefolder: the side of the square crops the model sees
  if (folder && r.get_int(f, "size", 8, 4096, &size)) d->shape = {3, size, size};
  if (const Fields::Entry* e = f.find("shape"); e != nullptr && imagenet) {
    if (!e->value.IsSequence() || e->value.size() != 3) {
      r.report(*e, "expected [channels, height, width], " + describe_value(e->value));
    } else {
      Shape shape;
      for (size_t i = 0; i < 3; ++i) {
        int64_t v = 0;
        if (!r.scalar_int(e->value[i], e->path + "[" + std::to_string(i) + "]", 1, 1 << 16, &v))
          return;
        shape.push_back(v);
      }
      d->shape = shape;
    }
  }
  if (!synthetic) read_data_path(r, f, node, kind, base_dir, d);
  if (const Fields::Entry* e = f.find("heldout"))
    read_heldout(r, *e, !synthetic && !text, synthetic, d);
  if (folder || tokens) read_layout(f, d);
}

}  // namespace dltune::recipes::internal
