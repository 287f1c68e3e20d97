// The machine model of real nodes, from their hwloc XML exports (topology/tests/data).
// Expected values were read off the files themselves with hwloc 2.9's tools:
//   lstopo --if xml -i FILE --of console --filter io:important      (tree, PCI, OS devices)
//   hwloc-calc --if xml -i FILE -N core all                          (counts)
// and the path classes by reading that tree with nvidia-smi's definitions; each test names
// what it checked.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/strings.h"
#include "topology/tests/test_util.h"

namespace dltune::topology {
namespace {

using testing::load_fixture;

std::vector<std::string> rows(const std::vector<std::vector<Path>>& m) {
  std::vector<std::string> out;
  for (const auto& r : m) {
    std::vector<std::string> cells;
    for (const auto& p : r) cells.push_back(p.str());
    out.push_back(strings::join(cells, " "));
  }
  return out;
}

std::vector<std::string> gpu_names(const Topology& t) {
  std::vector<std::string> out;
  for (const auto& g : t.gpus) out.push_back(g.name + "@" + g.busid);
  return out;
}

std::vector<std::string> nic_names(const Topology& t, bool hpc) {
  std::vector<std::string> out;
  for (const auto& n : t.nics) {
    if (n.hpc == hpc) out.push_back(n.name + ":" + nic_kind_name(n.kind));
  }
  return out;
}

TEST(Fixtures, LassenPower9WithNonContiguousNumaAndReservedCores) {
  const Topology t = load_fixture("mpibind_coral-lassen.xml");
  // hwloc-calc -N: 2 packages, 2 NUMA nodes, 40 cores, 160 PUs; lstopo: NUMANode P#0 and P#8,
  // package 0 PUs P#8..P#87 (PUs 0-7 are reserved by the site).
  ASSERT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.packages[0].os_index, 0);
  EXPECT_EQ(t.packages[1].os_index, 8);
  EXPECT_EQ(t.packages[0].cpu_model, "POWER9, altivec supported");
  ASSERT_EQ(t.numa_nodes.size(), 2u);
  EXPECT_EQ(t.numa_nodes[0].os_index, 0);
  EXPECT_EQ(t.numa_nodes[1].os_index, 8);
  EXPECT_EQ(cpu_list(t.numa_nodes[0].pus), "8-87");
  EXPECT_EQ(t.cores.size(), 40u);
  EXPECT_EQ(t.pus, 160);
  EXPECT_EQ(t.usable_pus.front(), 8);
  // lstopo: four "3D" PCI devices with cuda0..3 + nvml0..3, GPUModel "Tesla V100-SXM2-16GB";
  // the ASPEED VGA at 0002:02:00.0 is the BMC, not a GPU.
  EXPECT_EQ(gpu_names(t), (std::vector<std::string>{"cuda0@0004:04:00.0", "cuda1@0004:05:00.0",
                                                    "cuda2@0035:03:00.0", "cuda3@0035:04:00.0"}));
  for (const auto& g : t.gpus) {
    EXPECT_EQ(g.model, "Tesla V100-SXM2-16GB");
    EXPECT_EQ(g.vendor, "nvidia");
  }
  EXPECT_EQ(t.gpus[0].numa, 0);
  EXPECT_EQ(t.gpus[2].numa, 8);
  EXPECT_EQ(t.gpus[2].package, 8);
  // lstopo: OpenFabrics mlx5_0..3 on PCI class 0207 (InfiniBand), Broadcom Ethernet enP5p1s0f*.
  EXPECT_EQ(nic_names(t, true),
            (std::vector<std::string>{"mlx5_0:infiniband", "mlx5_1:infiniband", "mlx5_2:infiniband",
                                      "mlx5_3:infiniband"}));
  EXPECT_EQ(nic_names(t, false),
            (std::vector<std::string>{"enP5p1s0f0:ethernet", "enP5p1s0f1:ethernet"}));
  EXPECT_EQ(t.nics[0].netdev, "hsi0");
  // The two GPUs of a socket sit under one PLX switch (PIX); the sockets meet only above the
  // PCI tree (SYS). No NVLink matrix in this export, so no NV#.
  EXPECT_FALSE(t.has_nvlink);
  EXPECT_EQ(rows(t.gpu_paths), (std::vector<std::string>{"X PIX SYS SYS", "PIX X SYS SYS",
                                                         "SYS SYS X PIX", "SYS SYS PIX X"}));
  // The IB adapters hang off another host bridge (domain 0003 vs 0004) of the same socket.
  EXPECT_EQ(t.gpu_nic_paths[0][0].str(), "NODE");
  EXPECT_EQ(t.gpu_nic_paths[0][2].str(), "SYS");
  EXPECT_EQ(t.gpus[0].closest_nics, (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(t.gpus[3].closest_nics, (std::vector<std::string>{"mlx5_2", "mlx5_3"}));
}

TEST(Fixtures, Dgx2SixteenGpusThroughNvSwitches) {
  const Topology t = load_fixture("hwloc_nvidiaDGX2.xml");
  // hwloc-calc -N: 2 packages, 2 NUMA nodes, 4 cores, 4 PUs (the authors trimmed the CPUs).
  EXPECT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.numa_nodes.size(), 2u);
  EXPECT_EQ(t.cores.size(), 4u);
  EXPECT_EQ(t.pus, 4);
  // lstopo: 16 "3D" devices with CoProc nvml0..15; the 12 PCI(NVSwitch) bridges are not GPUs.
  ASSERT_EQ(t.gpus.size(), 16u);
  EXPECT_EQ(t.gpus[0].name, "nvml0");
  EXPECT_EQ(t.gpus[0].busid, "0000:34:00.0");
  EXPECT_EQ(t.gpus[15].name, "nvml15");
  EXPECT_EQ(t.gpus[15].busid, "0000:e7:00.0");
  EXPECT_EQ(t.gpus[0].model, "Tesla V100-SXM3-32GB-H");
  EXPECT_EQ(t.gpus[0].numa, 0);
  EXPECT_EQ(t.gpus[8].numa, 1);
  // NVLinkBandwidth: every GPU has 6 x 25000 MB/s to NVSwitches and none directly, so every
  // pair is NV6 (as nvidia-smi shows on a DGX-2).
  EXPECT_TRUE(t.has_nvlink);
  for (size_t i = 0; i < 16; ++i) {
    for (size_t j = 0; j < 16; ++j) {
      EXPECT_EQ(t.gpu_paths[i][j].str(), i == j ? "X" : "NV6") << i << "," << j;
    }
  }
  EXPECT_TRUE(t.nics.empty());  // the export carries no network device
  EXPECT_TRUE(t.gpus[0].closest_nics.empty());
}

TEST(Fixtures, Dgx2PciClassesWithoutTheNvLinkMatrix) {
  // The same export with the NVLinkBandwidth block removed shows the PCIe classes: lstopo
  // puts GPUs 34/36 under one second-level switch (PIX), 34/39 under the first-level switch
  // only (PXB), 34/57 under different host bridges of package 0 (NODE), 34/b7 on the other
  // package (SYS).
  std::string xml = testing::read_fixture("hwloc_nvidiaDGX2.xml");
  const size_t from = xml.find("<distances2hetero");
  const size_t to = xml.find("</distances2hetero>");
  ASSERT_NE(from, std::string::npos);
  xml.erase(from, to + std::string("</distances2hetero>").size() - from);
  testing::TempFile file(xml);
  auto t = load_xml(file.path());
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_FALSE(t->has_nvlink);
  EXPECT_EQ(t->gpu_paths[0][1].str(), "PIX");
  EXPECT_EQ(t->gpu_paths[0][2].str(), "PXB");
  EXPECT_EQ(t->gpu_paths[0][4].str(), "NODE");
  EXPECT_EQ(t->gpu_paths[0][8].str(), "SYS");
  EXPECT_EQ(t->gpu_paths[8][12].str(), "NODE");
}

TEST(Fixtures, Power8NvLinkPairs) {
  const Topology t = load_fixture("hwloc_power8gpudistances.xml");
  EXPECT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.cores.size(), 8u);
  EXPECT_EQ(t.pus, 16);
  // Each GPU has cuda, opencl and nvml OS devices: still one GPU each.
  EXPECT_EQ(gpu_names(t), (std::vector<std::string>{"cuda0@0002:01:00.0", "cuda1@0003:01:00.0",
                                                    "cuda2@000a:01:00.0", "cuda3@000b:01:00.0"}));
  EXPECT_EQ(t.gpus[0].model, "Tesla P100-SXM2-16GB");
  // NVLinkBandwidth: GPU0-GPU1 and GPU2-GPU3 40000 MB/s = 2 NVLink-1 links of 20 GB/s; the
  // other pairs 0 and on different packages.
  EXPECT_TRUE(t.has_nvlink);
  EXPECT_EQ(rows(t.gpu_paths), (std::vector<std::string>{"X NV2 SYS SYS", "NV2 X SYS SYS",
                                                         "SYS SYS X NV2", "SYS SYS NV2 X"}));
}

TEST(Fixtures, PascalGpusAndHcaBehindOnePcieSwitch) {
  const Topology t = load_fixture("mpibind_cts1-pascal.xml");
  EXPECT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.cores.size(), 36u);
  EXPECT_EQ(t.pus, 72);
  EXPECT_EQ(t.packages[0].cpu_model, "Intel(R) Xeon(R) CPU E5-2695 v4 @ 2.10GHz");
  EXPECT_EQ(gpu_names(t), (std::vector<std::string>{"cuda0@0000:04:00.0", "cuda1@0000:07:00.0"}));
  EXPECT_EQ(t.gpus[1].model, "Tesla P100-PCIE-16GB");
  // lstopo: 04:00.0, 07:00.0 and the InfiniBand 08:00.0 are each one bridge below a common
  // PLX bridge: all PIX. The I350 Ethernet ports are management.
  EXPECT_EQ(rows(t.gpu_paths), (std::vector<std::string>{"X PIX", "PIX X"}));
  EXPECT_EQ(nic_names(t, true), (std::vector<std::string>{"mlx5_0:infiniband"}));
  EXPECT_EQ(nic_names(t, false),
            (std::vector<std::string>{"enp12s0f0:ethernet", "enp12s0f1:ethernet"}));
  EXPECT_EQ(t.gpu_nic_paths[0][0].str(), "PIX");
  EXPECT_EQ(t.gpus[0].closest_nics, std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(t.gpus[1].closest_nics, std::vector<std::string>{"mlx5_0"});
}

TEST(Fixtures, QuartzCpuOnlyWithOmniPath) {
  const Topology t = load_fixture("mpibind_cts1-quartz-smt1.xml");
  // hwloc-calc -N: 2 packages, 2 NUMA, 36 cores, 36 PUs (SMT disabled).
  EXPECT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.numa_nodes.size(), 2u);
  EXPECT_EQ(t.cores.size(), 36u);
  EXPECT_EQ(t.pus, 36);
  EXPECT_TRUE(t.gpus.empty());  // the Matrox VGA at 07:00.0 is not a GPU
  // lstopo: OpenFabrics hfi1_0 on the "Fabric" device 83:00.0, package 1.
  EXPECT_EQ(nic_names(t, true), std::vector<std::string>{"hfi1_0:omnipath"});
  EXPECT_EQ(t.nics[0].numa, 1);
  EXPECT_EQ(nic_names(t, false).size(), 4u);  // eno1, aci0, ens786f0, ens786f1
}

