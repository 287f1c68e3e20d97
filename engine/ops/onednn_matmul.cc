// Matrix products on oneDNN's matmul (engine/ops/onednn.h): Linear's "onednn" kernel. The blocks
// are parallel_sgemm's (engine/core/gemm.h's gemm_grid, a function of the shapes), each one
// single-threaded primitive with strided views of A, B and C (transposes are strides, no
// copies) and, to accumulate, a sum post-op; primitives are cached per block shape and
// strides, their scratchpad is the calling thread's own.
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/core/gemm.h"
#include "engine/core/parallel.h"
#include "engine/ops/onednn.h"
#include "engine/ops/onednn_internal.h"

namespace dltune::engine {
namespace {

using dnnl::memory;
using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, bool>;

struct Mm {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  memory::desc a, b, c;
};

// A (M, K) with rows lda apart, or its transpose stored (K, M); B (K, N) alike.
std::unique_ptr<Mm> make_mm(const Key& k) {
  const auto [M, N, K, ta, tb, lda, ldb, ldc, acc] = k;
  onednn_detail::one_thread_here();  // the work split of one thread (onednn_conv.cc says why)
  auto mm = std::make_unique<Mm>();
  const auto f32 = memory::data_type::f32;
  mm->a = memory::desc({M, K}, f32, ta ? memory::dims{1, lda} : memory::dims{lda, 1});
  mm->b = memory::desc({K, N}, f32, tb ? memory::dims{1, ldb} : memory::dims{ldb, 1});
  mm->c = memory::desc({M, N}, f32, memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (acc) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  mm->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(mm->a, mm->b, mm->c), attr,
                                        onednn_detail::cpu_engine());
  mm->prim = dnnl::matmul(mm->pd);
  return mm;
}

const Mm& cached(const Key& k) {
  static std::mutex mu;
  static std::map<Key, std::unique_ptr<Mm>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[k];
  if (!slot) slot = make_mm(k);
  return *slot;
}

}  // namespace

bool onednn_matmul_supported() {
  static const bool ok = [] {
    try {
      const Mm& m = cached(Key{64, 64, 64, false, true, 64, 64, 64, false});
      const std::string impl = m.pd.impl_info_str();
      return impl.find("ref") == std::string::npos;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

void onednn_parallel_matmul(ThreadPool& pool, bool trans_a, bool trans_b, int64_t M, int64_t N,
                            int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                            bool accumulate, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  const GemmGrid g = gemm_grid(M, N, K);
  pool.run(g.mt * g.nt, [&](int64_t task, int) {
    onednn_detail::one_thread_here();
    int64_t m0 = 0, m1 = 0, n0 = 0, n1 = 0;
    gemm_block(g, M, N, task, &m0, &m1, &n0, &n1);
    const Mm& mm = cached(Key{m1 - m0, n1 - n0, K, trans_a, trans_b, lda, ldb, ldc, accumulate});
    thread_local std::vector<char> pad;
    const size_t pad_bytes = mm.pd.scratchpad_desc().get_size();
    if (pad.size() < pad_bytes) pad.resize(pad_bytes);
    dnnl::engine& eng = onednn_detail::cpu_engine();
    const float* a = trans_a ? A + m0 : A + m0 * lda;
    const float* b = trans_b ? B + n0 * ldb : B + n0;
    memory ma(mm.a, eng, const_cast<float*>(a));
    memory mb(mm.b, eng, const_cast<float*>(b));
    memory mc(mm.c, eng, C + m0 * ldc + n0);
    memory mp(mm.pd.scratchpad_desc(), eng, pad.data());
    dnnl::stream st(eng);
    mm.prim.execute(st, {{DNNL_ARG_SRC, ma},
                         {DNNL_ARG_WEIGHTS, mb},
                         {DNNL_ARG_DST, mc},
                         {DNNL_ARG_SCRATCHPAD, mp}});
    st.wait();
  });
}

}  // namespace dltune::engine
