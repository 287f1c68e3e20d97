// The cuBLAS calls of the GPU linear and attention ops (gemm_plan.h), executed by a reference
// column-major strided-batched GEMM on host memory, with the kernels' softmax rows between them,
// against the CPU ops. The reference also checks what cuBLAS would only get wrong silently:
// every matrix it touches lies inside a buffer of the test, and no output element of one call
// is written twice (the interleaved per-head outputs of a strided batch do not overlap).
// Runs in every build, without a GPU.
#include <algorithm>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gpu/gemm_plan.h"
#include "engine/gpu/kernel_math.h"
#include "engine/gpu/tests/cpu_twin.h"
#include "engine/gpu/tests/gpu_test_util.h"

namespace dltune::engine::gpu {
namespace {

using recipes::OpKind;
using testing::normal_vector;
using testing::rel_error;

// The host buffers a GEMM may touch.
struct Spans {
  std::vector<std::pair<const float*, size_t>> spans;
  void add(const std::vector<float>& v) { spans.emplace_back(v.data(), v.size()); }
  // Whether [p, p + count) lies inside one span.
  bool holds(const float* p, int64_t count) const {
    for (const auto& [b, n] : spans)
      if (p >= b && p + count <= b + n) return true;
    return false;
  }
};

template <typename... V>
Spans spans_of(const V&... v) {
  Spans s;
  (s.add(v), ...);
  return s;
}

// Floats from the first to the last element of a stored (rows x cols, ld) matrix over `batch`
// matrices `stride` apart.
int64_t extent(int rows, int cols, int ld, int64_t stride, int batch) {
  if (rows == 0 || cols == 0) return 0;
  return int64_t{batch - 1} * stride + int64_t{cols - 1} * ld + rows;
}

void run(const Gemm& g, const Spans& spans) {
  ASSERT_TRUE(gemm_valid(g)) << "m " << g.m << " n " << g.n << " k " << g.k << " ld " << g.lda
                             << "/" << g.ldb << "/" << g.ldc;
  const int ra = g.trans_a ? g.k : g.m, ca = g.trans_a ? g.m : g.k;
  const int rb = g.trans_b ? g.n : g.k, cb = g.trans_b ? g.k : g.n;
  ASSERT_TRUE(spans.holds(g.a, extent(ra, ca, g.lda, g.stride_a, g.batch))) << "A out of bounds";
  ASSERT_TRUE(spans.holds(g.b, extent(rb, cb, g.ldb, g.stride_b, g.batch))) << "B out of bounds";
  ASSERT_TRUE(spans.holds(g.c, extent(g.m, g.n, g.ldc, g.stride_c, g.batch))) << "C out of bounds";
  std::set<const float*> written;
  for (int i = 0; i < g.batch; ++i) {
    const float* A = g.a + i * g.stride_a;
    const float* B = g.b + i * g.stride_b;
    float* C = g.c + i * g.stride_c;
    for (int col = 0; col < g.n; ++col)
      for (int row = 0; row < g.m; ++row) {
        double acc = 0.0;
        for (int p = 0; p < g.k; ++p) {
          const float a = g.trans_a ? A[p + int64_t{row} * g.lda] : A[row + int64_t{p} * g.lda];
          const float b = g.trans_b ? B[col + int64_t{p} * g.ldb] : B[p + int64_t{col} * g.ldb];
          acc += static_cast<double>(a) * b;
        }
        float& c = C[row + int64_t{col} * g.ldc];
        ASSERT_TRUE(written.insert(&c).second) << "C element written twice in one call";
        c = g.beta == 0.0f ? static_cast<float>(g.alpha * acc)
                           : static_cast<float>(g.alpha * acc + g.beta * c);
      }
  }
}

// ---- linear ----------------------------------------------------------------------------------

struct LinearCase {
  const char* name;
  recipes::Shape in;
  int64_t out;
  bool flatten, bias, acc;
};

class LinearReplay : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearReplay, MatchesCpu) {
  const LinearCase& lc = GetParam();
  recipes::Node n = testing::test_node(OpKind::kLinear);
  n.attrs.out = lc.out, n.attrs.flatten = lc.flatten, n.attrs.bias = lc.bias;
  const int batch = 3;
  Rng rng(21);
  auto t = testing::cpu_twin(n, {lc.in}, batch, rng, lc.acc);
  const int I = static_cast<int>(lc.flatten ? recipes::numel(lc.in) : lc.in.back());
  const int O = static_cast<int>(lc.out);
  const int R = static_cast<int>(batch * recipes::numel(lc.in) / I);
  auto x = normal_vector(static_cast<size_t>(R) * I, rng);
  auto dout = normal_vector(static_cast<size_t>(R) * O, rng);
  auto base = normal_vector(x.size(), rng);
  auto grads0 = normal_vector(t.params.size(), rng);
  t.grads = lc.acc ? grads0 : std::vector<float>(grads0.size());
  t.bind(lc.acc, batch);
  const std::vector<float> params = t.params;
  std::vector<float> y(dout.size()), din = lc.acc ? base : std::vector<float>(x.size());
  OpContext oc{t.workspace.data(), true, 0, false};
  const float* xp = x.data();
  t.op->forward(oc, &xp, y.data(), batch);
  GradOut gd{din.data(), lc.acc};
  t.op->backward(oc, &xp, y.data(), dout.data(), &gd, batch);

