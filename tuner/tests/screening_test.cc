// The screening model against landscapes whose answer is known by construction: exactly
// additive ones (every prediction must come back to the last digit), noisy ones (the residual
// must see the noise), and designs whose coverage is checked level by level.
#include "tuner/screening.h"

#include <cmath>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

namespace dltune::tuner::screening {
namespace {

// Every combination of `counts[f]` levels, the first factor slowest.
std::vector<Levels> factorial(const std::vector<int>& counts) {
  std::vector<Levels> out{{}};
  for (int n : counts) {
    std::vector<Levels> next;
    for (const Levels& l : out) {
      for (int v = 0; v < n; ++v) {
        Levels m = l;
        m.push_back(v);
        next.push_back(m);
      }
    }
    out = next;
  }
  return out;
}

// An additive landscape in log rate: 1000 x prod effect[f][level].
double additive(const Levels& l, const std::vector<std::vector<double>>& effect) {
  double r = 1000;
  for (size_t f = 0; f < l.size(); ++f) r *= effect[f][static_cast<size_t>(l[f])];
  return r;
}

TEST(Screening, DesignCoversEveryLevelAndIdentifiesTheModel) {
  const auto cs = factorial({3, 2, 2});  // batch x shape x bucket: 12 candidates
  const auto d = design(cs);
  // 1 + 2 + 1 + 1 = 5 parameters, and one more for the residual.
  ASSERT_EQ(d.size(), 6u);
  EXPECT_TRUE(std::is_sorted(d.begin(), d.end()));
  for (size_t f = 0; f < 3; ++f) {
    std::set<int> seen;
    for (size_t i : d) seen.insert(cs[i][f]);
    EXPECT_EQ(seen.size(), f == 0 ? 3u : 2u) << "factor " << f;
  }
  // An exactly additive landscape: the design's six measurements predict the other six exactly.
  const std::vector<std::vector<double>> effect = {{1.0, 1.3, 1.7}, {0.6, 1.0}, {1.0, 0.97}};
  std::vector<std::pair<size_t, double>> m;
  for (size_t i : d) m.emplace_back(i, additive(cs[i], effect));
  auto f = fit(cs, m);
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->measured, 6u);
  EXPECT_EQ(f->dof, 1u);
  EXPECT_NEAR(f->rms, 0, 1e-9);
  for (size_t i = 0; i < cs.size(); ++i) {
    auto p = predict(*f, cs[i]);
    ASSERT_TRUE(p.has_value()) << i;
    EXPECT_NEAR(*p, additive(cs[i], effect), 1e-6 * additive(cs[i], effect)) << i;
  }
}

TEST(Screening, NoDesignWhereItWouldNotSaveRuns) {
  EXPECT_TRUE(design(factorial({9})).empty());        // one factor: every level is a parameter
  EXPECT_TRUE(design(factorial({3, 1, 1})).empty());  // only one factor varies
  EXPECT_TRUE(design(factorial({2, 2})).empty());     // 3 parameters + 1 of 4 candidates
  EXPECT_TRUE(design(factorial({3, 2})).empty());     // 4 + 1 of 6
  EXPECT_TRUE(design({}).empty());
  EXPECT_EQ(design(factorial({4, 4})).size(), 8u);  // 7 + 1 of 16
  EXPECT_EQ(design(factorial({3, 2, 2}), 0).size(), 5u);
  // A larger space keeps its design at the parameters + extra.
  EXPECT_EQ(design(factorial({5, 4, 3})).size(), 1u + 4 + 3 + 2 + 1);
}

TEST(Screening, NonFactorialSpacesStillScreen) {
  // Ranks x threads shapes that exist only for some batches (a shape too big for the memory at
  // the largest batch, say): 5 shapes x 4 batches less 3 combinations.
  std::vector<Levels> cs;
  for (int b = 0; b < 4; ++b) {
    for (int s = 0; s < 5; ++s) {
      if (b == 3 && s >= 2) continue;
      cs.push_back({b, s});
    }
  }
  const auto d = design(cs);
  ASSERT_FALSE(d.empty());
  EXPECT_LE(d.size(), 1u + 3 + 4 + 1);
  const std::vector<std::vector<double>> effect = {{1.0, 1.2, 1.3, 1.35}, {1, 0.8, 1.1, 0.9, 0.7}};
  std::vector<std::pair<size_t, double>> m;
  for (size_t i : d) m.emplace_back(i, additive(cs[i], effect));
  auto f = fit(cs, m);
  ASSERT_TRUE(f.ok());
  for (const Levels& l : cs) {
    auto p = predict(*f, l);
    ASSERT_TRUE(p.has_value());
    EXPECT_NEAR(*p, additive(l, effect), 1e-6 * additive(l, effect));
  }
}

TEST(Screening, TheResidualSeesNoiseAndInteractions) {
  const auto cs = factorial({3, 2, 2});
  const std::vector<std::vector<double>> effect = {{1.0, 1.3, 1.7}, {0.6, 1.0}, {1.0, 1.0}};
  std::mt19937 rng(3);
  std::normal_distribution<double> n(0, 0.05);
  std::vector<std::pair<size_t, double>> m;
  for (size_t i = 0; i < cs.size(); ++i)
    m.emplace_back(i, additive(cs[i], effect) * std::exp(n(rng)));
  auto f = fit(cs, m);  // all 12 measured: 7 degrees of freedom
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->dof, 7u);
  EXPECT_GT(f->rms, 0.02);
  EXPECT_LT(f->rms, 0.10);
  // An interaction: the largest batch is 2x faster only in the second shape.
  std::vector<std::pair<size_t, double>> mi;
  for (size_t i = 0; i < cs.size(); ++i) {
    const double boost = cs[i][0] == 2 && cs[i][1] == 1 ? 2.0 : 1.0;
    mi.emplace_back(i, additive(cs[i], effect) * boost);
  }
  auto g = fit(cs, mi);
  ASSERT_TRUE(g.ok());
  EXPECT_GT(g->rms, 0.2);  // the additive model cannot hold it, and says so
}

