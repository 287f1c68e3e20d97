#include "engine/ops/conv_winograd.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <immintrin.h>

#include "engine/ops/vec.h"

// The transforms and GEMMs of engine/ops/conv_winograd.h, in GCC's vector extension for
// AVX2 + FMA (8 floats a vector, 16 registers).
//
// One thread's scratch (WinogradShape::scratch_floats()), its staged planes plane_floats() apart:
//   t    one channel split by row and column parity: 4 planes of (th + 3, tw)
//   z    2 staging planes (even and odd output rows, or output-gradient rows): (th, row) each
//   v    V of a block: (16, max(c, oc), vt)
//   m    M of a block (forward), or A dY A' (weight gradient): (16, max(c, oc), vt)
//   du   the weight gradient in the Winograd domain: (16, oc, c)
// A block's tiles are its images' in turn, s.tiles apart; vt (WinogradShape::stride) rounds
// them up to the GEMM's 24 columns and adds a vector for the transforms' reads past the end.

namespace dltune::engine {
namespace {

typedef float v8 __attribute__((vector_size(32)));

constexpr int kV = 8;                               // floats per vector
constexpr int kCols = 24;                           // the GEMM's register tile: 4 rows x 3 vectors
constexpr int64_t kSlack = 32;                      // past a staged plane: the vector reads' reach
constexpr int64_t kBlockFloats = int64_t{1} << 17;  // a block's V and M: 512 KiB
constexpr int64_t kWgradBlockFloats = int64_t{1} << 19;  // the weight gradient's: 2 MiB

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct Scratch {
  int64_t plane = 0;  // floats per staged plane, slack included
  float *t = nullptr, *z = nullptr, *v = nullptr, *m = nullptr, *du = nullptr;
};

// A staged plane: the larger of the staging's (th rows of `row`) and a parity plane's (th + 3
// rows of tw: a zero row before the image, the zero row after it and one more that the last
// vectors read), plus what vectors read past either.
int64_t plane_floats(const WinogradShape& s) {
  return std::max(s.th * s.row, (s.th + 3) * int64_t{s.tw}) + kSlack;
}

Scratch carve(const WinogradShape& s, float* p) {
  Scratch k;
  k.plane = plane_floats(s);
  k.t = p;
  k.z = k.t + 4 * k.plane;
  k.v = k.z + 2 * k.plane;
  const int64_t vt = std::max(s.stride(s.images), s.stride(s.wgrad_images));
  k.m = k.v + int64_t{16} * std::max(s.c, s.oc) * vt;
  k.du = k.m + int64_t{16} * std::max(s.c, s.oc) * vt;
  return k;
}

[[gnu::always_inline]] inline v8 even(v8 a, v8 b) {
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
}
[[gnu::always_inline]] inline v8 odd(v8 a, v8 b) {
  return __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
}

// F(2, 3)'s matrices as 1-D transforms, of floats or of vectors of 8 tiles; each 2-D transform
// applies one along a patch's rows, then along its columns.
//   B' (input):  [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//   G (weights): [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   G' (weight gradient back): [1 1/2 1/2 0; 0 1/2 -1/2 0; 0 1/2 1/2 1]
//   A' (output): [1 1 1 0; 0 1 -1 -1]
//   A (output gradient): [1 0; 1 1; 1 -1; 0 -1]
template <class T>
[[gnu::always_inline]] inline std::array<T, 4> apply_bt(T d0, T d1, T d2, T d3) {
  return {d0 - d2, d1 + d2, d2 - d1, d1 - d3};
}
[[gnu::always_inline]] inline std::array<float, 4> apply_g(float g0, float g1, float g2) {
  return {g0, 0.5f * (g0 + g1 + g2), 0.5f * (g0 - g1 + g2), g2};
}
[[gnu::always_inline]] inline std::array<float, 3> apply_gt(float u0, float u1, float u2,
                                                            float u3) {
  return {u0 + 0.5f * (u1 + u2), 0.5f * (u1 - u2), 0.5f * (u1 + u2) + u3};
}
template <class T>
[[gnu::always_inline]] inline std::array<T, 2> apply_at(T m0, T m1, T m2, T m3) {
  return {m0 + m1 + m2, m1 - m2 - m3};
}
template <class T>
[[gnu::always_inline]] inline std::array<T, 4> apply_a(T x, T y) {
  return {x, x + y, x - y, -y};
}

// The parity planes' zero rows (row -1 of the odd-row planes; row th on, which the last vectors
// also read, of all four), which input_transform never writes: once per call of the kernel.
void clear_parity_pads(const WinogradShape& s, const Scratch& sc) {
  for (int k = 0; k < 4; ++k) {
    float* plane = sc.t + k * sc.plane;
    std::memset(plane, 0, sizeof(float) * s.tw);
    const int64_t end = s.tw + int64_t{s.th} * s.tw;
    std::memset(plane + end, 0, sizeof(float) * (sc.plane - end));
  }
}

// v[xi * xi_stride + m] <- (B' d B)[xi] of tile m of one channel's plane src (h, w), for the
// s.tiles tiles (and up to 7 past them, finite); clear_parity_pads() ran on sc.
//
// The 4x4 patch of tile (i, j) is image rows 2i-1 .. 2i+2 and columns 2j-1 .. 2j+2. The
// channel is first split by the parity of its rows and columns into four planes of tw columns,
// so that every row and column of every tile's patch sits at a fixed flat offset from the
// tile's index m = i tw + j (no shuffles in the transform itself):
//   t[0] (2i, 2j - 1): odd columns of even rows     t[1] (2i + 1, 2j - 1): odd columns, odd rows
//   t[2] (2i, 2j): even columns of even rows        t[3] (2i + 1, 2j): even columns, odd rows
// zero where that is outside the image (column -1, column w, row -1 of the odd-row planes, row
// h of the even-row ones). Patch row 2i-1 is then the odd-row plane at m - tw, 2i the even one
// at m, 2i+1 the odd one at m, 2i+2 the even one at m + tw; patch columns 2j-1, 2j, 2j+1, 2j+2
// are the odd-column planes at m, the even-column ones at m, the odd-column ones at m + 1,
// the even-column ones at m + 1.
DLTUNE_AVX2 void input_transform(const WinogradShape& s, const Scratch& sc, const float* src,
                                 float* v, int64_t xi_stride) {
  const int w = s.w, half = w / 2, tw = s.tw;
  float* p[4];
  for (int k = 0; k < 4; ++k) p[k] = sc.t + k * sc.plane + tw;  // row 0; row -1 before it
  for (int y = 0; y < s.h; ++y) {
    const float* r = src + int64_t{y} * w;
    float* odd_cols = p[y % 2] + int64_t{y / 2} * tw;       // column 2j - 1 at j
    float* even_cols = p[2 + y % 2] + int64_t{y / 2} * tw;  // column 2j at j
    odd_cols[0] = 0.0f;
    even_cols[half] = 0.0f;
    int j = 0;
    for (; 2 * j + 2 * kV <= w; j += kV) {
      const v8 a = vload<v8>(r + 2 * j), b = vload<v8>(r + 2 * j + kV);
      vstore(even_cols + j, even(a, b));
      vstore(odd_cols + j + 1, odd(a, b));
    }
    for (; j < half; ++j) {
      even_cols[j] = r[2 * j];
      odd_cols[j + 1] = r[2 * j + 1];
    }
  }
  for (int64_t m = 0; m < s.tiles; m += kV) {
    // B' along the patch's rows, for the column sets (odd or even planes) at m and m + 1.
    v8 t[4][4];  // [k][odd columns at m, at m + 1, even columns at m, at m + 1]
    for (int set = 0; set < 4; ++set) {
      const float* pe = p[(set / 2) * 2] + m + set % 2;  // even rows
      const float* po = p[(set / 2) * 2 + 1] + m + set % 2;
      const auto c = apply_bt(vload<v8>(po - tw), vload<v8>(pe), vload<v8>(po), vload<v8>(pe + tw));
      for (int k = 0; k < 4; ++k) t[k][set] = c[k];
    }
    // B' along its columns: 2j-1 (odd at m), 2j (even at m), 2j+1 (odd at m+1), 2j+2 (even at m+1).
    for (int k = 0; k < 4; ++k) {
      const auto c = apply_bt(t[k][0], t[k][2], t[k][1], t[k][3]);
      for (int l = 0; l < 4; ++l) vstore(v + (4 * k + l) * xi_stride + m, c[l]);
    }
  }
}

// The 2x2 outputs A' m A of the 8 tiles from m (m[xi * xi_stride]), interleaved: rows[r] holds
// output row r of the 8 tiles, 16 floats: y(r, 0) y(r, 1) of the first tile, then the next.
DLTUNE_AVX2 [[gnu::always_inline]] inline void output_tiles(const float* m, int64_t xi_stride,
                                                            v8 (&rows)[2][2]) {
  v8 q[16];
  for (int xi = 0; xi < 16; ++xi) q[xi] = vload<v8>(m + xi * xi_stride);
  v8 col[2][4];  // A' along the patch's columns: [output row][column]
  for (int x = 0; x < 4; ++x) {
    const auto c = apply_at(q[x], q[4 + x], q[8 + x], q[12 + x]);
    col[0][x] = c[0], col[1][x] = c[1];
  }
  const std::array<v8, 2> y[2] = {apply_at(col[0][0], col[0][1], col[0][2], col[0][3]),
                                  apply_at(col[1][0], col[1][1], col[1][2], col[1][3])};
  for (int r = 0; r < 2; ++r) {
    rows[r][0] = __builtin_shufflevector(y[r][0], y[r][1], 0, 8, 1, 9, 2, 10, 3, 11);
    rows[r][1] = __builtin_shufflevector(y[r][0], y[r][1], 4, 12, 5, 13, 6, 14, 7, 15);
  }
}

// dst[0, n) = (or += when accumulate) src[0, n) + bias.
DLTUNE_AVX2 [[gnu::always_inline]] inline void store_row(const float* src, int n, float bias,
                                                         bool accumulate, float* dst) {
  int x = 0;
  for (; x + kV <= n; x += kV) {
    v8 r = vload<v8>(src + x) + bias;
    if (accumulate) r += vload<v8>(dst + x);
    vstore(dst + x, r);
  }
  for (; x < n; ++x) dst[x] = (accumulate ? dst[x] : 0.0f) + bias + src[x];
}

// out (h, w) = (or += when accumulate) bias + A' m A of every tile, m[xi * xi_stride + tile].
// Where a row's tiles are whole vectors (w a multiple of 16) each vector's two output rows go
// straight to the output; otherwise the flat sequence of tiles is staged in z first.
DLTUNE_AVX2 void output_transform(const WinogradShape& s, const Scratch& sc, const float* m,
                                  int64_t xi_stride, float bias, bool accumulate, float* out) {
  if (s.w % (2 * kV) == 0) {
    for (int i = 0; i < s.th; ++i) {
      for (int j = 0; 2 * j < s.w; j += kV) {
        v8 rows[2][2];
        output_tiles(m + int64_t{i} * s.tw + j, xi_stride, rows);
        for (int r = 0; r < 2; ++r) {
          float* dst = out + (2 * int64_t{i} + r) * s.w + 2 * j;
          for (int half = 0; half < 2; ++half) {
            v8 v = rows[r][half] + bias;
            if (accumulate) v += vload<v8>(dst + half * kV);
            vstore(dst + half * kV, v);
          }
        }
      }
    }
    return;
  }
  float* z[2] = {sc.z, sc.z + sc.plane};
  for (int64_t t = 0; t < s.tiles; t += kV) {
    v8 rows[2][2];
    output_tiles(m + t, xi_stride, rows);
    for (int r = 0; r < 2; ++r) {
      vstore(z[r] + 2 * t, rows[r][0]);
      vstore(z[r] + 2 * t + kV, rows[r][1]);
    }
  }
  for (int y = 0; y < s.h; ++y)
    store_row(z[y % 2] + (y / 2) * s.row, s.w, bias, accumulate, out + int64_t{y} * s.w);
}

// m (cout, vt) <- u (cout/4, cin, 4) x v (cin, vt), columns [0, cols) (cols % 24 == 0).
DLTUNE_AVX2 void gemm(const float* u, const float* v, int cin, int cout, int64_t cols, int64_t vt,
                      float* m) {
  for (int ob = 0; ob < cout / 4; ++ob) {
    const float* ub = u + int64_t{ob} * cin * 4;
    for (int64_t t = 0; t < cols; t += kCols) {
      v8 acc[4][3] = {};
      const float* vp = v + t;
      for (int ci = 0; ci < cin; ++ci, vp += vt) {
        const v8 x0 = vload<v8>(vp), x1 = vload<v8>(vp + kV), x2 = vload<v8>(vp + 2 * kV);
        const float* wp = ub + ci * 4;
        for (int o = 0; o < 4; ++o) {
          const float wv = wp[o];
          acc[o][0] += wv * x0;
          acc[o][1] += wv * x1;
          acc[o][2] += wv * x2;
        }
      }
      for (int o = 0; o < 4; ++o)
        for (int j = 0; j < 3; ++j) vstore(m + (int64_t{ob} * 4 + o) * vt + t + j * kV, acc[o][j]);
    }
  }
}

// v (16, channels, vt) at tiles [0, nb * s.tiles) <- the input transform of images
// [n0, n0 + nb) of in (images, channels, h, w), one image's tiles after another's.
void transform_block(const WinogradShape& s, const Scratch& sc, const float* in, int channels,
                     int n0, int nb, int64_t vt, float* v) {
  const int64_t plane = int64_t{s.h} * s.w;
  for (int n = 0; n < nb; ++n)
    for (int ci = 0; ci < channels; ++ci)
      input_transform(s, sc, in + ((int64_t{n0} + n) * channels + ci) * plane,
                      v + ci * vt + n * s.tiles, channels * vt);
}

// One correlation of `images` images: out (images, cout, h, w) from in (images, cin, h, w) with
// transformed weights u (16, cout/4, cin, 4).
DLTUNE_AVX2 void correlate(const WinogradShape& s, const float* u, int cin, int cout,
                           const float* bias, const float* in, int images, float* out,
                           bool accumulate, float* scratch) {
  const Scratch sc = carve(s, scratch);
  clear_parity_pads(s, sc);
  const int64_t plane = int64_t{s.h} * s.w;
  const int64_t vt = s.stride(s.images);
  const int64_t vx = int64_t{cin} * vt, mx = int64_t{cout} * vt;  // per xi
  for (int n0 = 0; n0 < images; n0 += s.images) {
    const int nb = std::min(s.images, images - n0);
    transform_block(s, sc, in, cin, n0, nb, vt, sc.v);
    const int64_t cols = round_up(nb * s.tiles, kCols);
    for (int xi = 0; xi < 16; ++xi)
      gemm(u + xi * int64_t{cout} * cin, sc.v + xi * vx, cin, cout, cols, vt, sc.m + xi * mx);
    for (int n = 0; n < nb; ++n)
      for (int co = 0; co < cout; ++co)
        output_transform(s, sc, sc.m + co * vt + n * s.tiles, mx, bias == nullptr ? 0.0f : bias[co],
                         accumulate, out + ((int64_t{n0} + n) * cout + co) * plane);
  }
}

// d[xi * xi_stride] <- (A g A')[xi] of 8 tiles' 2x2 output gradients: columns 2j, 2j + 1 of
// a0 a1 (16 floats of the tiles' first row) and b0 b1 (of their second).
DLTUNE_AVX2 [[gnu::always_inline]] inline void grad_tiles(v8 a0, v8 a1, v8 b0, v8 b1, float* d,
                                                          int64_t xi_stride) {
  // The tile [[p, q], [r, t]]: A along its columns, then along the rows that gives.
  const v8 p = even(a0, a1), q = odd(a0, a1), r = even(b0, b1), t = odd(b0, b1);
  const auto left = apply_a(p, r), right = apply_a(q, t);
  for (int k = 0; k < 4; ++k) {
    const auto c = apply_a(left[k], right[k]);
    for (int l = 0; l < 4; ++l) vstore(d + (4 * k + l) * xi_stride, c[l]);
  }
}

// d[xi * xi_stride + m] <- (A g A')[xi] of the 2x2 output-gradient tile m of one channel's
// plane src (h, w); zero for the tiles past each row's end. The rows are staged in z first,
// two zero columns after each. (Reading whole vectors of a row's tiles from the plane, as the
// output transform writes them, leaves those tiles to zero one float at a time in each of
// the 16 planes of d: on resnet20's 16x16 stage that cost more than the staging saves.)
DLTUNE_AVX2 void grad_transform(const WinogradShape& s, const Scratch& sc, const float* src,
                                float* d, int64_t xi_stride) {
  float* z0 = sc.z;
  float* z1 = sc.z + sc.plane;
  for (int i = 0; i < s.th; ++i) {
    for (int r = 0; r < 2; ++r) {
      float* dst = (r == 0 ? z0 : z1) + i * s.row;
      std::memcpy(dst, src + (2 * i + r) * int64_t{s.w}, sizeof(float) * s.w);
      dst[s.w] = dst[s.w + 1] = 0.0f;
    }
  }
  std::memset(z0 + s.th * s.row, 0, sizeof(float) * kSlack);
  std::memset(z1 + s.th * s.row, 0, sizeof(float) * kSlack);
  for (int64_t m = 0; m < s.tiles; m += kV)
    grad_tiles(vload<v8>(z0 + 2 * m), vload<v8>(z0 + 2 * m + kV), vload<v8>(z1 + 2 * m),
               vload<v8>(z1 + 2 * m + kV), d + m, xi_stride);
}

// sums[i] <- the lanes of x[i] added, for 8 vectors.
DLTUNE_AVX2 [[gnu::always_inline]] inline void sum_lanes(const v8 (&x)[8], float* sums) {
  const __m256 t0 = _mm256_hadd_ps(__m256(x[0]), __m256(x[1]));
  const __m256 t1 = _mm256_hadd_ps(__m256(x[2]), __m256(x[3]));
  const __m256 t2 = _mm256_hadd_ps(__m256(x[4]), __m256(x[5]));
  const __m256 t3 = _mm256_hadd_ps(__m256(x[6]), __m256(x[7]));
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  _mm256_storeu_ps(sums, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                       _mm256_permute2f128_ps(u0, u1, 0x31)));
}

// du (4, c) at columns c0 .. c0 + NC - 1 += d (4 rows, vt apart) x v (NC rows)' over
// [0, cols): 4 x NC accumulators, each output-gradient vector loaded once for NC multiply-adds.
template <int NC>
DLTUNE_AVX2 [[gnu::always_inline]] inline void nt_tile(const float* d, const float* v, int64_t cols,
                                                       int64_t vt, int c, float* du) {
  v8 acc[4][NC] = {};
  for (int64_t t = 0; t < cols; t += kV) {
    v8 x[NC];
    for (int j = 0; j < NC; ++j) x[j] = vload<v8>(v + j * vt + t);
    for (int o = 0; o < 4; ++o) {
      const v8 g = vload<v8>(d + o * vt + t);
      for (int j = 0; j < NC; ++j) acc[o][j] += g * x[j];
    }
  }
  v8 lanes[2][8] = {};
  for (int o = 0; o < 4; ++o)
    for (int j = 0; j < NC; ++j) lanes[(o * NC + j) / 8][(o * NC + j) % 8] = acc[o][j];
  float sums[16];
  sum_lanes(lanes[0], sums);
  if (4 * NC > 8) sum_lanes(lanes[1], sums + 8);
  for (int o = 0; o < 4; ++o)
    for (int j = 0; j < NC; ++j) du[o * int64_t{c} + j] += sums[o * NC + j];
}

// du (oc, c) += d (oc, vt) x v (c, vt)' over columns [0, cols) (cols % 8 == 0): tiles of 4
// output channels x 3 input channels (12 accumulators, 7 loads per 12 multiply-adds).
DLTUNE_AVX2 void gemm_nt(const float* d, const float* v, int oc, int c, int64_t cols, int64_t vt,
                         float* du) {
  for (int o0 = 0; o0 < oc; o0 += 4) {
    const float* dp = d + o0 * vt;
    float* row = du + o0 * int64_t{c};
    int c0 = 0;
    for (; c0 + 3 <= c; c0 += 3) nt_tile<3>(dp, v + c0 * vt, cols, vt, c, row + c0);
    if (c - c0 == 2) nt_tile<2>(dp, v + c0 * vt, cols, vt, c, row + c0);
    if (c - c0 == 1) nt_tile<1>(dp, v + c0 * vt, cols, vt, c, row + c0);
  }
}

}  // namespace

