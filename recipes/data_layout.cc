#include "recipes/data_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <glob.h>

namespace dltune::recipes {
namespace {

namespace fs = std::filesystem;

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);  // follows symbolic links, as Python's entry.is_dir()
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// One class folder's files in os.walk(followlinks=True) order after sorting: directories by
// their path, the files of each by name. Files are every non-directory entry.
Status walk_class(const fs::path& dir, std::map<std::string, std::vector<std::string>>* out) {
  std::vector<fs::path> pending = {dir};
  std::vector<fs::path> seen;  // a link back up would walk for ever (os.walk's too)
  while (!pending.empty()) {
    const fs::path d = pending.back();
    pending.pop_back();
    std::error_code ec;
    const fs::path real = fs::canonical(d, ec);
    if (!ec && std::find(seen.begin(), seen.end(), real) != seen.end()) continue;
    seen.push_back(real);
    fs::directory_iterator it(d, ec);
    if (ec) return io_error("cannot list '" + d.string() + "': " + ec.message());
    std::vector<std::string>& files = (*out)[d.string()];
    for (const fs::directory_entry& e : it) {
      if (is_dir(e.path()))
        pending.push_back(e.path());
      else
        files.push_back(e.path().filename().string());
    }
    std::sort(files.begin(), files.end());
  }
  return ok_status();
}

uint32_t le32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

ImageExt image_ext(const std::string& name) {
  const std::string ext = lower(fs::path(name).extension().string());
  if (ext == ".jpg" || ext == ".jpeg") return ImageExt::kJpeg;
  if (ext == ".png") return ImageExt::kPng;
  for (const char* e : {".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"})
    if (ext == e) return ImageExt::kUnsupported;
  return ImageExt::kNotImage;
}

std::string imagefolder_train_root(const std::string& dir) {
  const fs::path train = fs::path(dir) / "train";
  return is_dir(train) ? train.string() : dir;
}

std::string imagefolder_val_root(const std::string& dir) {
  const fs::path train = fs::path(dir) / "train", val = fs::path(dir) / "val";
  return is_dir(train) && is_dir(val) ? val.string() : "";
}

Result<std::vector<std::string>> imagefolder_classes(const std::string& root) {
  if (!is_dir(root))
    return not_found("image folder '" + root +
                     "' is not a directory; point data.path at the folder of class folders "
                     "(DIR/CLASS/*.jpg, or DIR/train/CLASS/... and DIR/val/CLASS/...)");
  std::error_code ec;
  fs::directory_iterator it(root, ec);
  if (ec) return io_error("cannot list image folder '" + root + "': " + ec.message());
  std::vector<std::string> classes;
  for (const fs::directory_entry& e : it)
    if (is_dir(e.path())) classes.push_back(e.path().filename().string());
  std::sort(classes.begin(), classes.end());
  if (classes.empty())
    return invalid_input("image folder '" + root +
                         "' has no class folders: put each class's images in a folder of its "
                         "own (DIR/CLASS/IMAGE.jpg, or DIR/train/CLASS/... and DIR/val/CLASS/...)");
  return classes;
}

Result<ImageFolderIndex> index_imagefolder(const std::string& root,
                                           const std::vector<std::string>* classes) {
  auto own = imagefolder_classes(root);
  if (!own) return own.error();
  ImageFolderIndex idx;
  idx.root = root;
  idx.classes = classes ? *classes : *own;
  if (classes) {
    for (const std::string& c : *own)
      if (!std::binary_search(classes->begin(), classes->end(), c))
        return invalid_input("image folder '" + root + "' has class folder '" + c +
                             "' that the training images lack; its classes must be among "
                             "the training folder's");
  }
  idx.per_class.assign(idx.classes.size(), 0);
  for (size_t k = 0; k < idx.classes.size(); ++k) {
    const fs::path dir = fs::path(root) / idx.classes[k];
    if (!is_dir(dir)) continue;                             // a held-out folder may lack a class
    std::map<std::string, std::vector<std::string>> files;  // sorted by directory
    DLTUNE_TRY(walk_class(dir, &files));
    for (const auto& [d, names] : files) {
      for (const std::string& name : names) {
        const std::string path = (fs::path(d) / name).string();
        switch (image_ext(name)) {
          case ImageExt::kJpeg:
          case ImageExt::kPng:
            idx.images.push_back({path, static_cast<int32_t>(k)});
            ++idx.per_class[k];
            break;
          case ImageExt::kUnsupported:
            idx.unsupported.push_back(path);
            break;
          case ImageExt::kNotImage:
            idx.skipped.push_back(path);
            break;
        }
      }
    }
    if (idx.per_class[k] == 0 && classes == nullptr)
      return invalid_input("class folder '" + dir.string() +
                           "' holds no JPEG or PNG image; remove it or add its images");
  }
  return idx;
}

Result<std::vector<std::string>> glob_files(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i)
      if (!is_dir(g.gl_pathv[i])) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  if (out.empty())
    return not_found("no file matches '" + pattern +
                     "'; give the llm.c .bin shards as a path or a glob such as "
                     "DIR/fineweb_*.bin");
  std::sort(out.begin(), out.end());
  return out;
}