TEST(Screening, ALevelNoMeasuredCandidateHasIsNotPredicted) {
  const auto cs = factorial({3, 2});
  std::vector<std::pair<size_t, double>> m;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (cs[i][0] != 2) m.emplace_back(i, 100.0 + static_cast<double>(i));  // batch level 2 failed
  }
  auto f = fit(cs, m);
  ASSERT_TRUE(f.ok()) << f.error().message();
  for (const Levels& l : cs) EXPECT_EQ(predict(*f, l).has_value(), l[0] != 2) << l[0];
  EXPECT_FALSE(predict(*f, {5, 0}).has_value());  // outside the candidates' levels
  EXPECT_FALSE(predict(*f, {0}).has_value());     // another number of factors
}

TEST(Screening, FitRefusesBadMeasurements) {
  const auto cs = factorial({3, 2});
  EXPECT_FALSE(fit(cs, {}).ok());
  EXPECT_FALSE(fit(cs, {{6, 100.0}}).ok());
  EXPECT_FALSE(fit(cs, {{0, 0.0}}).ok());
  EXPECT_FALSE(fit(cs, {{0, -3.0}}).ok());
  EXPECT_FALSE(fit(cs, {{0, std::nan("")}}).ok());
  EXPECT_FALSE(fit(cs, {{0, INFINITY}}).ok());
  auto one = fit(cs, {{0, 50.0}});  // one measurement: the mean only
  ASSERT_TRUE(one.ok());
  EXPECT_NEAR(*predict(*one, cs[0]), 50.0, 1e-9);
  EXPECT_FALSE(predict(*one, cs[1]).has_value());
}

}  // namespace
}  // namespace dltune::tuner::screening
