#include "plugins/nccl_tuner/decision.h"

#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "plugins/nccl_tuner/nccl_tuner_abi.h"
#include "plugins/nccl_tuner/tests/cost_table.h"

namespace dltune::plugins {
namespace {

using Table = dltune::plugins::testing::CostTable;

const char* kPlan = R"({
  "version": 1,
  "job": {"nodes": 2, "ranks_per_node": 8},
  "training": {"per_rank_batch": 4, "global_batch": 64, "scaling": "weak"},
  "collectives": {
    "allreduce": [
      {"min_bytes": 0, "max_bytes": 65536, "algo": "nccl_tree_ll"},
      {"min_bytes": 65536, "max_bytes": 16777216, "algo": "nccl_ring_ll128"},
      {"min_bytes": 16777216, "max_bytes": 18446744073709551615, "algo": "nccl_ring"}],
    "broadcast": [{"min_bytes": 0, "max_bytes": 18446744073709551615, "algo": "tree"}]
  }})";

TEST(NcclDecision, ParsesAlgorithmNames) {
  auto r = parse_nccl_algo("nccl_nvls_tree_simple");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->algo, kNcclAlgoNvlsTree);
  EXPECT_EQ(r->proto, kNcclProtoSimple);
  EXPECT_EQ(parse_nccl_algo("nccl_ring")->proto, -1);
  EXPECT_EQ(parse_nccl_algo("nccl_ring_ll")->proto, kNcclProtoLL);
  EXPECT_EQ(parse_nccl_algo("nccl_collnet_chain_ll128")->algo, kNcclAlgoCollnetChain);
  EXPECT_FALSE(parse_nccl_algo("ring").ok());
  // The NCCL communicator's choice names (what `dltune tune --backend nccl` stores).
  EXPECT_EQ(parse_nccl_algo("nccl:ring/ll")->algo, kNcclAlgoRing);
  EXPECT_EQ(parse_nccl_algo("nccl:ring/ll")->proto, kNcclProtoLL);
  EXPECT_EQ(parse_nccl_algo("nccl:tree/")->proto, -1);
  EXPECT_EQ(parse_nccl_algo("nccl:nvls_tree/simple")->algo, kNcclAlgoNvlsTree);
  EXPECT_FALSE(parse_nccl_algo("nccl:/ll").ok());
  EXPECT_FALSE(parse_nccl_algo("nccl:ring/fast").ok());
  EXPECT_NE(parse_nccl_algo("nccl_ring_fast").error().message().find("proto ll, ll128 or simple"),
            std::string::npos);
  EXPECT_NE(parse_nccl_algo("nccl_star").error().message().find("is not an NCCL algorithm"),
            std::string::npos);
}

TEST(NcclDecision, ChoosesThePlansAlgorithmPerSize) {
  auto d = Decision::from_plan_json(kPlan, 16, 2);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->rules().size(), 3u);  // the CPU "tree" broadcast range is not an NCCL rule
  struct Case {
    size_t bytes;
    std::pair<int, int> want;
  };
  for (const Case& c :
       {Case{8, {kNcclAlgoTree, kNcclProtoLL}}, Case{65535, {kNcclAlgoTree, kNcclProtoLL}},
        Case{65536, {kNcclAlgoRing, kNcclProtoLL128}},
        Case{1 << 20, {kNcclAlgoRing, kNcclProtoLL128}}}) {
    Table t;
    EXPECT_TRUE(
        d->apply(kNcclFuncAllReduce, c.bytes, t.rows, kNcclNumAlgorithms, kNcclNumProtocols));
    EXPECT_EQ(t.pick(), c.want) << c.bytes;
  }
  // No protocol in the plan: the cheapest protocol NCCL offers for ring is lowered.
  Table t;
  t.cells[kNcclAlgoRing][kNcclProtoLL] = kNcclAlgoProtoIgnore;
  t.cells[kNcclAlgoRing][kNcclProtoSimple] = 5.0f;
  EXPECT_TRUE(
      d->apply(kNcclFuncAllReduce, 64u << 20, t.rows, kNcclNumAlgorithms, kNcclNumProtocols));
  EXPECT_EQ(t.pick(), std::make_pair(int{kNcclAlgoRing}, int{kNcclProtoSimple}));
}