Result<TokenShard> read_token_shard(const std::string& path) {
  const std::string where = "token shard '" + path + "'";
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot read " + where + ": " + std::strerror(errno));
  unsigned char h[kTokenShardHeaderBytes];
  f.read(reinterpret_cast<char*>(h), sizeof h);
  if (f.gcount() < 12)
    return invalid_input(where + " is shorter than llm.c's 1024-byte header (" +
                         std::to_string(f.gcount()) + " bytes): not a .bin token shard");
  const auto magic = static_cast<int32_t>(le32(h)), version = static_cast<int32_t>(le32(h + 4));
  if (magic != kTokenShardMagic)
    return invalid_input(where + " has magic number " + std::to_string(magic) +
                         ", not llm.c's 20240520: not a .bin token shard (write shards with "
                         "llm.c's dev/data scripts, e.g. tinyshakespeare.py)");
  if (version != kTokenShardVersion)
    return invalid_input(where + " is version " + std::to_string(version) +
                         (version == 2 ? " (uint32 LLaMA-3 tokens)" : "") +
                         "; dltune reads version 1: uint16 GPT-2 tokens (llm.c's --model gpt-2)");
  if (f.gcount() < kTokenShardHeaderBytes)
    return invalid_input(where + " is truncated: shorter than its 1024-byte header");
  const int64_t tokens = static_cast<int64_t>(le32(h + 8));
  std::error_code ec;
  const auto size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) return io_error("cannot read the size of " + where + ": " + ec.message());
  const int64_t want = kTokenShardHeaderBytes + 2 * tokens;
  if (size != want)
    return invalid_input(where + " has " + std::to_string(size) + " bytes but its header says " +
                         std::to_string(tokens) + " tokens (" + std::to_string(want) + " bytes): " +
                         (size < want ? "truncated" : "trailing data") + "; write it again");
  return TokenShard{path, tokens};
}

Result<std::vector<TokenShard>> token_shards(const std::string& pattern) {
  auto files = glob_files(pattern);
  if (!files) return files.error();
  std::vector<TokenShard> out;
  for (const std::string& f : *files) {
    auto s = read_token_shard(f);
    if (!s) return s.error();
    out.push_back(*s);
  }
  return out;
}

int64_t token_windows(int64_t tokens, int64_t context) {
  return context < 1 || tokens < context + 1 ? 0 : (tokens - 1) / context;
}

Result<TokenSplit> split_tokens(const std::vector<TokenShard>& shards, int64_t context,
                                bool last_shard, double fraction) {
  TokenSplit s;
  if (last_shard) {
    if (shards.size() < 2)
      return invalid_input("holding out the last token shard needs at least two shards, '" +
                           (shards.empty() ? std::string("?") : shards[0].path) +
                           "' is the only one; give data.heldout a share such as 0.1");
    for (size_t i = 0; i < shards.size(); ++i) {
      const int64_t w = token_windows(shards[i].tokens, context);
      if (w == 0) continue;
      auto& part = i + 1 == shards.size() ? s.heldout : s.train;
      part.push_back({i, 0, w});
    }
  } else {
    int64_t total = 0;
    for (const TokenShard& sh : shards) total += token_windows(sh.tokens, context);
    const auto held = static_cast<int64_t>(std::llround(static_cast<double>(total) * fraction));
    int64_t seen = 0;
    for (size_t i = 0; i < shards.size(); ++i) {
      const int64_t w = token_windows(shards[i].tokens, context);
      const int64_t train_end = std::clamp(total - held - seen, int64_t{0}, w);  // in this shard
      if (train_end > 0) s.train.push_back({i, 0, train_end});
      if (w - train_end > 0) s.heldout.push_back({i, train_end, w - train_end});
      seen += w;
    }
  }
  for (const auto& p : s.train) s.train_windows += p.count;
  for (const auto& p : s.heldout) s.heldout_windows += p.count;
  if (s.train_windows == 0 || (s.heldout_windows == 0 && (last_shard || fraction > 0)))
    return invalid_input("token shards '" + (shards.empty() ? std::string("?") : shards[0].path) +
                         "'...: " + std::to_string(s.train_windows) + " training and " +
                         std::to_string(s.heldout_windows) + " held-out samples of " +
                         std::to_string(context) +
                         " tokens; each part needs one at least: more tokens, a shorter "
                         "data.context or another data.heldout");
  return s;
}

Result<int64_t> real_data_train_samples(const DataConfig& d) {
  if (d.kind == DataKind::kImageFolder) {
    auto idx = index_imagefolder(imagefolder_train_root(d.path));
    if (!idx) return idx.error();
    const auto n = static_cast<int64_t>(idx->images.size());
    if (d.heldout_test_files) return n;
    return n - std::llround(static_cast<double>(n) * d.heldout_fraction);
  }
  if (d.kind == DataKind::kTokens) {
    auto shards = token_shards(d.path);
    if (!shards) return shards.error();
    auto split = split_tokens(*shards, d.context, d.heldout_test_files, d.heldout_fraction);
    if (!split) return split.error();
    return split->train_windows;
  }
  return invalid_input("real_data_train_samples: not imagefolder or tokens data");
}

}  // namespace dltune::recipes