bool WinogradShape::init(int in_channels, int out_channels, int in_h, int in_w) {
  if (in_h < 2 || in_w < 2 || in_h % 2 != 0 || in_w % 2 != 0) return false;
  if (in_channels < 4 || out_channels < 4 || in_channels % 4 != 0 || out_channels % 4 != 0)
    return false;
  c = in_channels, oc = out_channels, h = in_h, w = in_w;
  th = h / 2;
  tw = w / 2 + 1;
  tiles = int64_t{th} * tw;
  row = w + 2;
  const int64_t per_image = int64_t{32} * std::max(c, oc) * tiles;
  images = static_cast<int>(std::max<int64_t>(1, kBlockFloats / per_image));
  wgrad_images = static_cast<int>(
      std::max<int64_t>(images, kWgradBlockFloats / (int64_t{16} * (c + oc) * tiles)));
  return true;
}

int64_t WinogradShape::stride(int n) const { return round_up(n * tiles, kCols) + kV; }

int64_t WinogradShape::scratch_floats() const {
  const int64_t plane = plane_floats(*this);
  const int64_t vt = std::max(stride(images), stride(wgrad_images));
  return 6 * plane + int64_t{32} * std::max(c, oc) * vt + int64_t{16} * oc * c;
}

bool winograd_runs() { return use_avx2_kernels(); }

