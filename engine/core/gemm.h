// Single-precision matrix products on the rank's threads, with results that do not depend on the
// thread count.
//
// How: C is cut into a grid of blocks that is a function of (M, N, K) alone (gemm_grid), and
// every block is one call of the BLAS library on one thread (OpenBLAS runs single-threaded in
// the engine: engine/core/thread_pool.h). A block's elements are computed by the same call
// whatever the thread count, so the bits are the same on 1 or 4 threads; K (the reduction) is
// never split. What is NOT promised: the same bits as one cblas_sgemm of the whole product
// (OpenBLAS's kernels may order an element's adds differently for another block shape).
#pragma once

#include <cstdint>

#include "engine/core/thread_pool.h"

namespace dltune::engine {

// The block grid of an M x N x K product: mt row blocks x nt column blocks.
struct GemmGrid {
  int64_t mt = 1, nt = 1;
};
GemmGrid gemm_grid(int64_t M, int64_t N, int64_t K);

// Rows [m0, m1) and columns [n0, n1) of C in block `block` (0 <= block < g.mt * g.nt, row-major
// over the grid) of an M x N product; inner edges on multiples of 16.
void gemm_block(const GemmGrid& g, int64_t M, int64_t N, int64_t block, int64_t* m0, int64_t* m1,
                int64_t* n0, int64_t* n1);

// C (M, N) = alpha op(A) op(B) + beta C, row-major as cblas_sgemm(CblasRowMajor, ...): op(A) is
// (M, K) (A stored (K, M) when trans_a), op(B) is (K, N) (B stored (N, K) when trans_b).
// beta 0 writes C without reading it. Runs on `pool` over gemm_grid(M, N, K).
void parallel_sgemm(ThreadPool& pool, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                    float beta, float* C, int64_t ldc);

// The same product on the calling thread only (one BLAS call): for use inside a task.
void serial_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                  int64_t ldc);

}  // namespace dltune::engine
