#include "engine/data/dataset.h"

#include <cmath>
#include <cstring>

#include "common/paths.h"
#include "engine/core/rng.h"
#include "engine/data/real_data.h"

namespace dltune::engine {

namespace {

uint32_t be32(const std::string& s, size_t off) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + off);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

void put_be32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Pixels in [0, 255] -> (x/255 - mean) / std.
void normalise(const unsigned char* src, int64_t n, float mean, float std, float* dst) {
  const float a = 1.0f / (255.0f * std), b = -mean / std;
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) * a + b;
}

}  // namespace

std::string encode_mnist_images(const std::vector<uint8_t>& pixels, int n, int rows, int cols) {
  std::string s;
  put_be32(s, 0x00000803);
  put_be32(s, static_cast<uint32_t>(n));
  put_be32(s, static_cast<uint32_t>(rows));
  put_be32(s, static_cast<uint32_t>(cols));
  s.append(reinterpret_cast<const char*>(pixels.data()), pixels.size());
  return s;
}

std::string encode_mnist_labels(const std::vector<uint8_t>& labels) {
  std::string s;
  put_be32(s, 0x00000801);
  put_be32(s, static_cast<uint32_t>(labels.size()));
  s.append(reinterpret_cast<const char*>(labels.data()), labels.size());
  return s;
}

Result<Dataset> read_mnist(const std::string& images_path, const std::string& labels_path) {
  auto img = paths::read_file(images_path);
  if (!img) return img.error();
  auto lab = paths::read_file(labels_path);
  if (!lab) return lab.error();
  const std::string ip = "MNIST images file '" + images_path + "'";
  const std::string lp = "MNIST labels file '" + labels_path + "'";
  // The magic number first (a swapped or compressed file is the likelier mistake), then size.
  if (img->size() >= 4 && be32(*img, 0) != 0x00000803)
    return invalid_input(ip + " has magic number " + hex(be32(*img, 0)) +
                         ", expected 0x00000803 (is it a labels file or compressed?)");
  if (img->size() < 16) return invalid_input(ip + " is truncated: shorter than its 16-byte header");
  if (lab->size() >= 4 && be32(*lab, 0) != 0x00000801)
    return invalid_input(lp + " has magic number " + hex(be32(*lab, 0)) +
                         ", expected 0x00000801 (is it an images file or compressed?)");
  if (lab->size() < 8) return invalid_input(lp + " is truncated: shorter than its 8-byte header");
  const uint64_t n = be32(*img, 4), rows = be32(*img, 8), cols = be32(*img, 12);
  if (rows == 0 || cols == 0 || rows > 4096 || cols > 4096)
    return invalid_input(ip + " declares an image size of " + std::to_string(rows) + "x" +
                         std::to_string(cols) + ", expected 1..4096 each");
  if (img->size() != 16 + n * rows * cols)
    return invalid_input(ip + " is truncated or has trailing data: " + std::to_string(img->size()) +
                         " bytes, the header declares " + std::to_string(16 + n * rows * cols));
  if (be32(*lab, 4) != n)
    return invalid_input(lp + " holds " + std::to_string(be32(*lab, 4)) + " labels but " + ip +
                         " holds " + std::to_string(n) + " images");
  if (lab->size() != 8 + n)
    return invalid_input(lp + " is truncated or has trailing data: " + std::to_string(lab->size()) +
                         " bytes, expected " + std::to_string(8 + n));
  Dataset d;
  d.name = "mnist";
  d.shape = {1, static_cast<int64_t>(rows), static_cast<int64_t>(cols)};
  d.classes = 10;
  d.size = static_cast<int64_t>(n);
  d.labels.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    const int label = static_cast<unsigned char>((*lab)[8 + i]);
    if (label > 9)
      return invalid_input(lp + ": label " + std::to_string(label) + " of sample " +
                           std::to_string(i) + " is out of range 0..9");
    d.labels[i] = label;
  }
  d.images.resize(n * rows * cols);
  normalise(reinterpret_cast<const unsigned char*>(img->data() + 16),
            static_cast<int64_t>(n * rows * cols), 0.1307f, 0.3081f, d.images.data());
  return d;
}