void winograd_pack_part(const WinogradShape& s, const float* w, int part, float* packed) {
  // U = G g G' (u[4 r + x]).
  auto transform = [](const float* g, float* u) {
    float t[4][3];
    for (int j = 0; j < 3; ++j) {
      const auto c = apply_g(g[j], g[3 + j], g[6 + j]);
      for (int r = 0; r < 4; ++r) t[r][j] = c[r];
    }
    for (int r = 0; r < 4; ++r) {
      const auto c = apply_g(t[r][0], t[r][1], t[r][2]);
      std::copy(c.begin(), c.end(), u + 4 * r);
    }
  };
  // Direction (cin, cout): u[xi][co / 4][ci][co % 4], output channels 4 part .. 4 part + 3.
  const bool transpose = part >= s.oc / 4;
  const int cin = transpose ? s.oc : s.c, cout = transpose ? s.c : s.oc;
  const int block = transpose ? part - s.oc / 4 : part;
  float* dst = packed + (transpose ? int64_t{16} * s.oc * s.c : 0);
  for (int co = 4 * block; co < 4 * block + 4; ++co) {
    for (int ci = 0; ci < cin; ++ci) {
      float g[9], u[16];
      const int o = transpose ? ci : co, c = transpose ? co : ci;
      const float* k = w + (int64_t{o} * s.c + c) * 9;
      // The input gradient correlates with the kernel flipped in both directions.
      for (int t = 0; t < 9; ++t) g[t] = transpose ? k[8 - t] : k[t];
      transform(g, u);
      for (int xi = 0; xi < 16; ++xi)
        dst[((int64_t{xi} * (cout / 4) + block) * cin + ci) * 4 + co % 4] = u[xi];
    }
  }
}

