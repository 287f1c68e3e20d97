// From a TuningOutcome to what the database stores: the Plan, the measurement rows, the JSON
// hand-over between rank 0 and `dltune tune`, and the printed tables.
#include "tuner/collective_plan.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tuner/collective_tuning.h"
#include "tuner/db/records.h"

namespace dltune::tuner {
namespace {

TuningOutcome sample_outcome() {
  TuningOutcome o;
  o.ranks = 2;
  o.nodes = 1;
  o.strategy = "model";
  o.candidates = {"rd", "ring", "ring/262144", "native"};
  o.tuning_s = 1.5;
  o.comparisons = 4;
  o.sizes = {{4, "rd", 1.0, true, "ring", 2.0, 1.9},
             {8, "rd", 1.1, false, "", 0, 0},
             {16, "ring", 3.0, true, "rd", 3.3, 1.1},
             {32, "ring/262144", 5.0, true, "ring", 5.5, 1.08}};
  o.measurements = {{4, "rd", 1.0, 0.9, 1.2, 0.1, 9, false, ""},
                    {4, "ring/262144", 2.5, 2.4, 2.7, 0.1, 9, false, ""},
                    {4, "native", 0, 0, 0, 0, 0, true, "it said \"no\"; 'quoted' `x` \\ \n"}};
  o.failures = {"native at 4 B: it said no"};
  return o;
}

db::Key sample_key() {
  db::Key k;
  k.fingerprint = std::string(64, 'a');
  k.family = std::string(64, 'b');
  k.versions.dltune = "0.1.0";
  k.shape = {1, 2};
  return k;
}

TEST(CollectivePlan, RangesFromChoices) {
  auto plan = plan_from_outcome(sample_outcome());
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const auto& r = plan->collectives.at(recipes::Collective::kAllreduce);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].min_bytes, 0u);
  EXPECT_EQ(r[0].max_bytes, 16u);
  EXPECT_EQ(r[0].algo, recipes::Algorithm::kRecursiveDoubling);
  EXPECT_EQ(r[1].algo, recipes::Algorithm::kRing);
  EXPECT_EQ(r[1].segment_bytes, 0u);
  EXPECT_EQ(r[2].min_bytes, 32u);
  EXPECT_EQ(r[2].max_bytes, recipes::kPlanMaxBytes);
  EXPECT_EQ(r[2].segment_bytes, 262144u);
  EXPECT_EQ(plan->provenance.source, recipes::PlanSource::kTuned);
  EXPECT_NE(plan->provenance.reason.find("model-based"), std::string::npos);
  EXPECT_EQ(plan->job.ranks_per_node, 2);
  EXPECT_TRUE(recipes::validate_plan(*plan).ok());
  EXPECT_TRUE(recipes::parse_plan(recipes::serialize_plan(*plan)).ok());
}

TEST(CollectivePlan, RejectsImpossibleOutcomes) {
  TuningOutcome o = sample_outcome();
  o.sizes.clear();
  EXPECT_FALSE(plan_from_outcome(o).ok());
  o = sample_outcome();
  o.sizes[0].chosen = "warp-drive";
  EXPECT_FALSE(plan_from_outcome(o).ok());
  o = sample_outcome();
  o.nodes = 0;
  EXPECT_FALSE(plan_from_outcome(o).ok());
}

TEST(CollectivePlan, MeasurementRowsAreValidEvenWithHostileReasons) {
  db::Provenance prov = db::local_provenance();
  auto rows = measurement_rows(sample_outcome(), sample_key(), prov);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].algorithm, "ring");
  EXPECT_EQ(rows[1].segment_bytes, 262144u);
  EXPECT_TRUE(rows[2].failed);
  EXPECT_FALSE(rows[2].reason.empty());
  for (const auto& m : rows) {
    Status s = db::validate_measurement(m);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
  }
}

TEST(CollectivePlan, OutcomeJsonRoundTrip) {
  TuningOutcome o = sample_outcome();
  o.verify = VerifyReport{10.0, 0.15, 0.97, 0.98, {{4, "rd", "rd", 1.0, 1.0, 1.0, true}}};
  o.sizes[0].measured_candidates = {"rd", "ring/262144"};
  auto back = outcome_from_json(outcome_to_json(o));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(outcome_to_json(*back), outcome_to_json(o));
  ASSERT_TRUE(back->verify.has_value());
  EXPECT_DOUBLE_EQ(back->verify->worst_vs_oracle, 0.97);
  EXPECT_DOUBLE_EQ(back->verify->worst_where_searched_all, 0.98);
  EXPECT_TRUE(back->verify->rows.at(0).searched_all);
  EXPECT_EQ(back->sizes[0].measured_candidates, o.sizes[0].measured_candidates);
  EXPECT_FALSE(outcome_from_json(nlohmann::json::object()).ok());
  auto j = outcome_to_json(o);
  j["sizes"][0]["bytes"] = "four";
  EXPECT_FALSE(outcome_from_json(j).ok());
}

TEST(CollectivePlan, TablesNameChoicesRunnersUpAndVerification) {
  TuningOutcome o = sample_outcome();
  o.verify = VerifyReport{10.0, 0.15, 0.97, 0.97, {{4, "rd", "ring", 1.0, 0.97, 0.97, true}}};
  const std::string t = format_outcome(o);
  EXPECT_NE(t.find("0.970 =\n"), std::string::npos) << t;
  EXPECT_NE(t.find("run-to-run spread; worst there 0.970"), std::string::npos) << t;
  EXPECT_NE(t.find("runner-up"), std::string::npos);
  EXPECT_NE(t.find("1.900x"), std::string::npos);
  EXPECT_NE(t.find("ring/262144"), std::string::npos);
  EXPECT_NE(t.find("worst vs oracle 0.970"), std::string::npos);
  EXPECT_NE(t.find("failed: native"), std::string::npos);
  auto plan = plan_from_outcome(o);
  ASSERT_TRUE(plan.ok());
  const std::string p = format_plan_ranges(*plan);
  EXPECT_NE(p.find("[0 B, 16 B)  rd"), std::string::npos) << p;
  EXPECT_NE(p.find("segments of 256 KiB"), std::string::npos) << p;
}

}  // namespace
}  // namespace dltune::tuner
