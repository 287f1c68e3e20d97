// Rank placement, per-rank environment, CPU lists and binding.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sched.h>

#include "topology/tests/test_util.h"

namespace dltune::topology {
namespace {

using testing::load_fixture;

std::vector<std::string> summary(const Placement& p) {
  std::vector<std::string> out;
  for (const auto& r : p.ranks) {
    out.push_back(std::to_string(r.local_rank) + " gpu=" + std::to_string(r.gpu) + " nic=" + r.nic +
                  " numa=" + std::to_string(r.numa) + " cpus=" + r.cpuset);
  }
  return out;
}

TEST(CpuList, RangesAndSingles) {
  EXPECT_EQ(cpu_list({}), "");
  EXPECT_EQ(cpu_list({3}), "3");
  EXPECT_EQ(cpu_list({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(cpu_list({8, 2, 1, 2}), "1-2,8");  // unsorted and duplicated input
}

TEST(Placement, LassenOneRankPerGpuWithItsSocketCoresAndOwnHca) {
  const Topology t = load_fixture("mpibind_coral-lassen.xml");
  const Placement p = place(t, 0, BindPolicy::kAuto);
  // NUMA 0 has cores with PUs 8-87 (20 cores x 4 PUs), shared by GPU0 and GPU1; NUMA 8 has
  // 96-175. Tied HCAs mlx5_0/mlx5_1 are handed out in turn.
  EXPECT_EQ(summary(p), (std::vector<std::string>{
                            "0 gpu=0 nic=mlx5_0 numa=0 cpus=8-47",
                            "1 gpu=1 nic=mlx5_1 numa=0 cpus=48-87",
                            "2 gpu=2 nic=mlx5_2 numa=8 cpus=96-135",
                            "3 gpu=3 nic=mlx5_3 numa=8 cpus=136-175",
                        }));
  EXPECT_EQ(p.rule, "one rank per GPU (default)");
}

TEST(Placement, MoreRanksThanGpusShareGpusInBlocksWithDisjointCores) {
  const Topology t = load_fixture("mpibind_coral-lassen.xml");
  const Placement p = place(t, 8, BindPolicy::kCore);
  ASSERT_EQ(p.ranks.size(), 8u);
  std::set<int> seen;
  for (const auto& r : p.ranks) {
    EXPECT_EQ(r.gpu, r.local_rank / 2);
    EXPECT_EQ(r.cpus.size(), 20u);  // 4 ranks per socket of 20 cores x 4 PUs
    for (int c : r.cpus) EXPECT_TRUE(seen.insert(c).second) << "PU " << c << " given twice";
  }
}

TEST(Placement, FewerRanksThanGpus) {
  const Topology t = load_fixture("mpibind_g4dnmetal.xml");
  const Placement p = place(t, 2, BindPolicy::kCore);
  ASSERT_EQ(p.ranks.size(), 2u);
  EXPECT_EQ(p.ranks[0].gpu, 0);
  EXPECT_EQ(p.ranks[1].gpu, 1);
  // Both GPUs are on NUMA 0 (24 cores): 12 cores = 24 PUs each, disjoint.
  EXPECT_EQ(p.ranks[0].cpus.size(), 24u);
  EXPECT_EQ(p.ranks[0].nic, "rdmap197s0");
}

TEST(Placement, CpuOnlyNodeGetsOneRankPerNumaNode) {
  const Topology t = load_fixture("mpibind_cts1-quartz-smt1.xml");
  const Placement p = place(t, 0, BindPolicy::kAuto);
  // Two NUMA nodes of 18 cores (hwloc-calc --physical: package 0 holds PUs 0-17); the one
  // Omni-Path HFI is on NUMA 1, so NUMA 0's rank falls back to it too.
  EXPECT_EQ(summary(p), (std::vector<std::string>{"0 gpu=-1 nic=hfi1_0 numa=0 cpus=0-17",
                                                  "1 gpu=-1 nic=hfi1_0 numa=1 cpus=18-35"}));
  EXPECT_EQ(p.rule, "one rank per NUMA node (default)");
}

// mpirun's --map-by: 4 ranks on quartz's two NUMA domains (one per package): core deals them in
// blocks (0 1 | 2 3), numa and socket round-robin (0 2 | 1 3); each domain's ranks take its
// cores in rank order.
TEST(Placement, MapByDealsRanksOverTheDomainsInBlocksOrRoundRobin) {
  const Topology t = load_fixture("mpibind_cts1-quartz-smt1.xml");
  auto numa_of = [](const Placement& p) {
    std::vector<int> out;
    for (const auto& r : p.ranks) out.push_back(r.numa);
    return out;
  };
  const Placement block = place(t, 4, BindPolicy::kCore, MapPolicy::kBlock);
  EXPECT_EQ(numa_of(block), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(block.ranks[1].cpuset, "9-17");
  const Placement numa = place(t, 4, BindPolicy::kCore, MapPolicy::kNuma);
  EXPECT_EQ(numa_of(numa), (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(summary(numa)[1], "1 gpu=-1 nic=hfi1_0 numa=1 cpus=18-26");
  EXPECT_EQ(summary(numa)[2], "2 gpu=-1 nic=hfi1_0 numa=0 cpus=9-17");
  EXPECT_EQ(numa_of(place(t, 4, BindPolicy::kCore, MapPolicy::kSocket)), numa_of(numa));
  // The default is mpirun's: blocks.
  EXPECT_EQ(numa_of(place(t, 4, BindPolicy::kCore)), numa_of(block));
}

// Two packages of two NUMA domains each (as an EPYC in NPS2), two cores a domain: socket deals
// 8 ranks round-robin over the packages and a package's ranks over its domains in blocks; numa
// round-robin over all four domains.
TEST(Placement, MapBySocketAlternatesPackagesBeforeDomains) {
  Topology t;
  for (int d = 0; d < 4; ++d) {
    NumaNode n;
    n.os_index = d;
    n.package = d / 2;
    n.pus = {2 * d, 2 * d + 1};
    t.numa_nodes.push_back(n);
    for (int c = 0; c < 2; ++c) t.cores.push_back(Core{d, d / 2, {2 * d + c}});
  }
  auto numa_of = [](const Placement& p) {
    std::vector<int> out;
    for (const auto& r : p.ranks) out.push_back(r.numa);
    return out;
  };
  EXPECT_EQ(numa_of(place(t, 8, BindPolicy::kCore, MapPolicy::kSocket)),
            (std::vector<int>{0, 2, 0, 2, 1, 3, 1, 3}));
  EXPECT_EQ(numa_of(place(t, 8, BindPolicy::kCore, MapPolicy::kNuma)),
            (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(numa_of(place(t, 8, BindPolicy::kCore, MapPolicy::kBlock)),
            (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  const Placement s = place(t, 8, BindPolicy::kCore, MapPolicy::kSocket);
  EXPECT_EQ(s.ranks[2].cpuset, "1");  // rank 2: the second of domain 0's ranks
  EXPECT_EQ(s.ranks[5].cpuset, "6");
}

TEST(MapPolicy, MpirunsWords) {
  EXPECT_EQ(*parse_map_policy("core"), MapPolicy::kBlock);
  EXPECT_EQ(*parse_map_policy("slot"), MapPolicy::kBlock);
  EXPECT_EQ(*parse_map_policy("numa"), MapPolicy::kNuma);
  EXPECT_EQ(*parse_map_policy("socket"), MapPolicy::kSocket);
  EXPECT_EQ(*parse_map_policy("package"), MapPolicy::kSocket);
  for (const char* bad : {"", "node", "hwthread", "ppr:2:socket", "NUMA"}) {
    auto m = parse_map_policy(bad);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_NE(m.error().message().find("expected core or slot"), std::string::npos);
  }
}

TEST(Placement, OddRankCountSplitsAllCoresEvenly) {
  const Topology t = load_fixture("mpibind_cts1-quartz-smt1.xml");
  const Placement p = place(t, 5, BindPolicy::kCore);
  ASSERT_EQ(p.ranks.size(), 5u);
  size_t total = 0;
  for (const auto& r : p.ranks) {
    EXPECT_GE(r.cpus.size(), 7u);  // 36 cores / 5 ranks: 7 or 8 each
    EXPECT_LE(r.cpus.size(), 8u);
    total += r.cpus.size();
  }
  EXPECT_EQ(total, 36u);
  EXPECT_EQ(p.rule, "5 rank(s), cores split evenly");
}

TEST(Placement, MoreRanksThanPusShareThemAndNumaPolicyGivesWholeNodes) {
  const Topology t = load_fixture("hwloc_nvidiaDGX2.xml");  // 4 PUs, 16 GPUs
  const Placement core = place(t, 0, BindPolicy::kCore);
  ASSERT_EQ(core.ranks.size(), 16u);
  for (const auto& r : core.ranks) EXPECT_EQ(r.cpus.size(), 1u);
  const Placement numa = place(t, 0, BindPolicy::kNuma);
  EXPECT_EQ(numa.ranks[0].cpuset, "0-1");
  EXPECT_EQ(numa.ranks[15].cpuset, "24-25");
  // kAuto with more ranks than cores binds to NUMA nodes.
  EXPECT_EQ(place(t, 0, BindPolicy::kAuto).ranks[3].cpuset, "0-1");
  const Placement none = place(t, 3, BindPolicy::kNone);
  ASSERT_EQ(none.ranks.size(), 3u);
  EXPECT_TRUE(none.ranks[0].cpus.empty());
  EXPECT_EQ(none.ranks[2].gpu, 2);
}

TEST(Placement, TiogaGcdsShareTheirNumaNodeAndSlingshotNic) {
  const Topology t = load_fixture("mpibind_eas-tioga.xml");
  const Placement p = place(t, 0, BindPolicy::kAuto);
  ASSERT_EQ(p.ranks.size(), 8u);
  EXPECT_EQ(p.ranks[0].numa, 3);
  EXPECT_EQ(p.ranks[0].nic, "hsi0");
  EXPECT_EQ(p.ranks[1].nic, "hsi0");
  EXPECT_EQ(p.ranks[0].cpus.size(), 16u);  // NUMA 3: 16 cores x 2 PUs, halved
  std::set<int> both(p.ranks[0].cpus.begin(), p.ranks[0].cpus.end());
  both.insert(p.ranks[1].cpus.begin(), p.ranks[1].cpus.end());
  EXPECT_EQ(both.size(), 32u);
}

TEST(Placement, NegativeCountMeansDefault) {
  const Topology t = load_fixture("mpibind_cts1-pascal.xml");
  EXPECT_EQ(place(t, -3, BindPolicy::kAuto).ranks.size(), 2u);
}

TEST(BindPolicy, Parse) {
  EXPECT_EQ(*parse_bind_policy("core"), BindPolicy::kCore);
  EXPECT_EQ(*parse_bind_policy("none"), BindPolicy::kNone);
  auto bad = parse_bind_policy("socket");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "unknown binding 'socket': expected auto, core, numa or none");
}

TEST(RankEnv, InfinibandAndNvidia) {
  const Topology t = load_fixture("mpibind_coral-lassen.xml");
  const Placement p = place(t, 0, BindPolicy::kAuto);
  const auto env = rank_env(t, p.ranks[1]);
  const std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  EXPECT_EQ(m.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(m.at("NCCL_IB_HCA"), "=mlx5_1");
  EXPECT_EQ(m.at("UCX_NET_DEVICES"), "mlx5_1:1");
  EXPECT_EQ(m.at("OMPI_MCA_btl_openib_if_include"), "mlx5_1:1");
  EXPECT_EQ(m.at("NCCL_SOCKET_IFNAME"), "=hsi1");
}

TEST(RankEnv, AmdAndSlingshot) {
  const Topology t = load_fixture("mpibind_eas-tioga.xml");
  const Placement p = place(t, 0, BindPolicy::kAuto);
  const auto env = rank_env(t, p.ranks[5]);
  const std::map<std::string, std::string> m(env.begin(), env.end());
  EXPECT_EQ(m.at("ROCR_VISIBLE_DEVICES"), "5");
  EXPECT_EQ(m.at("FI_PROVIDER"), "cxi");
  EXPECT_EQ(m.count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST(RankEnv, NothingWithoutGpuOrNic) {
  Topology t;
  RankPlacement r;
  EXPECT_TRUE(rank_env(t, r).empty());
}

TEST(Affinity, BindsTheCallingThreadAndRejectsBadLists) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  int first = -1;
  for (int i = 0; i < CPU_SETSIZE && first < 0; ++i) {
    if (CPU_ISSET(i, &before)) first = i;
  }
  ASSERT_GE(first, 0);
  ASSERT_TRUE(set_affinity(0, {first}).ok());
  cpu_set_t now;
  ASSERT_EQ(sched_getaffinity(0, sizeof now, &now), 0);
  EXPECT_EQ(CPU_COUNT(&now), 1);
  EXPECT_TRUE(CPU_ISSET(first, &now));
  ASSERT_EQ(sched_setaffinity(0, sizeof before, &before), 0);  // restore
  EXPECT_FALSE(set_affinity(0, {}).ok());
  EXPECT_EQ(set_affinity(0, {-1}).error().kind(), ErrorKind::kInvalidInput);
}

}  // namespace
}  // namespace dltune::topology