  // GpuLinear's calls.
  std::vector<float> gy(y.size()), gdin = lc.acc ? base : std::vector<float>(x.size());
  std::vector<float> gg = lc.acc ? grads0 : std::vector<float>(grads0.size());
  std::vector<float> ones(static_cast<size_t>(R), 1.0f);
  const Spans sp = spans_of(x, dout, params, gy, gdin, gg, ones);
  const float* w = params.data();
  float beta = 0.0f;
  if (lc.bias) {
    for (int r = 0; r < R; ++r)
      std::copy(w + int64_t{O} * I, w + int64_t{O} * I + O, gy.begin() + int64_t{r} * O);
    beta = 1.0f;
  }
  run(linear_forward(x.data(), w, gy.data(), R, I, O, beta), sp);
  const float acc = lc.acc ? 1.0f : 0.0f;
  run(linear_weight_grad(x.data(), dout.data(), gg.data(), R, I, O, acc), sp);
  if (lc.bias)
    run(linear_bias_grad(dout.data(), ones.data(), gg.data() + int64_t{O} * I, R, O, acc), sp);
  run(linear_input_grad(dout.data(), w, gdin.data(), R, I, O, acc), sp);
  EXPECT_LT(rel_error(gy, y), 1e-5) << lc.name << " forward";
  EXPECT_LT(rel_error(gg, t.grads), 1e-5) << lc.name << " parameter gradients";
  EXPECT_LT(rel_error(gdin, din), 1e-5) << lc.name << " input gradient";
}

INSTANTIATE_TEST_SUITE_P(Linear, LinearReplay,
                         ::testing::Values(LinearCase{"flatten", {5, 2, 3}, 7, true, true, false},
                                           LinearCase{"rows", {4, 6}, 5, false, true, false},
                                           LinearCase{
                                               "rows_no_bias_acc", {4, 6}, 5, false, false, true},
                                           LinearCase{"flatten_acc", {3, 3}, 4, true, true, true}),
                         [](const auto& tp) { return std::string(tp.param.name); });

// ---- attention -------------------------------------------------------------------------------

struct AttentionCase {
  const char* name;
  int batch, t, c, heads;
  bool acc;
};

class AttentionReplay : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionReplay, MatchesCpu) {
  const AttentionCase& ac = GetParam();
  recipes::Node n = testing::test_node(OpKind::kAttention);
  n.attrs.heads = ac.heads;
  Rng rng(23);
  auto t = testing::cpu_twin(n, {{ac.t, 3 * ac.c}}, ac.batch, rng);
  const size_t in_n = static_cast<size_t>(ac.batch) * ac.t * 3 * ac.c;
  const size_t out_n = static_cast<size_t>(ac.batch) * ac.t * ac.c;
  auto qkv = normal_vector(in_n, rng);
  auto dout = normal_vector(out_n, rng);
  auto base = normal_vector(in_n, rng);
  std::vector<float> y(out_n), din = ac.acc ? base : std::vector<float>(in_n);
  OpContext oc{t.workspace.data(), true, 0, false};
  const float* xp = qkv.data();
  t.op->forward(oc, &xp, y.data(), ac.batch);
  GradOut gd{din.data(), ac.acc};
  t.op->backward(oc, &xp, y.data(), dout.data(), &gd, ac.batch);

  // GpuAttention's calls and kernels.
  AttentionDims d;
  d.batch = ac.batch, d.t = ac.t, d.c = ac.c, d.heads = ac.heads;
  const int T = ac.t;
  std::vector<float> probs(static_cast<size_t>(ac.batch) * ac.heads * T * T);
  std::vector<float> gy(out_n), gdin = ac.acc ? base : std::vector<float>(in_n);
  std::vector<float> dp(static_cast<size_t>(d.group_size()) * T * T);
  const Spans sp = spans_of(qkv, dout, probs, gy, gdin, dp);
  for (int g = 0; g < d.groups(); ++g) run(attention_scores(d, g, qkv.data(), probs.data()), sp);
  for (size_t r = 0; r < probs.size() / static_cast<size_t>(T); ++r)  // causal_softmax_k
    math::causal_softmax_row(probs.data() + r * static_cast<size_t>(T), static_cast<int>(r % T), T);
  for (int g = 0; g < d.groups(); ++g)
    run(attention_values(d, g, probs.data(), qkv.data(), gy.data()), sp);
  const float beta = ac.acc ? 1.0f : 0.0f;
  for (int g = 0; g < d.groups(); ++g) {
    run(attention_dv(d, g, probs.data(), dout.data(), gdin.data(), beta), sp);
    run(attention_dp(d, g, dout.data(), qkv.data(), dp.data()), sp);
    const float* p = probs.data() + attention_probs_offset(d, g);
    for (int r = 0; r < d.group_size() * T; ++r)  // causal_softmax_grad_k
      math::causal_softmax_grad_row(p + (r / T) * attention_probs_stride(d) + int64_t{r % T} * T,
                                    dp.data() + int64_t{r} * T, r % T, T, d.scale());
    run(attention_dq(d, g, dp.data(), qkv.data(), gdin.data(), beta), sp);
    run(attention_dk(d, g, dp.data(), qkv.data(), gdin.data(), beta), sp);
  }
  EXPECT_LT(rel_error(gy, y), 1e-5) << ac.name << " forward";
  EXPECT_LT(rel_error(gdin, din), 1e-5) << ac.name << " input gradient";
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionReplay,
                         ::testing::Values(AttentionCase{"over_heads", 2, 7, 12, 4, false},
                                           AttentionCase{"over_samples", 5, 6, 12, 2, false},
                                           AttentionCase{"equal_acc", 3, 5, 9, 3, true},
                                           AttentionCase{"one_head_acc", 4, 8, 8, 1, true},
                                           AttentionCase{"one_sample", 1, 9, 16, 4, false}),
                         [](const auto& tp) { return std::string(tp.param.name); });

}  // namespace
}  // namespace dltune::engine::gpu
