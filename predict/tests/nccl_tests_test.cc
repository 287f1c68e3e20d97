// The model against nccl-tests' measured allreduce bus bandwidth of two fabrics nobody here
// measured (predict/tests/data: 2 x p4de.24xlarge, 2 x p5.48xlarge), from the nodes' published
// specifications only: within 20 % from 64 MiB up (bench/predict prints the table).
#include "predict/nccl_tests.h"

#include <gtest/gtest.h>

#include "common/paths.h"

#include "predict/topo_fabric.h"

namespace dltune::predict {
namespace {

std::string data(const std::string& f) { return std::string(DLTUNE_PREDICT_TEST_DATA) + "/" + f; }

std::vector<NcclTestsRow> rows(const std::string& file) {
  auto text = paths::read_file(data(file));
  EXPECT_TRUE(text.ok());
  auto r = parse_nccl_tests(*text);
  EXPECT_TRUE(r.ok());
  return *r;
}

double worst(const std::vector<BusbwCheck>& checks) {
  double w = 0;
  for (const auto& c : checks) w = std::max(w, std::abs(c.rel_err));
  return w;
}

TEST(NcclTests, ParsesAllReducePerfLogs) {
  const auto r = rows("awsome_nccl-tests_all_reduce_perf_2x_p4de.24xlarge.txt");
  ASSERT_EQ(r.size(), 29u);
  EXPECT_EQ(r.front().bytes, 8);
  EXPECT_DOUBLE_EQ(r.back().busbw_gbps, 78.33);
  EXPECT_FALSE(parse_nccl_tests("# nothing here\n").ok());
}

TEST(NcclTests, P4deFromItsTopologyFileWithinTwentyPercent) {
  // p4de.24xlarge: 8 x A100 on NVSwitch (600 GB/s both ways), 4 x 100 Gbit/s EFA: the topology
  // file AWS ships for p4d (same GPUs' links, same adapters).
  auto t = load_node_topology(data("aws_p4d-24xl-topo.xml"));
  ASSERT_TRUE(t.ok());
  const Fabric f = fabric_from_topology(*t, kNetworkEfficiency);
  const auto checks = check_busbw(rows("awsome_nccl-tests_all_reduce_perf_2x_p4de.24xlarge.txt"),
                                  64 << 20, 2, 8, f);
  ASSERT_EQ(checks.size(), 6u);
  EXPECT_LT(worst(checks), 0.20);
}

TEST(NcclTests, P5FromItsSpecificationWithinTwentyPercent) {
  // p5.48xlarge: 8 x H100 on NVSwitch (900 GB/s both ways), 3,200 Gbit/s of EFA (32 x 100):
  // 450 GB/s a direction between GPUs, 50 GB/s of network per GPU.
  Fabric f;
  f.intra = {1e-6, 1 / 450e9, 0};
  f.inter = {10e-6, 1 / (50e9 * kNetworkEfficiency), 0};
  const auto checks =
      check_busbw(rows("awsome_nccl-tests_all_reduce_perf_2x_p5.48xlarge.txt"), 64 << 20, 2, 8, f);
  ASSERT_EQ(checks.size(), 9u);
  EXPECT_LT(worst(checks), 0.20);
}

}  // namespace
}  // namespace dltune::predict