TEST(Fixtures, TiogaMi250xWithSlingshotSeenOnlyAsNetworkDevices) {
  const Topology t = load_fixture("mpibind_eas-tioga.xml");
  // hwloc-calc -N: 1 package, 4 NUMA nodes, 64 cores, 128 PUs.
  EXPECT_EQ(t.packages.size(), 1u);
  EXPECT_EQ(t.numa_nodes.size(), 4u);
  EXPECT_EQ(t.cores.size(), 64u);
  EXPECT_EQ(t.pus, 128);
  // lstopo: 8 "Display" devices with GPU(RSMI) rsmi0..7, in bus order c1 c6 c9 ce d1 d6 d9 de.
  ASSERT_EQ(t.gpus.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(t.gpus[i].name, "rsmi" + std::to_string(i));
    EXPECT_EQ(t.gpus[i].vendor, "amd");
    EXPECT_EQ(t.gpus[i].vendor_index, i);
  }
  EXPECT_EQ(t.gpus[0].model, "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2");
  EXPECT_EQ(t.gpus[0].numa, 3);  // c1:00.0 is in Group0 L#3 / NUMANode P#3
  EXPECT_EQ(t.gpus[4].numa, 0);  // d1:00.0 is in Group0 L#0 / NUMANode P#0
  // Vendor 0x17db network devices hsi0..3 are Slingshot; ens2 (Intel I210) is management.
  EXPECT_EQ(nic_names(t, true), (std::vector<std::string>{"hsi0:slingshot", "hsi1:slingshot",
                                                          "hsi2:slingshot", "hsi3:slingshot"}));
  EXPECT_EQ(nic_names(t, false), std::vector<std::string>{"ens2:ethernet"});
  // rsmi1 (c6) and hsi0 (c5) share a host bridge (PHB); rsmi0 (c1) reaches hsi0 through
  // another host bridge of the same NUMA node (NODE); rsmi0/rsmi2 are in different NUMA nodes.
  EXPECT_EQ(t.gpu_nic_paths[1][0].str(), "PHB");
  EXPECT_EQ(t.gpu_nic_paths[0][0].str(), "NODE");
  EXPECT_EQ(t.gpu_paths[0][1].str(), "NODE");
  EXPECT_EQ(t.gpu_paths[0][2].str(), "SYS");
  EXPECT_FALSE(t.has_nvlink);  // XGMI matrices are not NVLink
  const std::vector<std::string> want = {"hsi0", "hsi0", "hsi1", "hsi1",
                                         "hsi2", "hsi2", "hsi3", "hsi3"};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t.gpus[i].closest_nics, std::vector{want[i]}) << i;
}

