#include "engine/core/gemm.h"

#include <algorithm>

#include <cblas.h>

#include "engine/core/parallel.h"

namespace dltune::engine {
namespace {

// Block edges fall on multiples of 16 rows and 16 columns: whole cache lines of C's rows, and
// whole register tiles of OpenBLAS's and oneDNN's AVX2 / AVX-512 kernels. Measured on one Zen 3
// core, 256 x 512 x 784 cut into 3 x 2 and 6 x 4 blocks (rows not multiples of 16) took 6 % and
// 17 % longer than the same count as 2 x 3 and 4 x 6.
constexpr int64_t kAlign = 16;

void aligned_part(int64_t n, int64_t parts, int64_t part, int64_t* begin, int64_t* end) {
  part_range(n, parts, part, begin, end);
  *begin = part == 0 ? 0 : *begin / kAlign * kAlign;
  *end = part + 1 == parts ? n : *end / kAlign * kAlign;
}

}  // namespace

GemmGrid gemm_grid(int64_t M, int64_t N, int64_t K) {
  // How many blocks: at least ~kMinFlops each. The grid may not depend on the thread count (so
  // that neither do the results), so a rank on one thread runs every block too, each a BLAS call
  // that packs its panels of A and B again. Packing is what a grid costs: a block of bm x bn
  // packs (bm + bn) K floats for its bm bn K multiply-adds, so blocks should be large and square.
  // Measured with OpenBLAS 0.3.21 on one Zen 3 core (`bench-engine-rank train mlp 256 1 3`,
  // samples/s): one call per product 29,600; blocks of >= 32 MFLOP 28,200, >= 16 MFLOP 27,500,
  // >= 8 MFLOP 26,900; the grid before this one (>= 8 MFLOP, the short side split first, so
  // 8 x 3 blocks of 32 x 171 for 256 x 512 x 784) 24,200. 16 MFLOP is about 0.2 ms of one core
  // here: enough blocks for a few threads on a mid-size product, little repacking on one.
  constexpr double kMinFlops = 16e6;
  constexpr int64_t kMinRows = 32, kMinCols = 64;
  const double flops =
      2.0 * static_cast<double>(M) * static_cast<double>(N) * std::max<int64_t>(K, 1);
  const int64_t want = nice_task_count(static_cast<int64_t>(flops / kMinFlops));
  const int64_t max_m = std::max<int64_t>(1, M / kMinRows),
                max_n = std::max<int64_t>(1, N / kMinCols);
  // Of the grids with the most blocks (at most `want`), the one that packs least: mt N + nt M
  // floats per unit of K, smallest for square blocks.
  GemmGrid best;
  int64_t best_blocks = 0;
  double best_pack = 0;
  for (int64_t mt = 1; mt <= std::min(want, max_m); ++mt) {
    const int64_t nt = std::min(want / mt, max_n);
    const int64_t blocks = mt * nt;
    const double pack = static_cast<double>(mt) * N + static_cast<double>(nt) * M;
    if (blocks > best_blocks || (blocks == best_blocks && pack < best_pack)) {
      best = GemmGrid{mt, nt};
      best_blocks = blocks;
      best_pack = pack;
    }
  }
  return best;
}

void gemm_block(const GemmGrid& g, int64_t M, int64_t N, int64_t block, int64_t* m0, int64_t* m1,
                int64_t* n0, int64_t* n1) {
  aligned_part(M, g.mt, block / g.nt, m0, m1);
  aligned_part(N, g.nt, block % g.nt, n0, n1);
}

void serial_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                  int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
              static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta,
              C, static_cast<int>(ldc));
}

void parallel_sgemm(ThreadPool& pool, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                    float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  const GemmGrid g = gemm_grid(M, N, K);
  pool.run(g.mt * g.nt, [&](int64_t task, int) {
    int64_t m0 = 0, m1 = 0, n0 = 0, n1 = 0;
    gemm_block(g, M, N, task, &m0, &m1, &n0, &n1);
    const float* a = trans_a ? A + m0 : A + m0 * lda;
    const float* b = trans_b ? B + n0 * ldb : B + n0;
    serial_sgemm(trans_a, trans_b, m1 - m0, n1 - n0, K, alpha, a, lda, b, ldb, beta,
                 C + m0 * ldc + n0, ldc);
  });
}

}  // namespace dltune::engine
