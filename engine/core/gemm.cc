#include "engine/core/gemm.h"

#include <algorithm>

#include <cblas.h>

#include "engine/core/parallel.h"

namespace dltune::engine {

GemmGrid gemm_grid(int64_t M, int64_t N, int64_t K) {
  // Blocks of at least ~8 MFLOP (about 120 us on one core here) and at least 32 rows and 64
  // columns (narrower blocks lose the kernels' register tiles). The grid does not depend on the
  // thread count (so neither do the results), so one thread runs every block too, each a BLAS
  // call that packs its panels again: at 1 MFLOP a block (15 us) that cost mlp b64 on one
  // thread about 15 % (11,900 against 13,500 samples/s here); at 8 MFLOP it is within noise.
  constexpr double kMinFlops = 8e6;
  constexpr int64_t kMinRows = 32, kMinCols = 64;
  const double flops =
      2.0 * static_cast<double>(M) * static_cast<double>(N) * std::max<int64_t>(K, 1);
  const int64_t want = nice_task_count(static_cast<int64_t>(flops / kMinFlops));
  const int64_t max_m = std::max<int64_t>(1, M / kMinRows),
                max_n = std::max<int64_t>(1, N / kMinCols);
  GemmGrid g;
  // Split the longer side first (in units of its minimum block), then the other.
  if (M / kMinRows >= N / kMinCols) {
    g.mt = std::min(want, max_m);
    g.nt = std::min(std::max<int64_t>(1, want / g.mt), max_n);
  } else {
    g.nt = std::min(want, max_n);
    g.mt = std::min(std::max<int64_t>(1, want / g.nt), max_m);
  }
  return g;
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
    part_range(M, g.mt, task / g.nt, &m0, &m1);
    part_range(N, g.nt, task % g.nt, &n0, &n1);
    // Column blocks start on multiples of 16 floats (whole cache lines of C's rows).
    const int64_t nb = task % g.nt;
    n0 = nb == 0 ? 0 : n0 / 16 * 16;
    n1 = nb + 1 == g.nt ? N : n1 / 16 * 16;
    const float* a = trans_a ? A + m0 : A + m0 * lda;
    const float* b = trans_b ? B + n0 * ldb : B + n0;
    serial_sgemm(trans_a, trans_b, m1 - m0, n1 - n0, K, alpha, a, lda, b, ldb, beta,
                 C + m0 * ldc + n0, ldc);
  });
}

}  // namespace dltune::engine
