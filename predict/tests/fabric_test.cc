// predict/fabric.h: each algorithm's time against its formula worked by hand, and the
// orderings the model must show (latency-bound small messages, bandwidth-bound large ones,
// hierarchical ahead when the network is the slow level).
#include "predict/fabric.h"

#include <gtest/gtest.h>

namespace dltune::predict {
namespace {

Fabric two_level(double intra_gbps, double inter_gbps_per_rank) {
  Fabric f;
  f.intra = {1e-6, 1 / (intra_gbps * 1e9), 0};
  f.inter = {20e-6, 1 / (inter_gbps_per_rank * 1e9), 0};
  return f;
}

TEST(Fabric, OneRankCostsNothing) {
  const Fabric f = two_level(10, 1);
  for (auto a : {AllreduceAlgo::kRing, AllreduceAlgo::kRecursiveDoubling, AllreduceAlgo::kHier,
                 AllreduceAlgo::kHierPipelined, AllreduceAlgo::kShm}) {
    EXPECT_EQ(allreduce_seconds(a, 1 << 20, 1, 1, f), 0) << algo_name(a);
  }
}

TEST(Fabric, RingOnOneNodeIsTheTextbookFormula) {
  Fabric f;
  f.intra = {2e-6, 1e-9, 0.5e-9};
  const double n = 8e6;
  const int p = 4;
  const double want =
      2.0 * (p - 1) * 2e-6 + 2.0 * (p - 1) / p * n * 1e-9 + (p - 1.0) / p * n * 0.5e-9;
  EXPECT_NEAR(allreduce_seconds(AllreduceAlgo::kRing, n, 1, p, f), want, 1e-12);
}

TEST(Fabric, RecursiveDoublingAcrossNodesUsesEachRanksShare) {
  // 2 nodes x 2 ranks: one intra exchange at 10 GB/s, one inter exchange with both ranks of a
  // node sending at once, each on half of its node's 2 x 1 GB/s.
  const Fabric f = two_level(10, 1);
  const double n = 1e6;
  const double want = (1e-6 + n / 10e9) + (20e-6 + n / 1e9);
  EXPECT_NEAR(allreduce_seconds(AllreduceAlgo::kRecursiveDoubling, n, 2, 2, f), want, 1e-12);
}

TEST(Fabric, NonPowersOfTwoPayTheFold) {
  Fabric f;
  f.intra = {1e-6, 1e-9, 0};
  EXPECT_GT(allreduce_seconds(AllreduceAlgo::kRecursiveDoubling, 1e6, 1, 3, f),
            allreduce_seconds(AllreduceAlgo::kRecursiveDoubling, 1e6, 1, 4, f));
}

TEST(Fabric, SmallMessagesPreferFewStepsLargeOnesFewBytes) {
  const Fabric f = two_level(10, 1);
  const auto algos = host_algorithms(8);
  EXPECT_EQ(best_allreduce(algos, 64, 8, 2, f).algo, AllreduceAlgo::kRecursiveDoubling);
  const AllreduceAlgo large = best_allreduce(algos, 64e6, 8, 2, f).algo;
  EXPECT_TRUE(large == AllreduceAlgo::kHier || large == AllreduceAlgo::kRabenseifner ||
              large == AllreduceAlgo::kRing)
      << algo_name(large);
}

TEST(Fabric, HierarchicalWinsWhenTheNetworkIsTheSlowLevel) {
  // Fast memory, slow network, several ranks per node: the leaders alone cross nodes.
  const Fabric f = two_level(20, 0.5);
  const double n = 16e6;
  const double hier = allreduce_seconds(AllreduceAlgo::kHier, n, 4, 4, f);
  for (auto a : {AllreduceAlgo::kRing, AllreduceAlgo::kRecursiveDoubling,
                 AllreduceAlgo::kRabenseifner, AllreduceAlgo::kTree}) {
    EXPECT_LT(hier, allreduce_seconds(a, n, 4, 4, f)) << algo_name(a);
  }
}

TEST(Fabric, PipelinedHierarchyTakesTheSlowerLevelPlusItsFill) {
  Fabric f;
  f.intra = {0, 1 / 300e9, 0};
  f.inter = {0, 1 / 6e9, 0};
  f.chunk_bytes = 512 * 1024;
  const double n = 1e9;
  const double t_out = 2 * 0.5 * (n / 8) / 6e9;  // 2 nodes x 8
  const double fill = (2 * 7 + 2) * f.chunk_bytes / 6e9;
  EXPECT_NEAR(allreduce_seconds(AllreduceAlgo::kHierPipelined, n, 2, 8, f), t_out + fill, 1e-9);
}

TEST(Fabric, ShmIsOneNodeOnly) {
  const Fabric f = two_level(10, 1);
  EXPECT_EQ(allreduce_seconds(AllreduceAlgo::kShm, 1e6, 2, 2, f),
            allreduce_seconds(AllreduceAlgo::kHier, 1e6, 2, 2, f));
  EXPECT_LT(allreduce_seconds(AllreduceAlgo::kShm, 1e6, 1, 2, f),
            allreduce_seconds(AllreduceAlgo::kHier, 1e6, 1, 2, f));
}

TEST(Fabric, NamesRoundTripAndUnknownOnesAreRefused) {
  for (auto a : {AllreduceAlgo::kRing, AllreduceAlgo::kRecursiveDoubling,
                 AllreduceAlgo::kRabenseifner, AllreduceAlgo::kTree, AllreduceAlgo::kHier,
                 AllreduceAlgo::kHierPipelined, AllreduceAlgo::kShm}) {
    auto p = parse_algo(algo_name(a));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, a);
  }
  auto bad = parse_algo("bogus");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("bogus"), std::string::npos);
}

TEST(Fabric, BusBandwidthIsNcclTestsDefinition) {
  EXPECT_NEAR(bus_gbps(1e9, 0.01, 16), 100.0 * 2 * 15 / 16, 1e-9);
  EXPECT_EQ(bus_gbps(1e9, 0.01, 1), 0);
}

}  // namespace
}  // namespace dltune::predict
