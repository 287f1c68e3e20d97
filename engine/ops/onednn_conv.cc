// Convolution on oneDNN (engine/ops/onednn.h): primitives per chunk size, run single-threaded
// inside the engine's tasks on chunks of kChunkImages images, in the layouts oneDNN's JIT
// kernels want (format_tag::any), reordered from and to the engine's NCHW in the thread's
// scratch. The weight gradient: one partial per group of consecutive chunks (a group runs its
// chunks in order on one thread), added in group order: no result depends on the thread count.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/core/cpu_features.h"
#include "engine/core/parallel.h"
#include "engine/ops/onednn.h"
#include "engine/ops/onednn_internal.h"

namespace dltune::engine {
namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

// Images per chunk (a function of the shape: the chunk's NCHW input and output within 1 Mi
// floats each), at most 4: batch 32 gives 8 chunks, work for up to 8 threads.
int chunk_images(const OnednnConvShape& s) {
  const int64_t per = std::max<int64_t>(int64_t{s.c} * s.h * s.w + int64_t{s.oc} * s.oh * s.ow, 1);
  return static_cast<int>(std::clamp<int64_t>((int64_t{1} << 20) / per, 1, 4));
}

constexpr int64_t kPartialBudgetFloats = int64_t{1} << 20;

int64_t floats_of(const memory::desc& d) {
  return (static_cast<int64_t>(d.get_size()) + 63) / 64 * 16;  // whole cache lines
}

// The primitives of one chunk size and the scratch layout of one thread.
struct Prims {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_backward_data::primitive_desc bwd_d_pd;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_d;
  dnnl::convolution_backward_weights bwd_w;
  memory::desc src_nchw, dst_nchw, w_oihw, bias_x;
  // Offsets (floats) of each region in the thread's scratch, and its total.
  int64_t o_src = 0, o_w = 0, o_dst = 0, o_ddst = 0, o_ddst_w = 0, o_src_w = 0, o_wd = 0,
          o_dsrc = 0, o_dw = 0, o_plain = 0, o_pad = 0, total = 0;
};

memory::dims conv_dims(const OnednnConvShape& s, int nb, bool input) {
  return input ? memory::dims{nb, s.c, s.h, s.w} : memory::dims{nb, s.oc, s.oh, s.ow};
}

memory::desc weights_desc(const OnednnConvShape& s, dt type, tag t) {
  if (s.groups == 1) return memory::desc({s.oc, s.c, s.k, s.k}, type, t);
  return memory::desc({s.groups, s.oc / s.groups, s.c / s.groups, s.k, s.k}, type,
                      t == tag::any ? tag::any : tag::goihw);
}

std::unique_ptr<Prims> make_prims(const OnednnConvShape& s, Precision p, int nb) {
  using namespace dnnl;
  // oneDNN sizes a primitive's work split by the creating thread's OpenMP thread count: one, as
  // every thread that runs it has (a split for two, run by one thread, sums in another order).
  onednn_detail::one_thread_here();
  dnnl::engine& eng = onednn_detail::cpu_engine();
  const dt d = p == Precision::kBf16 ? dt::bf16 : dt::f32;
  auto P = std::make_unique<Prims>();
  P->src_nchw = memory::desc(conv_dims(s, nb, true), dt::f32, tag::nchw);
  P->dst_nchw = memory::desc(conv_dims(s, nb, false), dt::f32, tag::nchw);
  P->w_oihw = weights_desc(s, dt::f32, s.groups == 1 ? tag::oihw : tag::goihw);
  P->bias_x = memory::desc({s.oc}, dt::f32, tag::x);
  const memory::desc src(conv_dims(s, nb, true), d, tag::any);
  const memory::desc dst(conv_dims(s, nb, false), d, tag::any);
  const memory::desc wei = weights_desc(s, d, tag::any);
  const memory::desc wei_f32 = weights_desc(s, dt::f32, tag::any);  // the weight gradient
  const memory::dims strides = {s.stride, s.stride}, pad = {s.pad, s.pad};
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);
  auto fdesc =
      s.bias ? convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                         src, wei, P->bias_x, dst, strides, pad, pad)
             : convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                         src, wei, dst, strides, pad, pad);
  P->fwd_pd = convolution_forward::primitive_desc(fdesc, attr, eng);
  P->bwd_d_pd = convolution_backward_data::primitive_desc(
      convolution_backward_data::desc(algorithm::convolution_direct, src, wei, dst, strides, pad,
                                      pad),
      attr, eng, P->fwd_pd);
  P->bwd_w_pd = convolution_backward_weights::primitive_desc(
      convolution_backward_weights::desc(algorithm::convolution_direct, src, wei_f32, dst, strides,
                                         pad, pad),
      attr, eng, P->fwd_pd);
  P->fwd = convolution_forward(P->fwd_pd);
  P->bwd_d = convolution_backward_data(P->bwd_d_pd);
  P->bwd_w = convolution_backward_weights(P->bwd_w_pd);
  // The thread's scratch: every blocked copy, one plain chunk (an added input gradient, or the
  // weight gradient), and the largest scratchpad.
  int64_t at = 0;
  auto take = [&](int64_t n) {
    const int64_t o = at;
    at += (n + 15) / 16 * 16;
    return o;
  };
  P->o_src = take(floats_of(P->fwd_pd.src_desc()));
  P->o_w = take(floats_of(P->fwd_pd.weights_desc()));
  P->o_dst = take(floats_of(P->fwd_pd.dst_desc()));
  P->o_ddst = take(floats_of(P->bwd_d_pd.diff_dst_desc()));
  P->o_ddst_w = take(floats_of(P->bwd_w_pd.diff_dst_desc()));
  P->o_src_w = take(floats_of(P->bwd_w_pd.src_desc()));
  P->o_wd = take(floats_of(P->bwd_d_pd.weights_desc()));
  P->o_dsrc = take(floats_of(P->bwd_d_pd.diff_src_desc()));
  P->o_dw = take(floats_of(P->bwd_w_pd.diff_weights_desc()));
  P->o_plain = take(std::max(floats_of(P->src_nchw), floats_of(P->w_oihw)));
  P->o_pad = take(
      std::max({floats_of(P->fwd_pd.scratchpad_desc()), floats_of(P->bwd_d_pd.scratchpad_desc()),
                floats_of(P->bwd_w_pd.scratchpad_desc())}));
  P->total = at;
  return P;
}

