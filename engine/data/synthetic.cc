// Synthetic digits: a learnable, deterministic stand-in for MNIST (28x28, 10 classes); and
// synthetic ImageNet-shaped images with a learnable pattern per class.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/core/rng.h"
#include "engine/data/dataset.h"

namespace dltune::engine {

namespace {

// The classic 5x7 font, one string of 7 rows per digit.
constexpr const char* kFont[10][7] = {
    {"01110", "10001", "10011", "10101", "11001", "10001", "01110"},
    {"00100", "01100", "00100", "00100", "00100", "00100", "01110"},
    {"01110", "10001", "00001", "00010", "00100", "01000", "11111"},
    {"11111", "00010", "00100", "00010", "00001", "10001", "01110"},
    {"00010", "00110", "01010", "10010", "11111", "00010", "00010"},
    {"11111", "10000", "11110", "00001", "00001", "10001", "01110"},
    {"00110", "01000", "10000", "11110", "10001", "10001", "01110"},
    {"11111", "00001", "00010", "00100", "01000", "01000", "01000"},
    {"01110", "10001", "10001", "01110", "10001", "10001", "01110"},
    {"01110", "10001", "10001", "01111", "00001", "00010", "01100"},
};

float cell(int digit, int col, int row) {
  if (col < 0 || col >= 5 || row < 0 || row >= 7) return 0.0f;
  return kFont[digit][row][col] == '1' ? 1.0f : 0.0f;
}

// Bilinear sample of the glyph bitmap at cell coordinates (u, v) (cell centres at i + 0.5).
float sample(int digit, float u, float v) {
  u -= 0.5f;
  v -= 0.5f;
  const int c0 = static_cast<int>(std::floor(u)), r0 = static_cast<int>(std::floor(v));
  const float fu = u - c0, fv = v - r0;
  return (1 - fu) * (1 - fv) * cell(digit, c0, r0) + fu * (1 - fv) * cell(digit, c0 + 1, r0) +
         (1 - fu) * fv * cell(digit, c0, r0 + 1) + fu * fv * cell(digit, c0 + 1, r0 + 1);
}

void render(int digit, Rng& rng, float* out /* (28, 28) in [0, 1] */) {
  const float cs = 3.0f * rng.uniform(0.85f, 1.15f);  // pixels per glyph cell
  const float theta = rng.uniform(-0.21f, 0.21f);     // +-12 degrees
  const float dx = rng.uniform(-3.0f, 3.0f), dy = rng.uniform(-3.0f, 3.0f);
  const float thr = rng.uniform(0.25f, 0.5f);  // stroke width
  const float ct = std::cos(theta), st = std::sin(theta);
  for (int y = 0; y < 28; ++y) {
    for (int x = 0; x < 28; ++x) {
      const float px = x + 0.5f - 14.0f - dx, py = y + 0.5f - 14.0f - dy;
      const float rx = ct * px + st * py, ry = -st * px + ct * py;
      const float b = sample(digit, rx / cs + 2.5f, ry / cs + 3.5f);
      float v = std::clamp((b - thr) / 0.3f + 0.5f, 0.0f, 1.0f);
      v += 0.15f * rng.normal();
      out[y * 28 + x] = std::clamp(v, 0.0f, 1.0f);
    }
  }
}

}  // namespace

Dataset synthetic_digits(int64_t count, uint64_t seed) {
  Dataset d;
  d.name = "synthetic";
  d.shape = {1, 28, 28};
  d.classes = 10;
  d.size = count;
  d.images.resize(static_cast<size_t>(count * 784));
  d.labels.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    // Each sample depends only on (seed, i): any prefix of a larger set is the smaller set.
    Rng rng(Rng::mix(seed, static_cast<uint64_t>(i)));
    const int digit = static_cast<int>(rng.below(10));
    d.labels[i] = digit;
    float* img = d.images.data() + i * 784;
    render(digit, rng, img);
    for (int p = 0; p < 784; ++p) img[p] = (img[p] - 0.1307f) / 0.3081f;
  }
  return d;
}

// Synthetic ImageNet-shaped images. Each class has a pattern: per channel, a coarse grid of
// kGrid x kGrid blocks whose signs are the outer product of kGrid row signs and kGrid column
// signs, drawn from the class alone (so training and held-out sets share it). A pixel is half
// uniform noise in [-1, 1) and half its class's pattern (+-1), so it stays in [-1, 1). Even a
// nearest-class-mean classifier labels held-out images almost all correctly (data_test.cc);
// the noise keeps every sample distinct. One pass: a xorshift step per two pixels of a row and
// a multiply-add per pixel (AlexNet-sized sets are 1e8+ pixels).
Dataset synthetic_images(int64_t count, const recipes::Shape& shape, int classes, uint64_t seed) {
  constexpr int kGrid = 8;
  constexpr uint64_t kPatternKey = 0x9e3779b97f4a7c15ull;  // patterns depend on the class only
  Dataset d;
  d.name = "synthetic-imagenet";
  d.shape = shape;
  d.classes = classes;
  d.size = count;
  const int64_t channels = shape[0], height = shape[1], width = shape[2];
  const int64_t plane = height * width, sz = channels * plane;
  d.images.resize(static_cast<size_t>(count * sz));
  d.labels.resize(static_cast<size_t>(count));
  constexpr float kScale = 1.0f / 16777216.0f;  // 2^-24: 24-bit integers -> [0, 1)
  std::vector<float> col_sign(static_cast<size_t>(width));
  for (int64_t i = 0; i < count; ++i) {
    Rng rng(Rng::mix(seed, static_cast<uint64_t>(i)));
    const auto label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes)));
    d.labels[i] = label;
    float* img = d.images.data() + i * sz;
    Rng pattern(Rng::mix(kPatternKey, static_cast<uint64_t>(label)));
    uint64_t x = rng.next() | 1;  // xorshift64: the noise, 24 bits at a time
    auto step = [&x] {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x;
    };
    for (int64_t c = 0; c < channels; ++c) {
      // Bits 0..kGrid-1 sign the rows' blocks, the next kGrid the columns'.
      const uint64_t bits = pattern.next();
      for (int64_t px = 0; px < width; ++px)
        col_sign[px] = (bits >> (kGrid + px * kGrid / width)) & 1 ? 0.5f : -0.5f;
      for (int64_t y = 0; y < height; ++y) {
        const float row = (bits >> (y * kGrid / height)) & 1 ? 1.0f : -1.0f;
        float* out = img + c * plane + y * width;
        // Noise in [-0.5, 0.5), two 24-bit draws per xorshift step, plus the pattern's +-0.5.
        int64_t px = 0;
        for (; px + 1 < width; px += 2) {
          step();
          out[px] = static_cast<float>(x >> 40) * kScale - 0.5f + row * col_sign[px];
          out[px + 1] =
              static_cast<float>((x >> 16) & 0xffffff) * kScale - 0.5f + row * col_sign[px + 1];
        }
        if (px < width)
          out[px] = static_cast<float>(step() >> 40) * kScale - 0.5f + row * col_sign[px];
      }
    }
  }
  return d;
}

}  // namespace dltune::engine
