// Datasets: inputs as float32 (N, shape...) plus int32 labels (N, label_width), loaded whole into
// memory, or read sample by sample (a SampleReader: real datasets too large for memory).
//
// Sources: deterministic synthetic digits (learnable: rendered glyphs with affine jitter and
// noise), synthetic CIFAR-like images (learnable: ten shape classes in random colours), the MNIST
// IDX format, the CIFAR-10 binary format, and text files (byte-level language modelling: each
// sample is T byte ids, its labels the T next bytes). Pixels are scaled to [0, 1] and then
// normalised with the per-dataset mean / std given below, identically for every source. Read
// on demand (engine/data/real_data.h): image folders (JPEG / PNG, decoded and augmented per
// sample) and llm.c token shards.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "recipes/datasets.h"
#include "recipes/model/graph.h"

namespace dltune::engine {

// A dataset read one sample at a time. Implementations are thread-safe: loader threads call
// read() concurrently (engine/data/loader.h).
class SampleReader {
 public:
  virtual ~SampleReader() = default;
  // Writes sample `index`'s input (the dataset's sample_numel() floats) to `x` and its labels
  // (label_width) to `y`; either may be null (then that part is not produced: a pipeline's
  // last stage needs only labels). `seed` seeds the sample's random augmentation; a reader
  // without augmentation ignores it. Errors name the file and what is wrong with it.
  virtual Status read(int64_t index, uint64_t seed, float* x, int32_t* y) const = 0;
};

struct Dataset {
  std::string name;
  recipes::Shape shape;         // per-sample input shape: (C, H, W); text: (T)
  int classes = 0;              // label values: classes; text: 256 (bytes)
  int64_t size = 0;             // samples
  int64_t label_width = 1;      // labels per sample: 1, or T (one per position of a text sample)
  std::vector<float> images;    // (N, shape): pixels, or byte ids as floats
  std::vector<int32_t> labels;  // (N, label_width), each in [0, classes)
  // Set for a dataset read on demand: `images` and `labels` are then empty, and samples come
  // from the reader (through a BatchLoader, or read_samples()).
  std::shared_ptr<const SampleReader> reader;

  bool streamed() const { return reader != nullptr; }
  int64_t sample_numel() const { return recipes::numel(shape); }
  const float* image(int64_t i) const { return images.data() + i * sample_numel(); }
  const int32_t* label(int64_t i) const { return labels.data() + i * label_width; }
};

// `count` synthetic 28x28 digit images (10 classes), a pure function of (seed, count): glyphs
// of a 5x7 font, scaled, rotated (+-12 degrees), shifted (+-3 px) and stroke-width jittered,
// plus Gaussian pixel noise. Different seeds give disjoint-looking sets (train vs held-out).
Dataset synthetic_digits(int64_t count, uint64_t seed);

// `count` random images of shape `dims` with labels in [0, classes), a pure function of
// (seed, count, dims = {C, H, W}, classes): pixels in [-1, 1), half a pattern of the class (an
// 8 x 8 grid of +-1 blocks per channel, the same in every set) and half uniform noise from a
// fast PRNG. Learnable: a stand-in for ImageNet when measuring throughput that still shows
// whether training works (synthetic-imagenet).
Dataset synthetic_images(int64_t count, const recipes::Shape& shape, int classes, uint64_t seed);

// `count` synthetic 3x32x32 images of 10 classes, a pure function of (seed, count): a shape per
// class (disk, square, triangle, plus, cross, horizontal stripes, vertical stripes, ring,
// diamond, checkerboard) in a random colour on a random background, scaled (+-25 %), shifted
// (+-5 px), plus Gaussian noise; normalised with CIFAR-10's channel means and deviations.
// Learnable, as synthetic digits are for MNIST: the CIFAR ResNets train on it without downloads.
Dataset synthetic_cifar(int64_t count, uint64_t seed);

// Byte-level language modelling on the file at `path`: sample i is the `context` bytes starting
// at i x stride (stride = max(1, context / 16)) of the file's training part, labelled with the
// next byte at each position. The training part is the file's first (1 - heldout_fraction);
// `train` false gives the last part, whose windows never overlap the training ones. Errors:
// unreadable file (io_error), a part too short for one window (invalid_input, naming the file).
Result<Dataset> read_text(const std::string& path, int64_t context, double heldout_fraction,
                          bool train);
// The entropy of the file's byte distribution in bits per byte (what a model that ignores
// context reaches at best).
Result<double> unigram_entropy_bits(const std::string& path);

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

// Samples [first, first + count) of `d` into x (count, shape) and y (count, label_width),
// either may be null: copied, or read on this thread with seed 0 (no augmentation drawn).
// Errors: the reader's.
Status read_samples(const Dataset& d, int64_t first, int64_t count, float* x, int32_t* y);

// The number of samples a held-out share `fraction` takes from `size`: round(size x fraction)
// (the recipes' own count, which the tuner and the launcher use too).
using recipes::heldout_count;
// Which `count` of `size` samples a held-out share takes: a mask (1 = held out), chosen by a
// seeded partial shuffle (split_heldout's choice; a pure function of size, count and seed).
std::vector<char> heldout_mask(int64_t size, int64_t count, uint64_t seed);

// Moves `count` samples of `d`, chosen by a seeded shuffle (a pure function of seed and d.size),
// into the returned held-out set; `d` keeps the others in their original order. For file data
// held out as a share of its training files (`heldout: 0.1` on mnist / cifar10). Errors
// (invalid_input): count not in [1, d.size - 1].
Result<Dataset> split_heldout(Dataset& d, int64_t count, uint64_t seed);

// A source by name: "synthetic" (train/held-out sizes and seed), "synthetic-imagenet"
// (synthetic_images of `shape` / `image_classes`; empty / 0 mean 3x224x224 / 1000),
// "synthetic-cifar", "mnist:DIR" (DIR holding the four standard IDX files), "cifar10:DIR"
// (data_batch_1..5.bin / test_batch.bin), "text:FILE" (windows of shape[0] bytes, the last
// `heldout_fraction` held out), "imagefolder:DIR" or "tokens:GLOB" (read on demand, their
// held-out part by `heldout_fraction` and `seed`: engine/data/real_data.h). `train` picks the
// training or held-out part.
Result<Dataset> load_dataset(const std::string& source, bool train, int64_t synthetic_size,
                             uint64_t seed, const recipes::Shape& shape = {}, int image_classes = 0,
                             double heldout_fraction = 0.1);

}  // namespace dltune::engine