// The implementations oneDNN picked ("jit:avx2"), for a shape and precision: whether the engine
// offers it. Cached per shape (kernels() asks often).
std::string impl_of(const OnednnConvShape& s, Precision p) {
  static std::mutex mu;
  static std::map<std::tuple<int, int, int, int, int, int, int, int, bool, int>, std::string> cache;
  const auto key =
      std::make_tuple(s.c, s.h, s.w, s.oc, s.k, s.stride, s.pad, s.groups, s.bias, int(p));
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::string impl;
  try {
    auto P = make_prims(s, p, chunk_images(s));
    impl = std::string(P->fwd_pd.impl_info_str()) + " " + P->bwd_d_pd.impl_info_str() + " " +
           P->bwd_w_pd.impl_info_str();
  } catch (const dnnl::error& e) {
    impl = "";
  }
  cache[key] = impl;
  return impl;
}

class Conv final : public OnednnConv {
 public:
  Conv(const OnednnConvShape& s, Precision p) : s_(s), p_(p), nb_(chunk_images(s)) {}

  void reserve(int, int) override {}
  void release() override {}
  int64_t saved_floats(int, int) const override { return 0; }

  int64_t workspace_floats(int batch, int threads) const override {
    // The largest chunk's scratch per thread (the smaller remainders' primitives need no more),
    // and the partials.
    return partials(batch) * weight_floats() + threads * prims(std::min(batch, nb_)).total;
  }

