#include "predict/nccl_tests.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common/strings.h"

namespace dltune::predict {

Result<std::vector<NcclTestsRow>> parse_nccl_tests(const std::string& text) {
  std::vector<NcclTestsRow> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    for (std::string w; ls >> w;) f.push_back(w);
    if (!f.empty() && f[0].back() == ':') f.erase(f.begin());  // "0:" rank prefix
    // size count type redop root time algbw busbw #wrong ...
    if (f.size() < 9 || f[0].empty() || f[0][0] == '#') continue;
    auto bytes = strings::parse_int(f[0]);
    if (!bytes || *bytes <= 0) continue;
    char* end = nullptr;
    const double t = std::strtod(f[5].c_str(), &end);
    const double bus = std::strtod(f[7].c_str(), nullptr);
    if (end == f[5].c_str() || !(t > 0)) continue;
    rows.push_back({static_cast<double>(*bytes), t, bus});
  }
  if (rows.empty()) return invalid_input("no all_reduce_perf data line found");
  return rows;
}

std::vector<BusbwCheck> check_busbw(const std::vector<NcclTestsRow>& rows, double min_bytes,
                                    int nodes, int per_node, const Fabric& fabric) {
  std::vector<BusbwCheck> out;
  for (const NcclTestsRow& r : rows) {
    if (r.bytes < min_bytes) continue;
    const AlgoTime a = best_allreduce(nccl_algorithms(), r.bytes, nodes, per_node, fabric);
    BusbwCheck c;
    c.bytes = r.bytes;
    c.measured_gbps = r.busbw_gbps;
    c.predicted_gbps = bus_gbps(r.bytes, a.seconds, nodes * per_node);
    c.rel_err = r.busbw_gbps > 0 ? c.predicted_gbps / r.busbw_gbps - 1 : 0;
    out.push_back(c);
  }
  return out;
}

}  // namespace dltune::predict
