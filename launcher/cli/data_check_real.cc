// `dltune data check` for the real datasets: image folders and llm.c token shards
// (launcher/data_check.h).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/paths.h"
#include "engine/data/image_decode.h"
#include "launcher/cli/data_check.h"
#include "recipes/data_layout.h"

namespace dltune::launcher {
namespace {

namespace fs = std::filesystem;

constexpr size_t kListed = 20;  // files listed per kind of problem; the rest are counted

std::string with_commas(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// `path` relative to `base` for display.
std::string shown(const std::string& path, const std::string& base) {
  std::error_code ec;
  const fs::path rel = fs::relative(path, base, ec);
  return ec || rel.empty() ? path : rel.string();
}

struct ImageResult {
  std::string error, warning;
  int width = 0, height = 0;
};

// Reads and decodes every image on all cores (at the smallest DCT scale: a JPEG's whole
// entropy-coded data is still read, so truncation and corruption show).
std::vector<ImageResult> decode_all(const std::vector<recipes::ImageEntry>& images) {
  std::vector<ImageResult> out(images.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    engine::RgbImage img;
    for (size_t i = next++; i < images.size(); i = next++) {
      ImageResult& r = out[i];
      auto bytes = paths::read_file(images[i].path);
      if (!bytes) {
        r.error = bytes.error().message();
        continue;
      }
      auto head = engine::read_image_header(*bytes, images[i].path);
      if (!head) {
        r.error = head.error().message();
        continue;
      }
      r.width = head->width;
      r.height = head->height;
      if (Status st = engine::decode_image(*bytes, images[i].path, 0, 0, &img); !st)
        r.error = st.error().message();
      else
        r.warning = img.warning;
    }
  };
  const unsigned n = std::max(1u, std::min(std::thread::hardware_concurrency(), 16u));
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  return out;
}

struct Tally {
  size_t images = 0, unreadable = 0, damaged = 0, small = 0;
};

// One part (train/ or val/): its line, its classes' lines (up to 50 classes; else the fewest),
// its problems.
void check_part(const recipes::ImageFolderIndex& idx, const std::string& label,
                const std::string& base, int min_side, DataCheck* d, Tally* t) {
  const auto [lo, hi] = std::minmax_element(idx.per_class.begin(), idx.per_class.end());
  FileCheck part{label, idx.root, true,
                 with_commas(idx.images.size()) + " images in " +
                     std::to_string(idx.classes.size()) + " classes (" +
                     with_commas(static_cast<uint64_t>(*lo)) + " to " +
                     with_commas(static_cast<uint64_t>(*hi)) + " per class)"};
  d->files.push_back(part);
  std::vector<size_t> order(idx.classes.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  if (order.size() > 50) {  // the fewest only
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return idx.per_class[a] < idx.per_class[b]; });
    order.resize(5);
  }
  for (size_t k : order) {
    // (A training class always has images: index_imagefolder() refuses an empty one.)
    FileCheck c{"  " + idx.classes[k], (fs::path(idx.root) / idx.classes[k]).string(), true,
                with_commas(static_cast<uint64_t>(idx.per_class[k])) + " images"};
    c.warn = idx.per_class[k] == 0;
    if (c.warn) c.detail += " (a held-out folder without this class)";
    d->files.push_back(c);
  }
  for (size_t i = 0; i < idx.unsupported.size(); ++i)
    if (i < kListed)
      d->files.push_back({shown(idx.unsupported[i], base), idx.unsupported[i], false,
                          "an image format dltune does not read: convert it to JPEG or PNG"});
  t->unreadable += idx.unsupported.size();
  for (size_t i = 0; i < std::min(idx.skipped.size(), kListed); ++i) {
    FileCheck c{shown(idx.skipped[i], base), idx.skipped[i], true,
                "not an image by its name: skipped (torchvision's ImageFolder skips it too)"};
    c.warn = true;
    d->files.push_back(c);
  }
  const std::vector<ImageResult> res = decode_all(idx.images);
  size_t listed_bad = 0, listed_warn = 0;
  for (size_t i = 0; i < res.size(); ++i) {
    const ImageResult& r = res[i];
    const std::string name = shown(idx.images[i].path, base);
    if (!r.error.empty()) {
      ++t->unreadable;
      if (listed_bad++ < kListed) d->files.push_back({name, idx.images[i].path, false, r.error});
      continue;
    }
    ++t->images;
    const bool small = std::min(r.width, r.height) < min_side;
    t->damaged += r.warning.empty() ? 0 : 1;
    t->small += small ? 1 : 0;
    if ((r.warning.empty() && !small) || listed_warn++ >= kListed) continue;
    FileCheck c{name, idx.images[i].path, true,
                !r.warning.empty()
                    ? "damaged: " + r.warning + " (dltune decodes what is there; PIL refuses it)"
                    : std::to_string(r.width) + " x " + std::to_string(r.height) +
                          " pixels, smaller than the " + std::to_string(min_side) +
                          "-pixel crops (upscaled)"};
    c.warn = true;
    d->files.push_back(c);
  }
}

// Scans a shard's tokens for the largest id.
int scan_max_token(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(recipes::kTokenShardHeaderBytes);
  std::vector<uint16_t> buf(1 << 16);
  int hi = -1;
  while (in) {
    in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size() * 2));
    const auto n = static_cast<size_t>(in.gcount()) / 2;
    for (size_t i = 0; i < n; ++i) hi = std::max<int>(hi, buf[i]);
  }
  return hi;
}

}  // namespace