Result<Dataset> read_cifar10(const std::vector<std::string>& paths) {
  constexpr size_t kRecord = 1 + 3 * 32 * 32;
  Dataset d;
  d.name = "cifar10";
  d.shape = {3, 32, 32};
  d.classes = 10;
  for (const auto& path : paths) {
    auto data = paths::read_file(path);
    if (!data) return data.error();
    const std::string where = "CIFAR-10 file '" + path + "'";
    if (data->empty()) return invalid_input(where + " is empty");
    if (data->size() % kRecord != 0)
      return invalid_input(where + " is truncated: " + std::to_string(data->size()) +
                           " bytes is not a whole number of 3073-byte records");
    const size_t n = data->size() / kRecord;
    const size_t base = d.images.size();
    d.images.resize(base + n * (kRecord - 1));
    for (size_t i = 0; i < n; ++i) {
      const auto* rec = reinterpret_cast<const unsigned char*>(data->data() + i * kRecord);
      if (rec[0] > 9)
        return invalid_input(where + ": label " + std::to_string(rec[0]) + " of record " +
                             std::to_string(i) + " is out of range 0..9");
      d.labels.push_back(rec[0]);
      // Per-channel statistics of CIFAR-10 are close enough to 0.5 / 0.25 for training.
      normalise(rec + 1, kRecord - 1, 0.47f, 0.25f, d.images.data() + base + i * (kRecord - 1));
    }
  }
  d.size = static_cast<int64_t>(d.labels.size());
  return d;
}

std::vector<char> heldout_mask(int64_t size, int64_t count, uint64_t seed) {
  // A partial Fisher-Yates shuffle picks the held-out indices.
  std::vector<int64_t> order(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) order[static_cast<size_t>(i)] = i;
  Rng rng(Rng::mix(seed, 0x68656c646f7574ull));  // "heldout"
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(size - i)));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  std::vector<char> held(static_cast<size_t>(size), 0);
  for (int64_t i = 0; i < count; ++i) held[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
  return held;
}

Status read_samples(const Dataset& d, int64_t first, int64_t count, float* x, int32_t* y) {
  const int64_t sz = d.sample_numel(), lw = d.label_width;
  for (int64_t i = 0; i < count; ++i) {
    float* xi = x ? x + i * sz : nullptr;
    int32_t* yi = y ? y + i * lw : nullptr;
    if (d.reader) {
      DLTUNE_TRY(d.reader->read(first + i, 0, xi, yi));
      continue;
    }
    if (xi) std::memcpy(xi, d.image(first + i), sizeof(float) * static_cast<size_t>(sz));
    if (yi) std::memcpy(yi, d.label(first + i), sizeof(int32_t) * static_cast<size_t>(lw));
  }
  return ok_status();
}

Result<Dataset> split_heldout(Dataset& d, int64_t count, uint64_t seed) {
  if (count < 1 || count >= d.size)
    return invalid_input("dataset '" + d.name + "': cannot hold out " + std::to_string(count) +
                         " of its " + std::to_string(d.size) +
                         " samples (at least 1 must stay on each side)");
  if (d.reader) return internal_error("split_heldout: dataset '" + d.name + "' is read on demand");
  const std::vector<char> held = heldout_mask(d.size, count, seed);

  const int64_t per = d.sample_numel(), lw = d.label_width;
  Dataset out;
  out.name = d.name + " (held out)";
  out.shape = d.shape;
  out.classes = d.classes;
  out.label_width = lw;
  out.images.reserve(static_cast<size_t>(count * per));
  out.labels.reserve(static_cast<size_t>(count * lw));
  int64_t kept = 0;
  for (int64_t i = 0; i < d.size; ++i) {
    const float* src = d.image(i);
    const int32_t* lab = d.label(i);
    if (held[static_cast<size_t>(i)]) {
      out.images.insert(out.images.end(), src, src + per);
      out.labels.insert(out.labels.end(), lab, lab + lw);
    } else {
      if (kept != i) {
        std::memmove(d.images.data() + kept * per, src, sizeof(float) * per);
        std::memmove(d.labels.data() + kept * lw, lab, sizeof(int32_t) * lw);
      }
      ++kept;
    }
  }
  out.size = count;
  d.size = kept;
  d.images.resize(static_cast<size_t>(kept * per));
  d.labels.resize(static_cast<size_t>(kept * lw));
  return out;
}

