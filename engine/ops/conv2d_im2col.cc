// Conv2d's im2col + GEMM kernel (engine/ops/conv2d.h) on the rank's threads.
//
// Forward: one task per chunk of images_per_task() images: for each group, im2col of the chunk
// (into the layer's saved columns when it keeps the whole batch's, else the thread's scratch),
// one GEMM W (OCg, Kg) x cols (Kg, nb*OH*OW) into the thread's tmp, scattered into the output
// with the bias. Backward: the chunks again, in dw_partials() groups of consecutive chunks: a
// group's chunks run in order on one thread and sum their weight gradient into the group's
// partial, which reduce_partials() adds in group order; each chunk's input gradient is W^T x
// dout's columns, col2im'd into its own images. With dw_whole(), the weight gradient is instead
// one parallel_sgemm over the whole batch's columns per group.
#include <algorithm>
#include <cstring>

#include "engine/core/gemm.h"
#include "engine/core/parallel.h"
#include "engine/ops/conv2d.h"

namespace dltune::engine {

void Conv2d::im2col(const float* in, int n0, int nb, int g, float* cols, int64_t ldc) const {
  const int H = h_, W = w_, OH = oh_, OW = ow_;
  for (int c = 0; c < cg_; ++c) {
    for (int ki = 0; ki < k_; ++ki) {
      for (int kj = 0; kj < k_; ++kj) {
        float* row = cols + ((int64_t{c} * k_ + ki) * k_ + kj) * ldc;
        // valid output columns: 0 <= ow*stride - pad + kj < W
        int ow_lo = std::min(OW, std::max(0, (pad_ - kj + stride_ - 1) / stride_));
        int ow_hi = std::min(OW, (W + pad_ - kj + stride_ - 1) / stride_);
        if (ow_hi < ow_lo) ow_hi = ow_lo;
        for (int b = 0; b < nb; ++b) {
          const float* img = in + ((int64_t{n0 + b} * c_) + g * cg_ + c) * H * W;
          float* dst = row + b * hwo_;
          for (int oh = 0; oh < OH; ++oh, dst += OW) {
            int ih = oh * stride_ - pad_ + ki;
            if (ih < 0 || ih >= H) {
              std::memset(dst, 0, sizeof(float) * OW);
              continue;
            }
            const float* src = img + int64_t{ih} * W - pad_ + kj;
            for (int ow = 0; ow < ow_lo; ++ow) dst[ow] = 0.0f;
            if (stride_ == 1) {
              std::memcpy(dst + ow_lo, src + ow_lo, sizeof(float) * (ow_hi - ow_lo));
            } else {
              for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = src[ow * stride_];
            }
            for (int ow = ow_hi; ow < OW; ++ow) dst[ow] = 0.0f;
          }
        }
      }
    }
  }
}

void Conv2d::col2im(const float* cols, int n0, int nb, int g, float* din) const {
  const int H = h_, W = w_, OH = oh_, OW = ow_;
  const int64_t L = nb * hwo_;
  for (int c = 0; c < cg_; ++c) {
    for (int ki = 0; ki < k_; ++ki) {
      for (int kj = 0; kj < k_; ++kj) {
        const float* row = cols + ((int64_t{c} * k_ + ki) * k_ + kj) * L;
        int ow_lo = std::max(0, (pad_ - kj + stride_ - 1) / stride_);
        int ow_hi = std::min(OW, (W + pad_ - kj + stride_ - 1) / stride_);
        for (int b = 0; b < nb; ++b) {
          float* img = din + ((int64_t{n0 + b} * c_) + g * cg_ + c) * H * W;
          const float* src = row + b * hwo_;
          for (int oh = 0; oh < OH; ++oh, src += OW) {
            int ih = oh * stride_ - pad_ + ki;
            if (ih < 0 || ih >= H) continue;
            float* dst = img + int64_t{ih} * W - pad_ + kj;
            if (stride_ == 1) {  // contiguous: GCC vectorises this form, not the strided one
              for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow] += src[ow];
            } else {
              for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow * stride_] += src[ow];
            }
          }
        }
      }
    }
  }
}

void Conv2d::forward_chunk(const float* in, float* out, int n0, int nb, bool save, int batch,
                           float* scratch) {
  const int64_t L = nb * hwo_, out_per_image = int64_t{oc_} * hwo_;
  const int64_t saved_ld = int64_t{batch} * hwo_;  // a saved column row holds the whole batch
  float* tmp = scratch + int64_t{kg_} * L;         // (OCg, L)
  for (int g = 0; g < groups_; ++g) {
    float* cols = save ? saved_cols_.data() + int64_t{g} * kg_ * saved_ld + n0 * hwo_ : scratch;
    const int64_t ldc = save ? saved_ld : L;
    im2col(in, n0, nb, g, cols, ldc);
    const float* Wg = wts_ + int64_t{g} * ocg_ * kg_;  // (OCg, Kg)
    serial_sgemm(false, false, ocg_, L, kg_, 1.0f, Wg, kg_, cols, ldc, 0.0f, tmp, L);
    // scatter tmp (OCg, nb, OH*OW) -> out (nb, OC, OH*OW) adding the bias
    for (int bi = 0; bi < nb; ++bi) {
      for (int o = 0; o < ocg_; ++o) {
        const int oc = g * ocg_ + o;
        const float* src = tmp + o * L + bi * hwo_;
        float* dst = out + (n0 + bi) * out_per_image + oc * hwo_;
        const float bv = b_ ? b_[oc] : 0.0f;
        for (int64_t p = 0; p < hwo_; ++p) dst[p] = src[p] + bv;
      }
    }
  }
}

