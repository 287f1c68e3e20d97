#include "engine/data/image_transform.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace dltune::engine {
namespace {

// Python's round(): to the nearest, ties to even (torchvision's geometry uses it).
int py_round(double v) { return static_cast<int>(std::nearbyint(v)); }

// The taps of one axis: output i of the window reads inputs [first[i], first[i] + count[i])
// of the region with weights w[i * stride ...].
struct Taps {
  std::vector<int> first, count;
  std::vector<float> w;
  int stride = 0;
};

// PIL's precompute_coeffs for the bilinear filter (support 1), outputs [o, o + n) of a virtual
// axis of `virt` pixels over a region of `in` input pixels.
Taps make_taps(int in, int virt, int o, int n) {
  const double scale = static_cast<double>(in) / virt;
  const double fs = std::max(scale, 1.0);
  const double support = fs;
  Taps t;
  t.stride = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(static_cast<size_t>(n));
  t.count.resize(static_cast<size_t>(n));
  t.w.assign(static_cast<size_t>(n) * t.stride, 0.0f);
  std::vector<double> w(static_cast<size_t>(t.stride));
  for (int i = 0; i < n; ++i) {
    const double center = (o + i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(center + support + 0.5), in);
    const int k = std::min(hi - lo, t.stride);
    double sum = 0;
    for (int x = 0; x < k; ++x) {
      const double d = std::abs((x + lo - center + 0.5) / fs);
      w[static_cast<size_t>(x)] = d < 1.0 ? 1.0 - d : 0.0;
      sum += w[static_cast<size_t>(x)];
    }
    t.first[static_cast<size_t>(i)] = lo;
    t.count[static_cast<size_t>(i)] = k;
    for (int x = 0; x < k; ++x)
      t.w[static_cast<size_t>(i) * t.stride + x] =
          static_cast<float>(sum != 0 ? w[static_cast<size_t>(x)] / sum : 0);
  }
  return t;
}

}  // namespace

CropBox random_resized_crop(int width, int height, Rng& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.08 + (1.0 - 0.08) * rng.uniform());
    const double ratio = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const auto w = py_round(std::sqrt(target * ratio));
    const auto h = py_round(std::sqrt(target / ratio));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int y = static_cast<int>(rng.below(static_cast<uint64_t>(height - h + 1)));
      const int x = static_cast<int>(rng.below(static_cast<uint64_t>(width - w + 1)));
      return {x, y, w, h};
    }
  }
  // The fallback: the centred box at the nearest allowed ratio.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < 3.0 / 4.0)
    h = py_round(w / (3.0 / 4.0));
  else if (in_ratio > 4.0 / 3.0)
    w = py_round(h * (4.0 / 3.0));
  h = std::clamp(h, 1, height);
  w = std::clamp(w, 1, width);
  return {(width - w) / 2, (height - h) / 2, w, h};
}

int eval_resize_side(int out) { return py_round(out / 0.875); }

EvalGeometry eval_geometry(int width, int height, int shorter, int out_w, int out_h) {
  EvalGeometry g;
  if (width <= height) {
    g.resized_w = shorter;
    g.resized_h = static_cast<int>(static_cast<int64_t>(shorter) * height / width);
  } else {
    g.resized_h = shorter;
    g.resized_w = static_cast<int>(static_cast<int64_t>(shorter) * width / height);
  }
  g.window_x = py_round((g.resized_w - out_w) / 2.0);
  g.window_y = py_round((g.resized_h - out_h) / 2.0);
  return g;
}

void resample_normalize(const RgbImage& img, const ResampleJob& j, const float mean[3],
                        const float std[3], float* out) {
  const CropBox& r = j.region;
  DLTUNE_CHECK(r.x >= 0 && r.y >= 0 && r.w >= 1 && r.h >= 1 && r.x + r.w <= img.width &&
                   r.y + r.h <= img.height,
               "crop box outside the image");
  DLTUNE_CHECK(j.window_x >= 0 && j.window_y >= 0 && j.window_x + j.out_w <= j.virtual_w &&
                   j.window_y + j.out_h <= j.virtual_h,
               "window outside the virtual image");
  const Taps tx = make_taps(r.w, j.virtual_w, j.window_x, j.out_w);
  const Taps ty = make_taps(r.h, j.virtual_h, j.window_y, j.out_h);
  // The region's rows the vertical pass reads: [row0, row1).
  int row0 = r.h, row1 = 0;
  for (int y = 0; y < j.out_h; ++y) {
    row0 = std::min(row0, ty.first[static_cast<size_t>(y)]);
    row1 = std::max(row1, ty.first[static_cast<size_t>(y)] + ty.count[static_cast<size_t>(y)]);
  }
  // Horizontal pass: tmp (row1 - row0, out_w, 3).
  const int ow = j.out_w;
  std::vector<float> tmp(static_cast<size_t>(std::max(row1 - row0, 0)) * ow * 3);
  for (int row = row0; row < row1; ++row) {
    const uint8_t* src = img.rgb.data() + (static_cast<size_t>(r.y + row) * img.width + r.x) * 3;
    float* dst = tmp.data() + static_cast<size_t>(row - row0) * ow * 3;
    for (int x = 0; x < ow; ++x) {
      const float* w = tx.w.data() + static_cast<size_t>(x) * tx.stride;
      const uint8_t* s = src + tx.first[static_cast<size_t>(x)] * 3;
      float a = 0, b = 0, c = 0;
      for (int k = 0, n = tx.count[static_cast<size_t>(x)]; k < n; ++k) {
        a += w[k] * s[3 * k];
        b += w[k] * s[3 * k + 1];
        c += w[k] * s[3 * k + 2];
      }
      dst[3 * x] = a;
      dst[3 * x + 1] = b;
      dst[3 * x + 2] = c;
    }
  }
  // Vertical pass, normalisation and the flip: out (3, out_h, out_w).
  float scale[3], shift[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * std[c]);
    shift[c] = -mean[c] / std[c];
  }
  const size_t plane = static_cast<size_t>(j.out_h) * ow;
  for (int y = 0; y < j.out_h; ++y) {
    const float* w = ty.w.data() + static_cast<size_t>(y) * ty.stride;
    const int first = ty.first[static_cast<size_t>(y)] - row0, n = ty.count[static_cast<size_t>(y)];
    for (int x = 0; x < ow; ++x) {
      float acc[3] = {0, 0, 0};
      const float* s = tmp.data() + (static_cast<size_t>(first) * ow + x) * 3;
      for (int k = 0; k < n; ++k, s += static_cast<size_t>(ow) * 3) {
        acc[0] += w[k] * s[0];
        acc[1] += w[k] * s[1];
        acc[2] += w[k] * s[2];
      }
      const size_t at = static_cast<size_t>(y) * ow + (j.flip ? ow - 1 - x : x);
      for (int c = 0; c < 3; ++c) {
        // PIL rounds and clips to 8 bits; the float sum can stray a hair outside [0, 255].
        const float v = std::clamp(acc[c], 0.0f, 255.0f);
        out[c * plane + at] = v * scale[c] + shift[c];
      }
    }
  }
}

}  // namespace dltune::engine
