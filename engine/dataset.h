// Datasets: images as float32 (N, C, H, W) plus int32 labels, loaded whole into memory.
//
// Sources: deterministic synthetic digits (learnable: rendered glyphs with affine jitter and
// noise), the MNIST IDX format and the CIFAR-10 binary format. Pixels are scaled to [0, 1] and
// then normalised with the per-dataset mean / std given below, identically for every source.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/tensor.h"

namespace dltune::engine {

struct Dataset {
  std::string name;
  Dims dims;  // per-sample shape
  int classes = 0;
  int64_t size = 0;             // samples
  std::vector<float> images;    // (N, C, H, W)
  std::vector<int32_t> labels;  // (N), each in [0, classes)

  const float* image(int64_t i) const { return images.data() + i * dims.size(); }
};

// `count` synthetic 28x28 digit images (10 classes), a pure function of (seed, count): glyphs
// of a 5x7 font, scaled, rotated (+-12 degrees), shifted (+-3 px) and stroke-width jittered,
// plus Gaussian pixel noise. Different seeds give disjoint-looking sets (train vs held-out).
Dataset synthetic_digits(int64_t count, uint64_t seed);

// `count` random images of shape `dims` with labels in [0, classes), a pure function of
// (seed, count, dims, classes): pixels uniform in [-1, 1) from a fast PRNG. Not learnable; a
// stand-in for ImageNet when measuring throughput (synthetic-imagenet).
Dataset synthetic_images(int64_t count, Dims dims, int classes, uint64_t seed);

// Reads an MNIST pair: images file (magic 0x00000803, N, rows, cols, N*rows*cols bytes) and
// labels file (magic 0x00000801, N, N bytes in [0, 9]). Errors (invalid_input / io_error) name
// the file and what is wrong: wrong magic, truncated, counts that differ, label out of range.
Result<Dataset> read_mnist(const std::string& images_path, const std::string& labels_path);

// Reads one or more CIFAR-10 binary batch files (records of 1 label byte + 3072 pixel bytes,
// 3x32x32 planar). Errors name the file: a size that is not a whole number of records, an empty
// file, a label outside [0, 9].
Result<Dataset> read_cifar10(const std::vector<std::string>& paths);

// Writers for the same formats (tests and tools make small files with them).
std::string encode_mnist_images(const std::vector<uint8_t>& pixels, int n, int rows, int cols);
std::string encode_mnist_labels(const std::vector<uint8_t>& labels);

// The number of samples a held-out share `fraction` takes from `size`: round(size x fraction).
int64_t heldout_count(int64_t size, double fraction);

// Moves `count` samples of `d`, chosen by a seeded shuffle (a pure function of seed and d.size),
// into the returned held-out set; `d` keeps the others in their original order. For file data
// held out as a share of its training files (`heldout: 0.1` on mnist / cifar10). Errors
// (invalid_input): count not in [1, d.size - 1].
Result<Dataset> split_heldout(Dataset& d, int64_t count, uint64_t seed);

// A source by name: "synthetic" (train/held-out sizes and seed), "synthetic-imagenet"
// (synthetic_images of `image_dims` / `image_classes`; c == 0 / 0 mean 3x224x224 / 1000),
// "mnist:DIR" (DIR holding the four standard IDX files) or "cifar10:DIR" (data_batch_1..5.bin /
// test_batch.bin). `train` picks the training or held-out part.
Result<Dataset> load_dataset(const std::string& source, bool train, int64_t synthetic_size,
                             uint64_t seed, Dims image_dims = {}, int image_classes = 0);

}  // namespace dltune::engine