TEST(NcclDecision, LeavesNcclAloneWithoutAMeasurement) {
  auto d = Decision::from_plan_json(kPlan, 16, 2);
  ASSERT_TRUE(d.ok());
  auto unchanged = [&](Table& t, int coll, size_t bytes, int num_algo, float** rows) {
    float before[kNcclNumAlgorithms][kNcclNumProtocols];
    std::memcpy(before, t.cells, sizeof before);
    const bool changed = d->apply(coll, bytes, rows, num_algo, kNcclNumProtocols);
    return !changed && std::memcmp(before, t.cells, sizeof before) == 0;
  };
  Table t;
  // A collective the plan does not cover.
  EXPECT_TRUE(unchanged(t, kNcclFuncAllGather, 1024, kNcclNumAlgorithms, t.rows));
  // The plan's choice is unavailable (NCCL marked it ignored): keep NCCL's choice.
  t.cells[kNcclAlgoTree][kNcclProtoLL] = kNcclAlgoProtoIgnore;
  EXPECT_TRUE(unchanged(t, kNcclFuncAllReduce, 8, kNcclNumAlgorithms, t.rows));
  // A table narrower than the chosen algorithm index.
  EXPECT_TRUE(unchanged(t, kNcclFuncAllReduce, 1 << 20, 1, t.rows));
  EXPECT_TRUE(unchanged(t, kNcclFuncAllReduce, 8, kNcclNumAlgorithms, nullptr));
}

TEST(NcclDecision, PlanForAnotherShapeGivesNoRules) {
  auto d = Decision::from_plan_json(kPlan, 8, 1);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->rules().empty());
  EXPECT_NE(d->note().find("tuned for 2 node(s) x 8 rank(s)"), std::string::npos);
}

TEST(NcclDecision, MalformedPlansAreErrors) {
  EXPECT_FALSE(Decision::from_plan_json("not json", 1, 1).ok());
  EXPECT_FALSE(Decision::from_plan_json("[1,2]", 1, 1).ok());
  EXPECT_FALSE(Decision::from_plan_json(R"({"collectives": 3})", 1, 1).ok());
  EXPECT_FALSE(
      Decision::from_plan_json(R"({"collectives": {"allreduce": [{"algo": "nccl_ring"}]}})", 1, 1)
          .ok());
  EXPECT_FALSE(
      Decision::from_plan_json(
          R"({"collectives": {"allreduce": [{"min_bytes": 0, "max_bytes": 8, "algo": "nccl_bogus"}]}})",
          1, 1)
          .ok());
  // Not a plan at all (an engine configuration once reached the plugin this way): an error.
  EXPECT_FALSE(Decision::from_plan_json(R"({"version": 1})", 1, 1).ok());
  EXPECT_FALSE(Decision::from_plan_json(R"({"model": "lenet", "steps": 10})", 1, 1).ok());
  // A plan of host algorithms only: no rule, and the note says so.
  auto host = Decision::from_plan_json(
      R"({"version": 1, "job": {"nodes": 1, "ranks_per_node": 2},
          "training": {"per_rank_batch": 4, "global_batch": 8, "scaling": "weak"},
          "collectives": {"allreduce": [
            {"min_bytes": 0, "max_bytes": 18446744073709551615, "algo": "ring"}]}})",
      2, 1);
  ASSERT_TRUE(host.ok()) << host.error().message();
  EXPECT_TRUE(host->rules().empty());
  EXPECT_EQ(host->note(), "the plan chooses no NCCL algorithm");
}

}  // namespace
}  // namespace dltune::plugins