void Conv2d::forward_im2col(const OpContext& ctx, const float* in, float* out, int batch) {
  const int nb_max = images_per_task(batch);
  const bool save = ctx.training && saves_cols(batch);
  saved_in_ = save ? in : nullptr;
  saved_batch_ = batch;
  const int64_t per_thread = int64_t{kg_ + ocg_} * nb_max * hwo_;
  ctx.pool->run(tasks(batch), [&](int64_t t, int thread) {
    const int n0 = static_cast<int>(t) * nb_max;
    const int nb = std::min(nb_max, batch - n0);
    forward_chunk(in, out, n0, nb, save, batch, ctx.workspace + thread * per_thread);
  });
}

void Conv2d::backward_chunk(const float* in, const float* dout, float* din, bool din_acc, int n0,
                            int nb, bool saved, int batch, float* dw, bool dw_acc,
                            float* scratch) const {
  const int64_t L = nb * hwo_, out_per_image = int64_t{oc_} * hwo_;
  const int64_t saved_ld = int64_t{batch} * hwo_;
  float* dcols = scratch;                   // (Kg, L)
  float* tmp = scratch + int64_t{kg_} * L;  // (OCg, L)
  if (din && !din_acc)
    std::memset(din + int64_t{n0} * in_numel(), 0, sizeof(float) * nb * in_numel());
  for (int g = 0; g < groups_; ++g) {
    // gather dout (nb, OC, OH*OW) -> tmp (OCg, L)
    for (int bi = 0; bi < nb; ++bi)
      for (int o = 0; o < ocg_; ++o)
        std::memcpy(tmp + o * L + bi * hwo_,
                    dout + (n0 + bi) * out_per_image + (g * ocg_ + o) * hwo_, sizeof(float) * hwo_);
    if (dw != nullptr) {
      const float* cols =
          saved ? saved_cols_.data() + int64_t{g} * kg_ * saved_ld + n0 * hwo_ : dcols;
      const int64_t ldc = saved ? saved_ld : L;
      if (!saved) im2col(in, n0, nb, g, dcols, L);
      // dWg (OCg, Kg) (+)= tmp (OCg, L) x cols^T (L, Kg)
      serial_sgemm(false, true, ocg_, kg_, L, 1.0f, tmp, L, cols, ldc, dw_acc ? 1.0f : 0.0f,
                   dw + int64_t{g} * ocg_ * kg_, kg_);
    }
    if (din) {
      // dcols (Kg, L) = Wg^T (Kg, OCg) x tmp (OCg, L), then col2im into the chunk's images
      const float* Wg = wts_ + int64_t{g} * ocg_ * kg_;
      serial_sgemm(true, false, kg_, L, ocg_, 1.0f, Wg, kg_, tmp, L, 0.0f, dcols, L);
      col2im(dcols, n0, nb, g, din);
    }
  }
}

void Conv2d::backward_whole_dw(const OpContext& ctx, const float* dout, int batch, float* gather) {
  // dWg (OCg, Kg) (+)= dout_g (OCg, B*OH*OW) x cols_g^T: one product per group over the batch
  const int64_t L = int64_t{batch} * hwo_, out_per_image = int64_t{oc_} * hwo_;
  for (int g = 0; g < groups_; ++g) {
    ctx.pool->run(batch, [&](int64_t n, int) {
      for (int o = 0; o < ocg_; ++o)
        std::memcpy(gather + o * L + n * hwo_, dout + n * out_per_image + (g * ocg_ + o) * hwo_,
                    sizeof(float) * hwo_);
    });
    parallel_sgemm(*ctx.pool, false, true, ocg_, kg_, L, 1.0f, gather, L,
                   saved_cols_.data() + int64_t{g} * kg_ * L, L, dw_acc_ ? 1.0f : 0.0f,
                   dw_ + int64_t{g} * ocg_ * kg_, kg_);
  }
}

void Conv2d::backward_im2col(const OpContext& ctx, const float* in, const float* dout, float* din,
                             bool din_acc, int batch) {
  const int nb_max = images_per_task(batch), T = tasks(batch);
  // The columns forward kept for this very input (the whole batch).
  const bool saved = saved_in_ == in && saved_batch_ == batch && saves_cols(batch);
  const bool whole = saved && dw_whole(batch);
  const int P = dw_partials(batch);
  float* partials = ctx.workspace;  // (P, OC, Kg), or the whole batch's gathered dout
  float* per_thread = partials + shared_floats(batch);  // per thread: cols + tmp
  const int64_t stride = im2col_thread_floats(batch);
  const int groups = whole ? T : P;  // parallel units: chunks, or groups of chunks
  ctx.pool->run(groups, [&](int64_t p, int thread) {
    int64_t t0 = p, t1 = p + 1;
    if (!whole) part_range(T, P, p, &t0, &t1);
    float* dw = whole ? nullptr : partials + p * weight_floats();
    for (int64_t t = t0; t < t1; ++t) {
      const int n0 = static_cast<int>(t) * nb_max;
      const int nb = std::min(nb_max, batch - n0);
      backward_chunk(in, dout, din, din_acc, n0, nb, saved, batch, dw, t > t0,
                     per_thread + thread * stride);
    }
  });
  if (whole) {
    backward_whole_dw(ctx, dout, batch, partials);
  } else {
    reduce_partials(ctx, partials, P, dw_acc_);
  }
}

}  // namespace dltune::engine