TEST(Fixtures, G4dnMetalEightT4WithEfa) {
  const Topology t = load_fixture("mpibind_g4dnmetal.xml");
  EXPECT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.cores.size(), 48u);
  EXPECT_EQ(t.pus, 96);
  ASSERT_EQ(t.gpus.size(), 8u);
  EXPECT_EQ(t.gpus[0].busid, "0000:18:00.0");
  EXPECT_EQ(t.gpus[7].busid, "0000:f5:00.0");
  EXPECT_EQ(t.gpus[7].name, "cuda7");
  EXPECT_EQ(t.gpus[0].model, "Tesla T4");
  // lstopo: OpenFabrics rdmap197s0 on the Amazon EFA (1d0f:efa0), package 1; ENA eth0 is not
  // for HPC traffic.
  EXPECT_EQ(nic_names(t, true), std::vector<std::string>{"rdmap197s0:efa"});
  EXPECT_EQ(nic_names(t, false), std::vector<std::string>{"eth0:ethernet"});
  // Each T4 has its own root port: pairs under one host bridge are PHB.
  EXPECT_EQ(t.gpu_paths[0][1].str(), "PHB");
  EXPECT_EQ(t.gpu_paths[0][2].str(), "NODE");
  EXPECT_EQ(t.gpu_paths[0][4].str(), "SYS");
  EXPECT_EQ(t.gpu_nic_paths[4][0].str(), "NODE");
  EXPECT_EQ(t.gpu_nic_paths[0][0].str(), "SYS");
  EXPECT_EQ(t.gpus[0].closest_nics, std::vector<std::string>{"rdmap197s0"});
}

TEST(Fixtures, EverySharedFixtureLoadsAndHasAProjectCopy) {
  // ../shared/fixtures/topologies sits beside the clone in CI; each of its XML files must load
  // and have a copy here (tests use the copies).
  const char* src = std::getenv("DLTUNE_SOURCE_DIR");
  const std::string shared =
      std::string(src != nullptr ? src : ".") + "/../shared/fixtures/topologies";
  if (!paths::exists(shared)) GTEST_SKIP() << "no " << shared << " beside the source tree";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(shared)) {
    if (entry.path().extension() != ".xml") continue;
    const std::string name = entry.path().filename().string();
    ++seen;
    ASSERT_TRUE(paths::exists(testing::data_path(name))) << name << " has no copy in tests/data";
    auto t = load_xml(shared + "/" + name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.error().message();
    EXPECT_EQ(fingerprint(*t), fingerprint(load_fixture(name))) << name;
  }
  EXPECT_GE(seen, 7);
}

}  // namespace
}  // namespace dltune::topology
