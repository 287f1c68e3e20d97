// The GPU kernels' arithmetic (kernel_math.h), replayed on the CPU with the kernels' index
// mapping and reduction partitions, against the CPU ops (the reference): pooling (every mode,
// ceil_mode, count_include_pad, adaptive sizes), pad_channels, GELU, batch norm (training and
// evaluation, running statistics: the CPU adds each plane in float, the GPU in double, so they
// agree to float rounding), layer norm, the embeddings' gather and sorted scatter, and the
// optimizers. Runs in every build, without a GPU: what a GPU run adds is the launch itself (the
// kernels are thin loops over these functions). Where the kernel adds in the CPU's order the
// replay must match to the bit; where it reduces in another order (norms), to float rounding.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gpu/kernel_math.h"
#include "engine/gpu/tests/cpu_twin.h"
#include "engine/gpu/tests/gpu_test_util.h"
#include "engine/optim/optimizer.h"

namespace dltune::engine::gpu {
namespace {

using recipes::OpKind;
using testing::cpu_twin;
using testing::normal_vector;
using testing::rel_error;
using testing::test_node;

// CPU forward then backward of `t` on x with dout; din starts as `din` (added to with acc).
void cpu_pass(testing::CpuTwin& t, const std::vector<const float*>& x, std::vector<float>& y,
              const std::vector<float>& dout, std::vector<std::vector<float>>& din, int batch,
              bool acc, bool training = true) {
  OpContext oc{t.workspace.data(), training, 99, false};
  y.assign(static_cast<size_t>(batch * t.out_numel()), 0.0f);
  t.op->forward(oc, x.data(), y.data(), batch);
  std::vector<GradOut> g;
  for (auto& d : din) g.push_back(GradOut{d.data(), acc});
  t.op->backward(oc, x.data(), y.data(), dout.data(), g.data(), batch);
}

// ---- pooling --------------------------------------------------------------------------------

struct PoolCase {
  const char* name;
  OpKind op;
  int k, stride, pad;
  bool ceil_mode, count_include_pad;
  int oh, ow;  // adaptive output
  recipes::Shape in;
};

class PoolReplay : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolReplay, MatchesCpuToTheBit) {
  const PoolCase& pc = GetParam();
  recipes::Node n = test_node(pc.op);
  n.attrs.kernel = pc.k, n.attrs.stride = pc.stride, n.attrs.pad = pc.pad;
  n.attrs.ceil_mode = pc.ceil_mode, n.attrs.count_include_pad = pc.count_include_pad;
  n.attrs.out_h = pc.oh, n.attrs.out_w = pc.ow;
  const int B = 2;
  Rng rng(3);
  for (bool acc : {false, true}) {
    auto t = cpu_twin(n, {pc.in}, B, rng);
    auto x = normal_vector(static_cast<size_t>(B * t.in_numel()), rng);
    auto dout = normal_vector(static_cast<size_t>(B * t.out_numel()), rng);
    const auto base = normal_vector(x.size(), rng);
    std::vector<std::vector<float>> din = {acc ? base : std::vector<float>(x.size())};
    std::vector<float> y;
    cpu_pass(t, {x.data()}, y, dout, din, B, acc);

    math::PoolShape p;
    p.planes = static_cast<int>(B * pc.in[0]);
    p.h = static_cast<int>(pc.in[1]), p.w = static_cast<int>(pc.in[2]);
    p.oh = static_cast<int>(t.out[1]), p.ow = static_cast<int>(t.out[2]);
    p.k = pc.k, p.stride = pc.stride, p.pad = pc.pad;
    p.mode = pc.op == OpKind::kMaxPool   ? math::PoolMode::kMax
             : pc.op == OpKind::kAvgPool ? math::PoolMode::kAvg
                                         : math::PoolMode::kAdaptiveAvg;
    p.count_include_pad = pc.count_include_pad;
    std::vector<float> gy(y.size());
    std::vector<int32_t> arg(y.size(), -7);
    for (size_t i = 0; i < gy.size(); ++i)
      gy[i] = math::pool_forward_at(p, x.data(), static_cast<int64_t>(i), &arg[i]);
    EXPECT_EQ(gy, y) << pc.name << " forward";
    std::vector<float> gdx(x.size());
    for (size_t i = 0; i < gdx.size(); ++i)
      gdx[i] = math::pool_backward_at(p, dout.data(), arg.data(), static_cast<int64_t>(i),
                                      acc ? base[i] : 0.0f);
    EXPECT_EQ(gdx, din[0]) << pc.name << " backward, acc " << acc;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Pools, PoolReplay,
    ::testing::Values(
        PoolCase{"max2", OpKind::kMaxPool, 2, 2, 0, false, true, 0, 0, {3, 8, 8}},
        PoolCase{"max3s2", OpKind::kMaxPool, 3, 2, 0, false, true, 0, 0, {2, 9, 9}},
        PoolCase{"max3s2p1", OpKind::kMaxPool, 3, 2, 1, false, true, 0, 0, {2, 10, 7}},
        PoolCase{"max_ceil", OpKind::kMaxPool, 3, 2, 0, true, true, 0, 0, {2, 10, 8}},
        PoolCase{"max_ceil_s1p1", OpKind::kMaxPool, 3, 1, 1, true, true, 0, 0, {2, 6, 5}},
        PoolCase{"max2_ceil_odd", OpKind::kMaxPool, 2, 2, 0, true, true, 0, 0, {2, 7, 7}},
        PoolCase{"avg3s2", OpKind::kAvgPool, 3, 2, 0, false, true, 0, 0, {2, 9, 8}},
        PoolCase{"avg_pad", OpKind::kAvgPool, 3, 2, 1, false, true, 0, 0, {2, 9, 8}},
        PoolCase{"avg_pad_nocount", OpKind::kAvgPool, 3, 2, 1, false, false, 0, 0, {2, 9, 8}},
        PoolCase{"avg_ceil_nocount", OpKind::kAvgPool, 3, 2, 1, true, false, 0, 0, {2, 10, 7}},
        PoolCase{"avg_ceil_count", OpKind::kAvgPool, 2, 2, 0, true, true, 0, 0, {2, 5, 7}},
        PoolCase{"avg_gap", OpKind::kAvgPool, 2, 3, 0, false, true, 0, 0, {1, 8, 8}},
        PoolCase{"adaptive1", OpKind::kAdaptiveAvgPool, 0, 1, 0, false, true, 1, 1, {4, 7, 5}},
        PoolCase{"adaptive_3x2", OpKind::kAdaptiveAvgPool, 0, 1, 0, false, true, 3, 2, {2, 8, 7}},
        PoolCase{"adaptive_up", OpKind::kAdaptiveAvgPool, 0, 1, 0, false, true, 7, 5, {2, 3, 2}},
        PoolCase{"adaptive_7", OpKind::kAdaptiveAvgPool, 0, 1, 0, false, true, 7, 7, {2, 7, 7}}),
    [](const auto& tp) { return std::string(tp.param.name); });

// ---- pad_channels and GELU ----------------------------------------------------------------------

TEST(GpuMath, PadChannelsMatchesCpu) {
  for (int stride : {1, 2}) {
    recipes::Node n = test_node(OpKind::kPadChannels);
    n.attrs.out = 8, n.attrs.stride = stride;
    const int B = 2;
    Rng rng(5);
    auto t = cpu_twin(n, {{4, 7, 6}}, B, rng);
    auto x = normal_vector(static_cast<size_t>(B * t.in_numel()), rng);
    auto dout = normal_vector(static_cast<size_t>(B * t.out_numel()), rng);
    auto base = normal_vector(x.size(), rng);
    std::vector<std::vector<float>> din = {base};
    std::vector<float> y;
    cpu_pass(t, {x.data()}, y, dout, din, B, true);
    math::PadShape p{4, 7, 6, 8, static_cast<int>(t.out[1]), static_cast<int>(t.out[2]), stride, 2};
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(math::pad_forward_at(p, x.data(), static_cast<int64_t>(i)), y[i]) << i;
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(math::pad_backward_at(p, dout.data(), static_cast<int64_t>(i), base[i]), din[0][i])
          << i;
  }
}

TEST(GpuMath, GeluMatchesCpu) {
  const int B = 3;
  Rng rng(6);
  auto t = cpu_twin(test_node(OpKind::kGelu), {{5, 7}}, B, rng);
  auto x = normal_vector(static_cast<size_t>(B * t.in_numel()), rng, 2.0f);
  auto dout = normal_vector(x.size(), rng);
  std::vector<std::vector<float>> din = {std::vector<float>(x.size())};
  std::vector<float> y;
  cpu_pass(t, {x.data()}, y, dout, din, B, false);
  // The CPU kernel computes tanh through its own vectorised exp (engine/ops/vmath.h), the
  // twin's math through libm's tanhf: a few ulps apart, not bit for bit.
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(math::gelu(x[i]), y[i], 4e-7f * std::max(1.0f, std::fabs(y[i]))) << i;
    ASSERT_NEAR(math::gelu_grad(x[i], dout[i]), din[0][i],
                4e-7f * std::max(1.0f, std::fabs(din[0][i])))
        << i;
  }
}

// ---- batch norm ---------------------------------------------------------------------------------

TEST(GpuMath, BatchNormPartsCoverEveryValueOnce) {
  for (int64_t n : {1, 2, 63, 64, 65, 4095, 4096, 4097, 100000, 802816})
    for (int parts : {1, 2, 3, 7, math::bn_parts(n), math::kBnMaxParts}) {
      int64_t next = 0;
      for (int p = 0; p < parts; ++p) {
        int64_t b, e;
        math::bn_part_range(n, parts, p, &b, &e);
        ASSERT_EQ(b, next) << n << " " << parts << " " << p;
        ASSERT_LE(b, e);
        next = e;
      }
      ASSERT_EQ(next, n) << n << " " << parts;
    }
  EXPECT_EQ(math::bn_parts(1), 1);
  EXPECT_EQ(math::bn_parts(802816), math::kBnMaxParts);
}

// kernels_norm.cu's batch norm, sequentially: part sums in double, statistics, apply; backward.
struct BnReplay {
  int B, C;
  int64_t S;
  double eps, momentum;
  void forward(const float* x, float* y, const float* w, const float* b, float* state,
               std::vector<float>& mean, std::vector<float>& invstd, bool training) const {
    const int64_t N = int64_t{B} * S;
    const int parts = math::bn_parts(N);
    mean.resize(static_cast<size_t>(C));
    invstd.resize(static_cast<size_t>(C));
    for (int c = 0; c < C; ++c) {
      math::BnStats st;
      if (training) {
        double s = 0.0, q = 0.0;
        for (int p = 0; p < parts; ++p) {
          int64_t j0, j1;
          math::bn_part_range(N, parts, p, &j0, &j1);
          double ps = 0.0, pq = 0.0;
          for (int64_t j = j0; j < j1; ++j) {
            const double v = x[math::bn_index(j, c, C, S)];
            ps += v;
            pq += v * v;
          }
          s += ps;
          q += pq;
        }
        st = math::bn_train_stats(s, q, N, eps, momentum, &state[c], &state[C + c]);
      } else {
        st = math::bn_eval_stats(state[c], state[C + c], eps);
      }
      mean[static_cast<size_t>(c)] = st.mean;
      invstd[static_cast<size_t>(c)] = st.invstd;
    }
    if (training) state[2 * C] += 1.0f;
    for (int64_t i = 0; i < N * C; ++i) {
      const int c = static_cast<int>((i / S) % C);
      y[i] = math::bn_apply(x[i], w[c], b[c],
                            {mean[static_cast<size_t>(c)], invstd[static_cast<size_t>(c)]});
    }
  }
  void backward(const float* x, const float* dy, float* dx, const float* w, float* dw, float* db,
                const std::vector<float>& mean, const std::vector<float>& invstd, bool training,
                bool acc) const {
    const int64_t N = int64_t{B} * S;
    const int parts = math::bn_parts(N);
    std::vector<math::BnBackward> k(static_cast<size_t>(C));
    for (int c = 0; c < C; ++c) {
      double s0 = 0.0, s1 = 0.0;
      for (int p = 0; p < parts; ++p) {
        int64_t j0, j1;
        math::bn_part_range(N, parts, p, &j0, &j1);
        double p0 = 0.0, p1 = 0.0;
        for (int64_t j = j0; j < j1; ++j) {
          const int64_t at = math::bn_index(j, c, C, S);
          p0 += dy[at];
          p1 += static_cast<double>(dy[at] * (x[at] - mean[static_cast<size_t>(c)]));
        }
        s0 += p0;
        s1 += p1;
      }
      k[static_cast<size_t>(c)] = math::bn_backward_coefs(
          s0, s1, N, w[c], {mean[static_cast<size_t>(c)], invstd[static_cast<size_t>(c)]});
      dw[c] = k[static_cast<size_t>(c)].dw + (acc ? dw[c] : 0.0f);
      db[c] = k[static_cast<size_t>(c)].db + (acc ? db[c] : 0.0f);
    }
    for (int64_t i = 0; i < N * C; ++i) {
      const int c = static_cast<int>((i / S) % C);
      dx[i] = math::bn_dx(x[i], dy[i], mean[static_cast<size_t>(c)], k[static_cast<size_t>(c)],
                          training, acc ? dx[i] : 0.0f);
    }
  }
};

TEST(GpuMath, BatchNormMatchesCpu) {
  struct Shape {
    recipes::Shape in;
    int batch;
  };
  for (const Shape& sh : {Shape{{5, 6, 7}, 3}, Shape{{16}, 8}, Shape{{3, 90, 80}, 2}})
    for (bool training : {true, false})
      for (bool acc : {false, true}) {
        recipes::Node n = test_node(OpKind::kBatchNorm);
        n.attrs.momentum = 0.3;
        const int B = sh.batch;
        Rng rng(8);
        auto t = cpu_twin(n, {sh.in}, B, rng, acc);
        const int C = static_cast<int>(sh.in[0]);
        const int64_t S = t.in_numel() / C;
        auto x = normal_vector(static_cast<size_t>(B * t.in_numel()), rng, 2.0f);
        for (auto& v : x) v += 1.5f;  // a mean well away from 0
        auto dout = normal_vector(x.size(), rng);
        auto base = normal_vector(x.size(), rng);
        auto grads0 = normal_vector(t.params.size(), rng);
        t.grads = acc ? grads0 : std::vector<float>(grads0.size());
        t.bind(acc, B);
        std::vector<float> state0 = t.state, params = t.params;
        std::vector<std::vector<float>> din = {acc ? base : std::vector<float>(x.size())};
        std::vector<float> y;
        cpu_pass(t, {x.data()}, y, dout, din, B, acc, training);

        BnReplay r{B, C, S, n.attrs.eps, n.attrs.momentum};
        std::vector<float> gy(y.size()), gdx = acc ? base : std::vector<float>(x.size());
        std::vector<float> gstate = state0, gg = acc ? grads0 : std::vector<float>(grads0.size());
        std::vector<float> mean, invstd;
        r.forward(x.data(), gy.data(), params.data(), params.data() + C, gstate.data(), mean,
                  invstd, training);
        r.backward(x.data(), dout.data(), gdx.data(), params.data(), gg.data(), gg.data() + C, mean,
                   invstd, training, acc);
        const std::string what = recipes::describe_shape(sh.in) +
                                 (training ? " training" : " eval") + (acc ? " acc" : "");
        EXPECT_LT(rel_error(gy, y), 1e-5) << what << " forward";
        EXPECT_LT(rel_error(gstate, t.state), 1e-5) << what << " running statistics";
        EXPECT_EQ(gstate[static_cast<size_t>(2 * C)], training ? 1.0f : 0.0f) << what;
        EXPECT_LT(rel_error(gdx, din[0]), 1e-4) << what << " input gradient";
        EXPECT_LT(rel_error(gg, t.grads), 1e-5) << what << " parameter gradients";
      }
}

// ---- layer norm ---------------------------------------------------------------------------------

TEST(GpuMath, LayerNormMatchesCpu) {
  for (int batch : {1, 3, 70})
    for (bool acc : {false, true}) {
      const int C = 40;
      const int64_t T = 5;
      recipes::Node n = test_node(OpKind::kLayerNorm);
      Rng rng(9);
      auto t = cpu_twin(n, {{T, C}}, batch, rng, acc);
      const int64_t R = batch * T;
      auto x = normal_vector(static_cast<size_t>(R * C), rng, 2.0f);
      auto dout = normal_vector(x.size(), rng);
      auto base = normal_vector(x.size(), rng);
      auto grads0 = normal_vector(t.params.size(), rng);
      t.grads = acc ? grads0 : std::vector<float>(grads0.size());
      t.bind(acc, batch);
      std::vector<float> params = t.params;
      std::vector<std::vector<float>> din = {acc ? base : std::vector<float>(x.size())};
      std::vector<float> y;
      cpu_pass(t, {x.data()}, y, dout, din, batch, acc);

      const float* w = params.data();
      const float* b = params.data() + C;
      std::vector<float> gy(x.size()), gdx = acc ? base : std::vector<float>(x.size());
      std::vector<float> mean(static_cast<size_t>(R)), rstd(static_cast<size_t>(R));
      const float eps = static_cast<float>(n.attrs.eps);
      for (int64_t r = 0; r < R; ++r) {  // ln_forward_k, a row at a time
        const float* xr = x.data() + r * C;
        float s = 0.0f;
        for (int i = 0; i < C; ++i) s += xr[i];
        const float m = s / static_cast<float>(C);
        float q = 0.0f;
        for (int i = 0; i < C; ++i) q += (xr[i] - m) * (xr[i] - m);
        const float rs = 1.0f / sqrtf(q / static_cast<float>(C) + eps);
        for (int i = 0; i < C; ++i)
          gy[static_cast<size_t>(r * C + i)] = math::ln_apply(xr[i], m, rs, w[i], b[i]);
        mean[static_cast<size_t>(r)] = m;
        rstd[static_cast<size_t>(r)] = rs;
      }
      for (int64_t r = 0; r < R; ++r) {  // ln_dx_k
        float mg = 0.0f, mgx = 0.0f;
        for (int i = 0; i < C; ++i) {
          const float g = dout[static_cast<size_t>(r * C + i)] * w[i];
          mg += g;
          mgx += g * ((x[static_cast<size_t>(r * C + i)] - mean[static_cast<size_t>(r)]) *
                      rstd[static_cast<size_t>(r)]);
        }
        mg *= 1.0f / static_cast<float>(C);
        mgx *= 1.0f / static_cast<float>(C);
        for (int i = 0; i < C; ++i) {
          const size_t at = static_cast<size_t>(r * C + i);
          gdx[at] = math::ln_dx(x[at], dout[at], w[i], mean[static_cast<size_t>(r)],
                                rstd[static_cast<size_t>(r)], mg, mgx, gdx[at]);
        }
      }
      // ln_param_parts_k / ln_param_sum_k: column sums over ln_parts row ranges.
      std::vector<float> gg = acc ? grads0 : std::vector<float>(grads0.size());
      const int parts = math::ln_parts(R);
      for (int col = 0; col < C; ++col) {
        float aw = gg[static_cast<size_t>(col)], ab = gg[static_cast<size_t>(C + col)];
        for (int p = 0; p < parts; ++p) {
          int64_t r0, r1;
          math::bn_part_range(R, parts, p, &r0, &r1);
          float pw = 0.0f, pb = 0.0f;
          for (int64_t r = r0; r < r1; ++r) {
            const size_t at = static_cast<size_t>(r * C + col);
            pw +=
                dout[at] * ((x[at] - mean[static_cast<size_t>(r)]) * rstd[static_cast<size_t>(r)]);
            pb += dout[at];
          }
          aw += pw;
          ab += pb;
        }
        gg[static_cast<size_t>(col)] = aw;
        gg[static_cast<size_t>(C + col)] = ab;
      }
      EXPECT_LT(rel_error(gy, y), 1e-5) << batch << " forward";
      EXPECT_LT(rel_error(gdx, din[0]), 1e-5) << batch << " input gradient";
      EXPECT_LT(rel_error(gg, t.grads), 1e-5) << batch << " parameter gradients";
    }
}

// ---- embeddings ---------------------------------------------------------------------------------

TEST(GpuMath, EmbeddingSortedScatterIsTheCpuSum) {
  for (bool acc : {false, true}) {
    const int B = 3, T = 50, C = 6, V = 11;
    recipes::Node n = test_node(OpKind::kEmbedding);
    n.attrs.vocab = V, n.attrs.out = C;
    Rng rng(10);
    auto t = cpu_twin(n, {{T}}, B, rng, acc);
    std::vector<float> ids(static_cast<size_t>(B * T));
    for (auto& v : ids) v = static_cast<float>(static_cast<int>(rng.below(V + 4)) - 2);  // clamped
    auto dout = normal_vector(static_cast<size_t>(B * T * C), rng);
    auto grads0 = normal_vector(t.params.size(), rng);
    t.grads = acc ? grads0 : std::vector<float>(grads0.size(), 5.0f);  // written, not added
    t.bind(acc, B);
    std::vector<std::vector<float>> din;
    std::vector<float> y;
    cpu_pass(t, {ids.data()}, y, dout, din, B, acc);

    // kernels_seq.cu: gather; keys and positions, a stable sort, segments in position order.
    std::vector<float> gy(y.size());
    for (size_t i = 0; i < gy.size(); ++i)
      gy[i] = t.params[static_cast<size_t>(math::embedding_row(ids[i / C], V) * C +
                                           static_cast<int64_t>(i % C))];
    EXPECT_EQ(gy, y);
    std::vector<int32_t> keys(ids.size()), pos(ids.size());
    for (size_t i = 0; i < ids.size(); ++i)
      keys[i] = static_cast<int32_t>(math::embedding_row(ids[i], V));
    std::iota(pos.begin(), pos.end(), 0);
    std::stable_sort(pos.begin(), pos.end(), [&](int32_t a, int32_t b) {
      return keys[static_cast<size_t>(a)] < keys[static_cast<size_t>(b)];
    });
    std::vector<float> gw = acc ? grads0 : std::vector<float>(grads0.size(), 0.0f);
    for (size_t k = 0; k < pos.size(); ++k) {
      const int32_t key = keys[static_cast<size_t>(pos[k])];
      if (k > 0 && keys[static_cast<size_t>(pos[k - 1])] == key) continue;
      for (int col = 0; col < C; ++col) {
        float s = gw[static_cast<size_t>(key * C + col)];
        for (size_t j = k; j < pos.size() && keys[static_cast<size_t>(pos[j])] == key; ++j)
          s += dout[static_cast<size_t>(pos[j] * C + col)];
        gw[static_cast<size_t>(key * C + col)] = s;
      }
    }
    EXPECT_EQ(gw, t.grads) << "acc " << acc;
  }
}

TEST(GpuMath, PositionEmbeddingMatchesCpu) {
  const int B = 4, T = 6, C = 5, context = 9;
  recipes::Node n = test_node(OpKind::kPositionEmbedding);
  n.attrs.context = context;
  Rng rng(12);
  auto t = cpu_twin(n, {{T, C}}, B, rng, true);
  auto grads0 = normal_vector(t.params.size(), rng);
  t.grads = grads0;
  t.bind(true, B);
  auto x = normal_vector(static_cast<size_t>(B * T * C), rng);
  auto dout = normal_vector(x.size(), rng);
  std::vector<std::vector<float>> din = {std::vector<float>(x.size())};
  std::vector<float> y;
  cpu_pass(t, {x.data()}, y, dout, din, B, false);
  std::vector<float> gp = grads0;
  for (int i = 0; i < T * C; ++i) {  // position_backward_k, acc
    float s = gp[static_cast<size_t>(i)];
    for (int b = 0; b < B; ++b) s += dout[static_cast<size_t>(b * T * C + i)];
    gp[static_cast<size_t>(i)] = s;
  }
  EXPECT_EQ(gp, t.grads);
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(x[i] + t.params[i % static_cast<size_t>(T * C)], y[i]) << i;
}

// ---- optimizers ---------------------------------------------------------------------------------

TEST(GpuMath, OptimizersMatchCpu) {
  const int64_t n = 1000;
  Rng rng(13);
  auto w0 = normal_vector(n, rng), g = normal_vector(n, rng, 0.1f);
  AdamW adam(n, 0.9f, 0.95f, 1e-8f, 0.1f);
  Sgd sgd(n, 0.9f, 5e-4f);
  std::vector<float> wa = w0, ws = w0, ga = w0, gs = w0;
  std::vector<float> m(n), v(n), vel(n);
  for (int step = 1; step <= 3; ++step) {
    adam.step(wa.data(), g.data(), 0.01f);
    sgd.step(ws.data(), g.data(), 0.05f);
    const auto k = math::adamw_scalars(0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    for (int64_t i = 0; i < n; ++i) {
      math::adamw_update(&ga[i], g[i], &m[i], &v[i], k);
      math::sgd_update(&gs[i], g[i], &vel[i], 0.05f, 0.9f, 5e-4f);
    }
  }
  EXPECT_EQ(ga, wa);
  EXPECT_EQ(gs, ws);
  // Clipping: the coefficient from the squared norm, as clip_grad_norm's.
  std::vector<float> c = g;
  double sq = 0.0;
  for (float x : g) sq += static_cast<double>(x) * x;
  const double norm = clip_grad_norm(c.data(), n, 0.5);
  EXPECT_DOUBLE_EQ(norm, std::sqrt(sq));
  const float coef = math::clip_coef(sq, 0.5);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i] * coef, c[i]) << i;
  EXPECT_EQ(math::clip_coef(sq, 1e9), 1.0f);
}

}  // namespace
}  // namespace dltune::engine::gpu