DataCheck check_imagefolder(const recipes::DataConfig& data) {
  DataCheck d;
  d.kind = "imagefolder";
  d.path = data.path;
  const std::string layout =
      "put each class's JPEG or PNG images in a folder of its own: DIR/CLASS/*.jpg, or "
      "ImageNet's DIR/train/CLASS/... and DIR/val/CLASS/... (torchvision's ImageFolder layout)";
  auto train = recipes::index_imagefolder(recipes::imagefolder_train_root(data.path));
  if (!train) {
    d.files.push_back({"train", data.path, false, train.error().message()});
    d.summary = "imagefolder: not usable";
    d.fetch = layout;
    return d;
  }
  const int min_side = static_cast<int>(
      data.shape.size() == 3 ? std::min(data.shape[1], data.shape[2]) : int64_t{224});
  Tally t;
  const std::string base = data.path;
  check_part(*train, train->root == data.path ? "." : "train/", base, min_side, &d, &t);
  size_t total = train->images.size() + train->unsupported.size();
  const std::string val_root = recipes::imagefolder_val_root(data.path);
  if (!val_root.empty()) {
    auto val = recipes::index_imagefolder(val_root, &train->classes);
    if (!val) {
      d.files.push_back({"val/", val_root, false, val.error().message()});
      ++t.unreadable;
    } else {
      check_part(*val, "val/", base, min_side, &d, &t);
      total += val->images.size() + val->unsupported.size();
    }
  }
  for (const char* codec : {"JPEG", "PNG"}) {
    const bool jpeg = codec[0] == 'J';
    if (jpeg ? engine::jpeg_decoding_available() : engine::png_decoding_available()) continue;
    d.files.insert(d.files.begin(),
                   FileCheck{std::string(codec) + " decoder", "", false,
                             engine::decoding_unavailable(jpeg ? engine::ImageCodec::kJpeg
                                                               : engine::ImageCodec::kPng)});
  }
  d.ok = t.unreadable == 0;
  d.summary = "imagefolder: " + with_commas(t.images) + " of " + with_commas(total) +
              " images decode, " + std::to_string(train->classes.size()) + " classes" +
              (val_root.empty() ? " (held out: a share of them)" : " (held out: val/)") +
              (t.unreadable ? ", " + with_commas(t.unreadable) + " unreadable" : "") +
              (t.damaged ? ", " + with_commas(t.damaged) + " damaged" : "") +
              (t.small ? ", " + with_commas(t.small) + " smaller than the crops" : "");
  if (!d.ok) d.fetch = "fix or remove the files marked BAD (torchvision would stop at them too)";
  return d;
}

DataCheck check_tokens(const recipes::DataConfig& data) {
  DataCheck d;
  d.kind = "tokens";
  d.path = data.path;
  auto files = recipes::glob_files(data.path);
  if (!files) {
    d.files.push_back(
        {fs::path(data.path).filename().string(), data.path, false, files.error().message()});
    d.summary = "tokens: not usable";
    d.fetch =
        "write GPT-2 token shards with llm.c's dev/data scripts (e.g. "
        "dev/data/tinyshakespeare.py) and point data.path at them";
    return d;
  }
  std::vector<recipes::TokenShard> shards;
  int64_t tokens = 0;
  for (const std::string& f : *files) {
    FileCheck c{fs::path(f).filename().string(), f, false, ""};
    auto s = recipes::read_token_shard(f);
    if (!s) {
      c.detail = s.error().message();
    } else {
      const int hi = scan_max_token(f);
      c.ok = hi < recipes::kGpt2Vocab;
      c.detail =
          with_commas(static_cast<uint64_t>(s->tokens)) + " tokens, " +
          with_commas(static_cast<uint64_t>(recipes::token_windows(s->tokens, data.context))) +
          " samples of " + std::to_string(data.context) + ", ids up to " + std::to_string(hi) +
          (c.ok ? "" : ": beyond GPT-2's vocabulary of 50257 (not GPT-2 tokens?)");
      shards.push_back(*s);
      tokens += s->tokens;
    }
    d.files.push_back(c);
  }
  const auto good = static_cast<size_t>(
      std::count_if(d.files.begin(), d.files.end(), [](const FileCheck& c) { return c.ok; }));
  d.ok = good == d.files.size();
  d.summary = "tokens: " + std::to_string(good) + " of " + std::to_string(d.files.size()) +
              " shards ok, " + with_commas(static_cast<uint64_t>(tokens)) + " tokens";
  if (d.ok) {
    auto split =
        recipes::split_tokens(shards, data.context, data.heldout_test_files, data.heldout_fraction);
    if (!split) {
      d.ok = false;
      d.summary += "; " + split.error().message();
    } else {
      char share[32];
      std::snprintf(share, sizeof share, "%g %%", 100 * data.heldout_fraction);
      d.summary +=
          ": " + with_commas(static_cast<uint64_t>(split->train_windows)) + " training and " +
          with_commas(static_cast<uint64_t>(split->heldout_windows)) +
          " held-out samples (held out: " +
          (data.heldout_test_files ? std::string("the last shard")
                                   : "the last " + std::string(share) + " of the samples") +
          ")";
    }
  }
  if (!d.ok) d.fetch = "write the shards again with llm.c's dev/data scripts (GPT-2 tokens)";
  return d;
}

}  // namespace dltune::launcher
