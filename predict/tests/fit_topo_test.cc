// predict/level_fit.h on sweeps made from known links (the fit must give them back), and
// predict/topo_fabric.h on real NCCL and hwloc topology files.
#include <gtest/gtest.h>

#include "predict/level_fit.h"
#include "predict/machine_comm.h"
#include "predict/topo_fabric.h"

namespace dltune::predict {
namespace {

std::vector<tuner::db::Measurement> sweep(const Fabric& f, int nodes, int g,
                                          const std::vector<std::string>& algos) {
  std::vector<tuner::db::Measurement> rows;
  for (const std::string& a : algos) {
    for (double b = 4; b <= (64 << 20); b *= 4) {
      tuner::db::Measurement m;
      m.key.shape = {nodes, g};
      m.collective = "allreduce";
      m.algorithm = a;
      m.bytes = static_cast<uint64_t>(b);
      auto algo = parse_algo(a.substr(0, a.find('/')));
      m.median_us = allreduce_seconds(*algo, b, nodes, g, f) * 1e6;
      rows.push_back(m);
    }
  }
  return rows;
}

TEST(LevelFit, GivesBackTheIntraLinkASweepWasMadeFrom) {
  Fabric truth;
  truth.intra = {0.8e-6, 1 / 6e9, 1 / 12e9};
  auto fit =
      fit_intra(sweep(truth, 1, 4, {"ring", "ring/262144", "rd", "rabenseifner", "tree", "shm"}));
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_EQ(fit->level, "intra");
  EXPECT_EQ(fit->ranks_per_node, 4);
  EXPECT_NEAR(fit->link.alpha_s, truth.intra.alpha_s, 0.01 * truth.intra.alpha_s);
  EXPECT_NEAR(fit->link.beta_s_per_b, truth.intra.beta_s_per_b, 0.01 * truth.intra.beta_s_per_b);
  EXPECT_NEAR(fit->link.gamma_s_per_b, truth.intra.gamma_s_per_b, 0.02 * truth.intra.gamma_s_per_b);
  EXPECT_LT(fit->rel_rms, 1e-6);
}

TEST(LevelFit, GivesBackTheInterLinkGivenTheIntraOne) {
  Fabric truth;
  truth.intra = {0.5e-6, 1 / 8e9, 1 / 16e9};
  truth.inter = {25e-6, 1 / 0.6e9, 1 / 16e9};  // the reduction runs on the same cores
  auto fit =
      fit_inter(sweep(truth, 2, 2, {"ring", "rd", "rabenseifner", "tree", "hier"}), truth.intra);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_EQ(fit->level, "inter");
  EXPECT_EQ(fit->nodes, 2);
  EXPECT_NEAR(fit->link.alpha_s, truth.inter.alpha_s, 0.05 * truth.inter.alpha_s);
  EXPECT_NEAR(fit->link.beta_s_per_b, truth.inter.beta_s_per_b, 0.05 * truth.inter.beta_s_per_b);
  EXPECT_EQ(fit->link.gamma_s_per_b, truth.intra.gamma_s_per_b);  // taken, not fitted
  EXPECT_LT(fit->rel_rms, 0.05);
}

TEST(LevelFit, RefusesTooFewPointsMixedShapesAndTheWrongLevel) {
  Fabric f;
  f.intra = {1e-6, 1e-9, 0};
  auto rows = sweep(f, 1, 2, {"ring"});
  EXPECT_FALSE(fit_inter(rows, f.intra).ok());
  rows.resize(2);
  EXPECT_FALSE(fit_intra(rows).ok());
  auto mixed = sweep(f, 1, 2, {"ring"});
  auto more = sweep(f, 1, 4, {"rd"});
  mixed.insert(mixed.end(), more.begin(), more.end());
  EXPECT_FALSE(fit_intra(mixed).ok());
}

// A launch across nodes sweeps only its own shape, sometimes at one size: the inter level is
// still fitted (node-local part free, said by intra_free) and predicts that shape's sweep back
// within its error; a one-node sweep beside it makes the intra level a fit of its own.
TEST(MachineComm, ASweepAcrossNodesAloneStillGivesANetworkModel) {
  Fabric truth;
  truth.intra = {0.5e-6, 1 / 8e9, 1 / 16e9};
  truth.inter = {25e-6, 1 / 0.6e9, 1 / 16e9};  // the reduction runs on the same cores
  std::vector<tuner::db::Measurement> rows;
  for (const auto& m : sweep(truth, 2, 2, {"ring", "rd", "rabenseifner", "tree", "hier"})) {
    if (m.bytes == 65536) rows.push_back(m);
  }
  ASSERT_EQ(rows.size(), 5u);
  MachineComm mc = machine_comm(rows, {}, 2);
  EXPECT_TRUE(mc.has_inter);
  EXPECT_TRUE(mc.has_intra);
  EXPECT_TRUE(mc.intra_free);
  ASSERT_EQ(mc.fits.size(), 1u);
  EXPECT_EQ(mc.fits[0].level, "inter");
  const double model = allreduce_seconds(AllreduceAlgo::kHier, 65536, 2, 2, mc.source.fabric) * 1e6;
  const double measured = allreduce_seconds(AllreduceAlgo::kHier, 65536, 2, 2, truth) * 1e6;
  EXPECT_NEAR(model, measured, (mc.fits[0].rel_rms + 0.05) * measured);

  auto one_node = sweep(truth, 1, 2, {"ring", "rd", "shm"});
  rows.insert(rows.end(), one_node.begin(), one_node.end());
  mc = machine_comm(rows, {}, 2);
  EXPECT_FALSE(mc.intra_free);
  EXPECT_EQ(mc.fits.size(), 2u);
}

std::string data(const std::string& f) { return std::string(DLTUNE_PREDICT_TEST_DATA) + "/" + f; }

TEST(Topology, AwsP4dFromItsPciIds) {
  auto t = load_node_topology(data("aws_p4d-24xl-topo.xml"));
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->format, "nccl");
  EXPECT_EQ(t->gpus, 8);
  EXPECT_EQ(t->nics, 4);
  EXPECT_DOUBLE_EQ(t->nic_gbit, 400);       // 4 x EFA at 100 Gbit/s: p4d's 400 Gbit/s
  EXPECT_DOUBLE_EQ(t->gpu_link_gbps, 300);  // A100 SXM4 on NVSwitch
  EXPECT_DOUBLE_EQ(t->nic_latency_us, 10);
  const Fabric f = fabric_from_topology(*t, 1.0);
  EXPECT_NEAR(f.inter.gbps(), 400.0 / 8 / 8, 1e-9);  // GB/s per GPU
}

TEST(Topology, NvlinksAndNetSpeedsWhereTheFileGivesThem) {
  auto a100 = load_node_topology(data("simccl_topo_8A100_4CX6.xml"));
  ASSERT_TRUE(a100.ok()) << a100.error().message();
  EXPECT_EQ(a100->gpus, 8);
  EXPECT_DOUBLE_EQ(a100->gpu_link_gbps, 12 * 25);  // 6 NVSwitches x 2 links, NVLink 3
  EXPECT_GT(a100->nic_gbit, 100);  // the RDMA devices, not the 1 Gbit management bond
  // ND H100 v5's file gives neither PCI ids nor NIC speeds: its 8 InfiniBand functions are
  // bounded by their PCIe links (x16 at 32 GT/s, 504 Gbit/s each; the HCAs run 400), and the
  // GPUs, with no NVLink in the file, by theirs (63 GB/s).
  auto h100 = load_node_topology(data("azure_ndv5-topo.xml"));
  ASSERT_TRUE(h100.ok()) << h100.error().message();
  EXPECT_EQ(h100->gpus, 8);
  EXPECT_EQ(h100->nics, 8);
  EXPECT_NEAR(h100->nic_gbit, 8 * 32 * 16 * 128.0 / 130, 1e-6);
  EXPECT_NEAR(h100->gpu_link_gbps, 32 * 16 * 128.0 / 130 / 8, 1e-6);
}

TEST(Topology, HwlocExportsToo) {
  auto t = load_node_topology(std::string(DLTUNE_TOPOLOGY_TEST_DATA) + "/hwloc_nvidiaDGX2.xml");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->format, "hwloc");
  EXPECT_EQ(t->gpus, 16);
}

TEST(Topology, BadFilesAreBadInput) {
  for (const std::string& text :
       {std::string("<system><pci class='0x030200'>"), std::string("not xml at all <"),
        std::string("<html></html>"), std::string("<system></system>")}) {
    const std::string path = ::testing::TempDir() + "/bad_topo.xml";
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
    auto t = load_node_topology(path);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.error().exit_code(), 2) << text;
  }
  auto missing = load_node_topology("/nonexistent/topo.xml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().exit_code(), 2);
}

}  // namespace
}  // namespace dltune::predict