void winograd_pack(const WinogradShape& s, const float* w, float* packed) {
  for (int p = 0; p < s.pack_parts(); ++p) winograd_pack_part(s, w, p, packed);
}

void winograd_forward(const WinogradShape& s, const float* packed, const float* bias,
                      const float* in, int images, float* out, bool accumulate, float* scratch) {
  correlate(s, packed, s.c, s.oc, bias, in, images, out, accumulate, scratch);
}

void winograd_input_grad(const WinogradShape& s, const float* packed, const float* dout, int images,
                         float* din, bool accumulate, float* scratch) {
  correlate(s, packed + int64_t{16} * s.oc * s.c, s.oc, s.c, nullptr, dout, images, din, accumulate,
            scratch);
}

void winograd_weight_grad(const WinogradShape& s, const float* in, const float* dout, int images,
                          float* dw, bool accumulate, float* scratch) {
  const Scratch sc = carve(s, scratch);
  clear_parity_pads(s, sc);
  std::memset(sc.du, 0, sizeof(float) * 16 * s.oc * s.c);
  const int64_t plane = int64_t{s.h} * s.w;
  const int64_t vt = s.stride(s.wgrad_images);
  const int64_t vx = int64_t{s.c} * vt, dx = int64_t{s.oc} * vt;  // per xi
  for (int n0 = 0; n0 < images; n0 += s.wgrad_images) {
    const int nb = std::min(s.wgrad_images, images - n0);
    const int64_t used = nb * s.tiles, cols = round_up(used, kV);
    transform_block(s, sc, in, s.c, n0, nb, vt, sc.v);
    for (int n = 0; n < nb; ++n) {
      for (int o = 0; o < s.oc; ++o)
        grad_transform(s, sc, dout + ((int64_t{n0} + n) * s.oc + o) * plane,
                       sc.m + o * vt + n * s.tiles, dx);
    }
    // The columns past the block's tiles: zero in both (0 x anything written before is not
    // enough: the scratch may hold NaNs).
    for (int xi = 0; xi < 16; ++xi) {
      for (int ci = 0; ci < s.c; ++ci)
        std::memset(sc.v + xi * vx + ci * vt + used, 0, sizeof(float) * (cols - used));
      for (int o = 0; o < s.oc; ++o)
        std::memset(sc.m + xi * dx + o * vt + used, 0, sizeof(float) * (cols - used));
    }
    for (int xi = 0; xi < 16; ++xi)
      gemm_nt(sc.m + xi * dx, sc.v + xi * vx, s.oc, s.c, cols, vt,
              sc.du + xi * int64_t{s.oc} * s.c);
  }
  // dW = G' dU G.
  for (int o = 0; o < s.oc; ++o) {
    for (int ci = 0; ci < s.c; ++ci) {
      float u[16], t[3][4];
      for (int xi = 0; xi < 16; ++xi) u[xi] = sc.du[(xi * int64_t{s.oc} + o) * s.c + ci];
      for (int x = 0; x < 4; ++x) {
        const auto c = apply_gt(u[x], u[4 + x], u[8 + x], u[12 + x]);
        for (int r = 0; r < 3; ++r) t[r][x] = c[r];
      }
      float* k = dw + (int64_t{o} * s.c + ci) * 9;
      for (int r = 0; r < 3; ++r) {
        const auto g = apply_gt(t[r][0], t[r][1], t[r][2], t[r][3]);
        for (int j = 0; j < 3; ++j) k[3 * r + j] = (accumulate ? k[3 * r + j] : 0.0f) + g[j];
      }
    }
  }
}

}  // namespace dltune::engine
