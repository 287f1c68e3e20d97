// oneDNN's engine, its instruction-set limit from the engine's CPU features (DLTUNE_CPU_MASK
// reaches it), its threads, and the matrix-product peak figure (engine/ops/onednn.h).
#include "engine/ops/onednn.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "common/stats.h"
#include "engine/core/cpu_features.h"
#include "engine/ops/onednn_internal.h"

extern "C" void omp_set_num_threads(int);  // GNU OpenMP: oneDNN's threading runtime here

namespace dltune::engine {
namespace onednn_detail {

dnnl::engine& cpu_engine() {
  static dnnl::engine* e = [] {
    // The masked features bound the instruction set oneDNN may generate code for, so that a
    // test masking bf16 or AMX sees oneDNN without them too. Must precede the first primitive.
    const CpuFeatures& f = cpu_features();
    dnnl::cpu_isa isa = dnnl::cpu_isa::all;
    if (!f.avx2) {
      isa = dnnl::cpu_isa::sse41;
    } else if (!f.avx512) {
      isa = dnnl::cpu_isa::avx2;
    } else if (!f.avx512_bf16) {
      isa = dnnl::cpu_isa::avx512_core;
    } else if (!f.amx_bf16) {
      isa = dnnl::cpu_isa::avx512_core_bf16;
    }
    if (isa != dnnl::cpu_isa::all) (void)dnnl::set_max_cpu_isa(isa);
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return *e;
}

void one_thread_here() {
  thread_local bool done = false;
  if (done) return;
  omp_set_num_threads(1);
  done = true;
}

}  // namespace onednn_detail

bool onednn_available() { return true; }

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

void onednn_use_one_thread() { onednn_detail::one_thread_here(); }

double onednn_matmul_gflops(int64_t n, Precision p, double seconds) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  onednn_detail::one_thread_here();
  dnnl::engine& eng = onednn_detail::cpu_engine();
  const dt in = p == Precision::kBf16 ? dt::bf16 : dt::f32;
  const memory::dims d = {n, n};
  try {
    memory::desc a(d, in, tag::ab), b(d, in, tag::ab), c(d, dt::f32, tag::ab);
    matmul::primitive_desc pd(matmul::desc(a, b, c), eng);
    const std::string impl = pd.impl_info_str();
    if (impl.find("ref") != std::string::npos) return -1.0;  // no real kernel for this type
    memory ma(a, eng), mb(b, eng), mc(c, eng);
    // Inputs of ordinary magnitude (the buffers come uninitialised).
    std::vector<float> ones(static_cast<size_t>(n * n), 0.5f);
    memory src(memory::desc(d, dt::f32, tag::ab), eng, ones.data());
    stream s(eng);
    reorder(src, ma).execute(s, src, ma);
    reorder(src, mb).execute(s, src, mb);
    matmul mm(pd);
    auto run = [&] {
      mm.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
      s.wait();
    };
    run();
    std::vector<double> rates;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (rates.size() < 3 || std::chrono::steady_clock::now() < end) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      const double dt_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rates.push_back(2.0 * static_cast<double>(n) * n * n / dt_s / 1e9);
    }
    return stats::median(rates);
  } catch (const dnnl::error&) {
    return -1.0;
  }
}

}  // namespace dltune::engine