Result<Dataset> load_dataset(const std::string& source, bool train, int64_t synthetic_size,
                             uint64_t seed, const recipes::Shape& shape, int image_classes,
                             double heldout_fraction) {
  if (source == "synthetic" || source == "synthetic-imagenet" || source == "synthetic-cifar") {
    if (synthetic_size <= 0)
      return invalid_input("synthetic dataset size must be positive, got " +
                           std::to_string(synthetic_size));
    const uint64_t s = train ? seed : seed ^ 0x5bd1e995ull;
    if (source == "synthetic") return synthetic_digits(synthetic_size, s);
    if (source == "synthetic-cifar") return synthetic_cifar(synthetic_size, s);
    const recipes::Shape dims = shape.empty() ? recipes::Shape{3, 224, 224} : shape;
    if (image_classes == 0) image_classes = 1000;
    bool positive = dims.size() == 3 && image_classes > 0;
    for (int64_t v : dims) positive = positive && v > 0;
    if (!positive)
      return invalid_input("synthetic-imagenet: image shape " + recipes::describe_shape(dims) +
                           " and " + std::to_string(image_classes) +
                           " classes must be positive (C, H, W)");
    return synthetic_images(synthetic_size, dims, image_classes, s);
  }
  auto colon = source.find(':');
  const std::string kind = source.substr(0, colon);
  const std::string dir = colon == std::string::npos ? "" : source.substr(colon + 1);
  if (kind == "mnist" && !dir.empty()) {
    const std::string pre = dir + (train ? "/train" : "/t10k");
    auto r = read_mnist(pre + "-images-idx3-ubyte", pre + "-labels-idx1-ubyte");
    if (!r) return r.error().wrap("loading dataset '" + source + "'");
    return r;
  }
  if (kind == "text" && !dir.empty()) {
    if (shape.size() != 1)
      return invalid_input("text data needs a model input of (context), got " +
                           recipes::describe_shape(shape));
    auto r = read_text(dir, shape[0], heldout_fraction, train);
    if (!r) return r.error().wrap("loading dataset '" + source + "'");
    return r;
  }
  if (kind == "cifar10" && !dir.empty()) {
    std::vector<std::string> files;
    if (train)
      for (int i = 1; i <= 5; ++i)
        files.push_back(dir + "/data_batch_" + std::to_string(i) + ".bin");
    else
      files.push_back(dir + "/test_batch.bin");
    auto r = read_cifar10(files);
    if (!r) return r.error().wrap("loading dataset '" + source + "'");
    return r;
  }
  if ((kind == "imagefolder" || kind == "tokens") && !dir.empty()) {
    auto r = kind == "imagefolder" ? load_imagefolder(dir, train, shape, heldout_fraction, seed)
                                   : load_tokens(dir, train, shape, heldout_fraction);
    if (!r) return r.error().wrap("loading dataset '" + source + "'");
    return r;
  }
  return invalid_input(
      "unknown dataset '" + source +
      "'; expected synthetic, synthetic-imagenet, synthetic-cifar, mnist:DIR, cifar10:DIR, "
      "text:FILE, imagefolder:DIR or tokens:GLOB");
}

}  // namespace dltune::engine
