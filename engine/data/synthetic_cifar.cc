// Synthetic CIFAR: a learnable, deterministic stand-in for CIFAR-10 (3x32x32, 10 classes), so
// the CIFAR ResNets train without a download. Each class is a shape; colour, size, position
// and noise vary per sample, so a network must learn shapes rather than colours or positions.
#include <algorithm>
#include <cmath>

#include "engine/core/rng.h"
#include "engine/data/dataset.h"

namespace dltune::engine {

namespace {

// Whether the point (u, v), in units of the shape's half-size around its centre, is inside
// shape `k`.
bool inside(int k, float u, float v) {
  const float au = std::fabs(u), av = std::fabs(v), r = std::sqrt(u * u + v * v);
  switch (k) {
    case 0:  // disk
      return r <= 1.0f;
    case 1:  // square
      return au <= 0.85f && av <= 0.85f;
    case 2:  // triangle, apex up
      return v <= 0.9f && v >= -0.9f && au <= (v + 0.9f) * 0.55f;
    case 3:  // plus
      return (au <= 0.3f && av <= 1.0f) || (av <= 0.3f && au <= 1.0f);
    case 4:  // cross (x)
      return r <= 1.05f && std::fabs(au - av) <= 0.3f;
    case 5:  // horizontal stripes
      return au <= 1.0f && av <= 1.0f && static_cast<int>(std::floor((v + 1.0f) * 2.5f)) % 2 == 0;
    case 6:  // vertical stripes
      return au <= 1.0f && av <= 1.0f && static_cast<int>(std::floor((u + 1.0f) * 2.5f)) % 2 == 0;
    case 7:  // ring
      return r <= 1.0f && r >= 0.6f;
    case 8:  // diamond
      return au + av <= 1.0f;
    default:  // checkerboard
      return au <= 1.0f && av <= 1.0f &&
             (static_cast<int>(std::floor((u + 1.0f) * 2.0f)) +
              static_cast<int>(std::floor((v + 1.0f) * 2.0f))) %
                     2 ==
                 0;
  }
}

void render(int k, Rng& rng, float* img /* (3, 32, 32) in [0, 1] */) {
  float fg[3], bg[3];
  // Colours at least 0.35 apart in brightness, so the shape is always visible.
  do {
    for (int c = 0; c < 3; ++c) fg[c] = rng.uniform(), bg[c] = rng.uniform();
  } while (std::fabs((fg[0] + fg[1] + fg[2]) - (bg[0] + bg[1] + bg[2])) < 1.05f);
  const float half = 11.0f * rng.uniform(0.75f, 1.25f);
  const float cx = 16.0f + rng.uniform(-5.0f, 5.0f), cy = 16.0f + rng.uniform(-5.0f, 5.0f);
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x) {
      const bool in = inside(k, (x + 0.5f - cx) / half, (cy - y - 0.5f) / half);
      for (int c = 0; c < 3; ++c) {
        const float v = (in ? fg[c] : bg[c]) + 0.08f * rng.normal();
        img[(c * 32 + y) * 32 + x] = std::clamp(v, 0.0f, 1.0f);
      }
    }
}

}  // namespace

Dataset synthetic_cifar(int64_t count, uint64_t seed) {
  // CIFAR-10's per-channel means and standard deviations (as in torchvision recipes).
  constexpr float kMean[3] = {0.4914f, 0.4822f, 0.4465f};
  constexpr float kStd[3] = {0.2470f, 0.2435f, 0.2616f};
  Dataset d;
  d.name = "synthetic-cifar";
  d.shape = {3, 32, 32};
  d.classes = 10;
  d.size = count;
  d.images.resize(static_cast<size_t>(count * 3072));
  d.labels.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    // Each sample depends only on (seed, i): any prefix of a larger set is the smaller set.
    Rng rng(Rng::mix(seed, static_cast<uint64_t>(i)));
    const int k = static_cast<int>(rng.below(10));
    d.labels[static_cast<size_t>(i)] = k;
    float* img = d.images.data() + i * 3072;
    render(k, rng, img);
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 1024; ++p) img[c * 1024 + p] = (img[c * 1024 + p] - kMean[c]) / kStd[c];
  }
  return d;
}

}  // namespace dltune::engine
