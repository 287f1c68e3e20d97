// bench/predict's check against fabrics no one here measured: nccl-tests all_reduce_perf of
// 2 x p4de.24xlarge and 2 x p5.48xlarge (predict/tests/data, from aws-samples/awsome-
// distributed-training) beside predict/fabric.h's bus bandwidth, from the nodes' published
// specifications only (bench/predict/README.md cites them):
//   p4de.24xlarge: 8 x A100 80GB on NVSwitch, NVLink 3 at 600 GB/s both ways (300 a direction),
//                  4 x 100 Gbit/s EFA: taken from AWS's own NCCL topology file for p4d
//                  (aws-ofi-nccl topology/p4d-24xl-topo.xml, same GPUs' links and adapters) with
//                  `dltune predict --topo`'s reader;
//   p5.48xlarge:   8 x H100 on NVSwitch, NVLink 4 at 900 GB/s both ways (450 a direction),
//                  3,200 Gbit/s of EFA (32 x 100 Gbit/s): 50 GB/s of network per GPU.
// Prints, per size from 64 MiB, the measured and predicted bus bandwidth and their error, then
// `fabrics: nccl_tests_err_max=F` (the largest |predicted / measured - 1| of both).
//   dltune-bench-predict-fabrics DATA_DIR
#include <cmath>
#include <cstdio>
#include <string>

#include "common/paths.h"

#include "predict/nccl_tests.h"
#include "predict/topo_fabric.h"

using namespace dltune;

namespace {

double check(const std::string& title, const std::string& file, const predict::Fabric& f) {
  auto text = paths::read_file(file);
  if (!text) {
    std::fprintf(stderr, "%s\n", text.error().message().c_str());
    return NAN;
  }
  auto rows = predict::parse_nccl_tests(*text);
  if (!rows) {
    std::fprintf(stderr, "%s: %s\n", file.c_str(), rows.error().message().c_str());
    return NAN;
  }
  std::printf(
      "%s: intra %.0f GB/s a direction per GPU, inter %.2f GB/s per GPU (x%.2f of line "
      "rate), %.0f us a network message\n",
      title.c_str(), f.intra.gbps(), f.inter.gbps(), predict::kNetworkEfficiency,
      f.inter.alpha_s * 1e6);
  std::printf("  %12s %14s %15s %8s\n", "bytes", "measured GB/s", "predicted GB/s", "error");
  double worst = 0;
  for (const auto& c : predict::check_busbw(*rows, 64 << 20, 2, 8, f)) {
    std::printf("  %12.0f %14.2f %15.2f %7.1f%%\n", c.bytes, c.measured_gbps, c.predicted_gbps,
                100 * c.rel_err);
    worst = std::max(worst, std::abs(c.rel_err));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: dltune-bench-predict-fabrics DATA_DIR (predict/tests/data)\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto topo = predict::load_node_topology(dir + "/aws_p4d-24xl-topo.xml");
  if (!topo) {
    std::fprintf(stderr, "%s\n", topo.error().message().c_str());
    return 2;
  }
  const predict::Fabric p4de = predict::fabric_from_topology(*topo, predict::kNetworkEfficiency);
  predict::Fabric p5;
  p5.intra = {1e-6, 1 / 450e9, 0};
  p5.inter = {10e-6, 1 / (3200.0 / 8 / 8 * predict::kNetworkEfficiency * 1e9), 0};
  const double a = check("2 x p4de.24xlarge (16 A100)",
                         dir + "/awsome_nccl-tests_all_reduce_perf_2x_p4de.24xlarge.txt", p4de);
  const double b = check("2 x p5.48xlarge (16 H100)",
                         dir + "/awsome_nccl-tests_all_reduce_perf_2x_p5.48xlarge.txt", p5);
  if (std::isnan(a) || std::isnan(b)) return 1;
  std::printf("fabrics: nccl_tests_err_max=%.3f\n", std::max(a, b));
  return 0;
}