  void forward(ThreadPool& pool, const float* in, const float* w, const float* b, float* out,
               int batch, float* workspace) override {
    const int T = (batch + nb_ - 1) / nb_;
    const int64_t per_thread = prims(std::min(batch, nb_)).total;
    pool.run(T, [&](int64_t t, int thread) {
      onednn_detail::one_thread_here();
      const int n0 = static_cast<int>(t) * nb_, nb = std::min(nb_, batch - n0);
      const Prims& P = prims(nb);
      float* ws = workspace + thread * per_thread;
      dnnl::engine& eng = onednn_detail::cpu_engine();
      dnnl::stream st(eng);
      memory user_src(P.src_nchw, eng, const_cast<float*>(in) + int64_t{n0} * in_floats());
      memory user_w(P.w_oihw, eng, const_cast<float*>(w));
      memory user_dst(P.dst_nchw, eng, out + int64_t{n0} * out_floats());
      memory src = convert(st, user_src, P.fwd_pd.src_desc(), ws + P.o_src);
      memory wei = convert(st, user_w, P.fwd_pd.weights_desc(), ws + P.o_w);
      memory dst = same(P.fwd_pd.dst_desc(), user_dst)
                       ? user_dst
                       : memory(P.fwd_pd.dst_desc(), eng, ws + P.o_dst);
      memory pad(P.fwd_pd.scratchpad_desc(), eng, ws + P.o_pad);
      std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src},
                                              {DNNL_ARG_WEIGHTS, wei},
                                              {DNNL_ARG_DST, dst},
                                              {DNNL_ARG_SCRATCHPAD, pad}};
      if (s_.bias) args[DNNL_ARG_BIAS] = memory(P.bias_x, eng, const_cast<float*>(b));
      P.fwd.execute(st, args);
      if (dst != user_dst) dnnl::reorder(dst, user_dst).execute(st, dst, user_dst);
      st.wait();
    });
  }

  void backward(ThreadPool& pool, const float* in, const float* w, const float* dout, float* din,
                bool din_acc, float* dw, bool dw_acc, int batch, float* workspace) override {
    const int T = (batch + nb_ - 1) / nb_, groups = partials(batch);
    const int64_t per_thread = prims(std::min(batch, nb_)).total;
    float* parts = workspace;  // (groups, weights)
    float* threads_ws = workspace + groups * weight_floats();
    pool.run(groups, [&](int64_t g, int thread) {
      onednn_detail::one_thread_here();
      int64_t t0 = 0, t1 = 0;
      part_range(T, groups, g, &t0, &t1);
      float* ws = threads_ws + thread * per_thread;
      float* part = parts + g * weight_floats();
      for (int64_t t = t0; t < t1; ++t) {
        const int n0 = static_cast<int>(t) * nb_, nb = std::min(nb_, batch - n0);
        chunk_backward(prims(nb), in, w, dout, din, din_acc, n0, part, t > t0, ws);
      }
    });
    sum_partials(pool, parts, weight_floats(), groups, weight_floats(), dw, dw_acc);
  }

 private:
  int64_t in_floats() const { return int64_t{s_.c} * s_.h * s_.w; }
  int64_t out_floats() const { return int64_t{s_.oc} * s_.oh * s_.ow; }
  int64_t weight_floats() const { return int64_t{s_.oc} * (s_.c / s_.groups) * s_.k * s_.k; }
  int partials(int batch) const {
    const int T = (batch + nb_ - 1) / nb_;
    return static_cast<int>(
        std::clamp<int64_t>(kPartialBudgetFloats / std::max<int64_t>(weight_floats(), 1), 1, T));
  }

  const Prims& prims(int nb) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = cache_[nb];
    if (!slot) slot = make_prims(s_, p_, nb);
    return *slot;
  }

  static bool same(const memory::desc& a, const memory& m) { return a == m.get_desc(); }

  // `user` in layout `want`: itself when it already is, else reordered into `at`.
  static memory convert(dnnl::stream& st, memory& user, const memory::desc& want, float* at) {
    if (want == user.get_desc()) return user;
    memory m(want, onednn_detail::cpu_engine(), at);
    dnnl::reorder(user, m).execute(st, user, m);
    return m;
  }

  void chunk_backward(const Prims& P, const float* in, const float* w, const float* dout,
                      float* din, bool din_acc, int n0, float* part, bool part_acc,
                      float* ws) const {
    dnnl::engine& eng = onednn_detail::cpu_engine();
    dnnl::stream st(eng);
    const int nb = static_cast<int>(P.src_nchw.dims()[0]);
    memory user_src(P.src_nchw, eng, const_cast<float*>(in) + int64_t{n0} * in_floats());
    memory user_ddst(P.dst_nchw, eng, const_cast<float*>(dout) + int64_t{n0} * out_floats());
    memory pad(P.bwd_w_pd.scratchpad_desc(), eng, ws + P.o_pad);
    // dW of the chunk: into the partial (the group's first chunk) or a plain scratch added to it
    memory src_w = convert(st, user_src, P.bwd_w_pd.src_desc(), ws + P.o_src_w);
    memory ddst_w = convert(st, user_ddst, P.bwd_w_pd.diff_dst_desc(), ws + P.o_ddst_w);
    memory dw_b(P.bwd_w_pd.diff_weights_desc(), eng, ws + P.o_dw);
    P.bwd_w.execute(st, {{DNNL_ARG_SRC, src_w},
                         {DNNL_ARG_DIFF_DST, ddst_w},
                         {DNNL_ARG_DIFF_WEIGHTS, dw_b},
                         {DNNL_ARG_SCRATCHPAD, pad}});
    float* dw_plain = part_acc ? ws + P.o_plain : part;
    memory user_dw(P.w_oihw, eng, dw_plain);
    if (dw_b.get_desc() == P.w_oihw) {
      std::memcpy(dw_plain, ws + P.o_dw, sizeof(float) * weight_floats());
    } else {
      dnnl::reorder(dw_b, user_dw).execute(st, dw_b, user_dw);
    }
    st.wait();
    if (part_acc)
      for (int64_t i = 0; i < weight_floats(); ++i) part[i] += dw_plain[i];
    if (din == nullptr) return;
    memory user_w(P.w_oihw, eng, const_cast<float*>(w));
    memory wd = convert(st, user_w, P.bwd_d_pd.weights_desc(), ws + P.o_wd);
    memory ddst = convert(st, user_ddst, P.bwd_d_pd.diff_dst_desc(), ws + P.o_ddst);
    memory dsrc(P.bwd_d_pd.diff_src_desc(), eng, ws + P.o_dsrc);
    memory pad_d(P.bwd_d_pd.scratchpad_desc(), eng, ws + P.o_pad);
    P.bwd_d.execute(st, {{DNNL_ARG_DIFF_DST, ddst},
                         {DNNL_ARG_WEIGHTS, wd},
                         {DNNL_ARG_DIFF_SRC, dsrc},
                         {DNNL_ARG_SCRATCHPAD, pad_d}});
    float* dx = din + int64_t{n0} * in_floats();
    float* target = din_acc ? ws + P.o_plain : dx;
    memory user_dsrc(P.src_nchw, eng, target);
    if (dsrc.get_desc() == P.src_nchw) {
      std::memcpy(target, ws + P.o_dsrc, sizeof(float) * nb * in_floats());
    } else {
      dnnl::reorder(dsrc, user_dsrc).execute(st, dsrc, user_dsrc);
    }
    st.wait();
    if (din_acc)
      for (int64_t i = 0; i < nb * in_floats(); ++i) dx[i] += target[i];
  }

  OnednnConvShape s_;
  Precision p_;
  int nb_;
  mutable std::mutex mu_;
  mutable std::map<int, std::unique_ptr<Prims>> cache_;
};

}  // namespace

std::string onednn_conv_impl(const OnednnConvShape& s, Precision p) { return impl_of(s, p); }

bool onednn_conv_supported(const OnednnConvShape& s, Precision p) {
  if (p == Precision::kBf16 && !cpu_features().bf16_hardware()) return false;  // the fallback
  const std::string impl = impl_of(s, p);
  // Only its JIT kernels: its GEMM-based and reference ones are slower than the engine's own.
  return impl.find("jit") != std::string::npos && impl.find("gemm") == std::string::npos &&
         impl.find("ref") == std::string::npos;
}

std::unique_ptr<OnednnConv> make_onednn_conv(const OnednnConvShape& s, Precision p) {
  if (!onednn_conv_supported(s, p)) return nullptr;
  return std::make_unique<Conv>(s, p);
}

}  // namespace dltune::engine
