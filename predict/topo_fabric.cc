#include "predict/topo_fabric.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "common/paths.h"
#include "topology/topology.h"

namespace dltune::predict {
namespace {

// ---- a small XML reader: elements and their attributes, nothing else (NCCL's files hold
// nothing else). Comments, declarations and text are skipped.

struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<Element>> children;
  std::string attr(const std::string& k) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? "" : it->second;
  }
};

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' ||
         c == '.';
}

Result<std::unique_ptr<Element>> parse_xml(const std::string& s) {
  auto root = std::make_unique<Element>();
  root->name = "#document";
  std::vector<Element*> stack = {root.get()};
  size_t i = 0;
  auto bad = [&](const std::string& what) {
    const size_t line =
        1 + static_cast<size_t>(
                std::count(s.begin(), s.begin() + static_cast<long>(std::min(i, s.size())), '\n'));
    return invalid_input("line " + std::to_string(line) + ": " + what);
  };
  while ((i = s.find('<', i)) != std::string::npos) {
    if (s.compare(i, 4, "<!--") == 0) {
      const size_t e = s.find("-->", i + 4);
      if (e == std::string::npos) return bad("unterminated comment");
      i = e + 3;
      continue;
    }
    if (s.compare(i, 2, "<?") == 0 || s.compare(i, 2, "<!") == 0) {
      const size_t e = s.find('>', i);
      if (e == std::string::npos) return bad("unterminated declaration");
      i = e + 1;
      continue;
    }
    if (s.compare(i, 2, "</") == 0) {
      size_t j = i + 2;
      while (j < s.size() && name_char(s[j])) ++j;
      const std::string name = s.substr(i + 2, j - i - 2);
      if (stack.size() < 2 || stack.back()->name != name) return bad("unexpected </" + name + ">");
      stack.pop_back();
      const size_t e = s.find('>', j);
      if (e == std::string::npos) return bad("unterminated </" + name);
      i = e + 1;
      continue;
    }
    size_t j = i + 1;
    while (j < s.size() && name_char(s[j])) ++j;
    if (j == i + 1) return bad("a '<' that opens no element");
    auto el = std::make_unique<Element>();
    el->name = s.substr(i + 1, j - i - 1);
    bool closed = false;
    for (;;) {
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j >= s.size()) return bad("unterminated <" + el->name);
      if (s[j] == '>') {
        ++j;
        break;
      }
      if (s.compare(j, 2, "/>") == 0) {
        j += 2;
        closed = true;
        break;
      }
      size_t k = j;
      while (k < s.size() && name_char(s[k])) ++k;
      if (k == j || k >= s.size() || s[k] != '=')
        return bad("a malformed attribute in <" + el->name);
      const char q = k + 1 < s.size() ? s[k + 1] : '\0';
      if (q != '"' && q != '\'') return bad("an unquoted attribute in <" + el->name);
      const size_t end = s.find(q, k + 2);
      if (end == std::string::npos) return bad("an unterminated attribute in <" + el->name);
      el->attrs[s.substr(j, k - j)] = s.substr(k + 2, end - k - 2);
      j = end + 1;
    }
    Element* raw = el.get();
    stack.back()->children.push_back(std::move(el));
    if (!closed) stack.push_back(raw);
    i = j;
  }
  if (stack.size() != 1) return invalid_input("<" + stack.back()->name + "> is never closed");
  return root;
}

void walk(const Element& e, const std::function<void(const Element&)>& f) {
  f(e);
  for (const auto& c : e.children) walk(*c, f);
}

// ---- what PCI ids and link speeds say

struct GpuSpec {
  const char* id;
  const char* model;
  double link_gbps;  // one direction, per GPU, through NVSwitch or all NVLinks
};
constexpr GpuSpec kGpus[] = {
    {"0x20b0", "A100 SXM4 40GB", 300}, {"0x20b2", "A100 SXM4 80GB", 300},
    {"0x2330", "H100 SXM5 80GB", 450}, {"0x1db1", "V100 SXM2 16GB", 150},
    {"0x1db5", "V100 SXM2 32GB", 150}, {"0x15f9", "P100 SXM2 16GB", 80},
};

struct NicSpec {
  const char* id;
  const char* model;
  double gbit;
  double latency_us;
};
constexpr NicSpec kNics[] = {
    {"0xefa0", "AWS EFA", 100, 10},      {"0xefa1", "AWS EFA", 100, 10},
    {"0xefa2", "AWS EFA", 100, 10},      {"0x1013", "ConnectX-4", 100, 5},
    {"0x1015", "ConnectX-4 Lx", 100, 5}, {"0x1017", "ConnectX-5", 100, 5},
    {"0x1019", "ConnectX-5 Ex", 100, 5}, {"0x101b", "ConnectX-6", 200, 5},
    {"0x101d", "ConnectX-6 Dx", 200, 5}, {"0x1021", "ConnectX-7", 400, 5},
};

// PCIe bandwidth of one direction of a link, GB/s: "16 GT/s" x16 -> 31.5 (128b/130b coding
// from Gen3 on, 8b/10b before).
double pcie_gbps(const std::string& speed, const std::string& width) {
  const double gt = std::atof(speed.c_str());
  const double lanes = width.empty() ? 16 : std::atof(width.c_str());
  if (gt <= 0 || lanes <= 0) return 0;
  const double coding = gt >= 8 ? 128.0 / 130.0 : 0.8;
  return gt * coding * lanes / 8;
}

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

std::string whole(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

Result<NodeTopology> from_nccl(const Element& system) {
  NodeTopology t;
  t.format = "nccl";
  int nvlinks = 0, sm = 0;
  double pcie = 0;
  std::string gpu_model;
  double gpu_spec = 0;
  std::vector<const Element*> nets, nic_pcis;
  walk(system, [&](const Element& e) {
    if (e.name == "pci") {
      const std::string cls = e.attr("class");
      if (starts_with(cls, "0x0302") || starts_with(cls, "0x0300")) {
        ++t.gpus;
        const double bw = pcie_gbps(e.attr("link_speed"), e.attr("link_width"));
        if (bw > 0) pcie = pcie > 0 ? std::min(pcie, bw) : bw;
        for (const GpuSpec& g : kGpus) {
          if (e.attr("device") == g.id) gpu_model = g.model, gpu_spec = g.link_gbps;
        }
      } else if (starts_with(cls, "0x0200") || starts_with(cls, "0x0207")) {
        nic_pcis.push_back(&e);
      }
    } else if (e.name == "gpu") {
      sm = std::max(sm, std::atoi(e.attr("sm").c_str()));
      int links = 0;
      for (const auto& c : e.children) {
        if (c->name == "nvlink") links += std::atoi(c->attr("count").c_str());
      }
      nvlinks = std::max(nvlinks, links);
    } else if (e.name == "net") {
      nets.push_back(&e);
    }
  });
  if (t.gpus == 0) {  // GPUs given only as <gpu> elements
    walk(system, [&](const Element& e) { t.gpus += e.name == "gpu" ? 1 : 0; });
  }
  if (t.gpus == 0) return invalid_input("the NCCL topology describes no GPU");
  if (nvlinks > 0) {
    t.gpu_link_gbps = nvlinks * (sm > 0 && sm < 70 ? 20.0 : 25.0);
    t.gpu_link = std::to_string(nvlinks) + " NVLinks per GPU";
  } else if (gpu_spec > 0) {
    t.gpu_link_gbps = gpu_spec;
    t.gpu_link = "NVLink (" + gpu_model + ", by its PCI id)";
  } else {
    t.gpu_link_gbps = pcie > 0 ? pcie : 16;
    t.gpu_link = "PCIe (no NVLink in the file)";
    t.gpu_latency_us = 2;
  }
  // The network: <net> elements with their speed (the RDMA ones when there are any: a 1 Gbit
  // management bond beside 200 Gbit HCAs is not the training network), else the NIC PCI
  // functions by their ids.
  std::vector<const Element*> rdma;
  for (const Element* n : nets) {
    if (n->attr("gdr") == "1" || starts_with(n->attr("name"), "mlx") ||
        starts_with(n->attr("name"), "efa") || starts_with(n->attr("name"), "rdma")) {
      rdma.push_back(n);
    }
  }
  if (!rdma.empty()) nets = rdma;
  if (!nets.empty()) {
    for (const Element* n : nets) t.nic_gbit += std::atof(n->attr("speed").c_str()) / 1000;
    t.nics = static_cast<int>(nets.size());
    t.nic =
        std::to_string(t.nics) + " network devices of " + whole(t.nic_gbit / t.nics) + " Gbit/s";
  } else {
    for (const Element* p : nic_pcis) {
      double gbit = 0;
      for (const NicSpec& n : kNics) {
        if (p->attr("device") == n.id) {
          gbit = n.gbit;
          t.nic_latency_us = n.latency_us;
          t.nic = n.model;
        }
      }
      if (gbit == 0) gbit = 8 * pcie_gbps(p->attr("link_speed"), p->attr("link_width"));
      t.nic_gbit += gbit;
      ++t.nics;
    }
    if (t.nics > 0) {
      t.nic = std::to_string(t.nics) + " x " + (t.nic.empty() ? "NIC" : t.nic) + " " +
              whole(t.nic_gbit / t.nics) + " Gbit/s";
    }
  }
  return t;
}

Result<NodeTopology> from_hwloc(const std::string& path) {
  auto topo = topology::load_xml(path);
  if (!topo) return topo.error();
  NodeTopology t;
  t.format = "hwloc";
  t.gpus = static_cast<int>(topo->gpus.size());
  if (t.gpus == 0) return invalid_input("the hwloc topology has no GPU");
  int links = 0;
  for (const auto& row : topo->gpu_paths) {
    for (const auto& p : row)
      links = std::max(links, p.type == topology::PathType::kNvLink ? p.links : 0);
  }
  if (links > 0) {
    // The matrix gives links per GPU pair; a GPU's bandwidth is its links to all peers.
    int total = 0;
    for (const auto& p : topo->gpu_paths.front()) {
      total += p.type == topology::PathType::kNvLink ? p.links : 0;
    }
    t.gpu_link_gbps = total * 25.0;
    t.gpu_link = std::to_string(total) + " NVLinks per GPU";
  } else {
    t.gpu_link_gbps = 16;
    t.gpu_link = "PCIe (assumed x16 Gen3: hwloc gives no link rate)";
    t.gpu_latency_us = 2;
  }
  for (const topology::Nic& n : topo->nics) {
    if (!n.hpc) continue;
    ++t.nics;
    t.nic_gbit += n.link_gbps > 0 ? n.link_gbps : 100;
    if (n.kind == topology::NicKind::kEfa) t.nic_latency_us = 10;
  }
  if (t.nics > 0) t.nic = std::to_string(t.nics) + " HPC NICs";
  return t;
}

}  // namespace

Result<NodeTopology> load_node_topology(const std::string& path) {
  auto text = paths::read_file(path);
  if (!text) return invalid_input("--topo: cannot read '" + path + "': " + text.error().message());
  auto doc = parse_xml(*text);
  if (!doc) return std::move(doc).error().wrap("--topo '" + path + "' is not XML");
  const Element* top = nullptr;
  for (const auto& c : (*doc)->children) top = top ? top : c.get();
  if (top != nullptr && top->name == "system") {
    auto t = from_nccl(*top);
    if (!t) return std::move(t).error().wrap("--topo '" + path + "'");
    return t;
  }
  if (top != nullptr && top->name == "topology") {
    auto t = from_hwloc(path);
    if (!t) return invalid_input("--topo '" + path + "': " + t.error().message());
    return t;
  }
  return invalid_input("--topo '" + path +
                       "' is neither an NCCL topology (<system>) nor an hwloc export (<topology>)");
}

Fabric fabric_from_topology(const NodeTopology& t, double network_efficiency) {
  Fabric f;
  f.intra.alpha_s = t.gpu_latency_us * 1e-6;
  f.intra.beta_s_per_b = 1 / (t.gpu_link_gbps * 1e9);
  if (t.nic_gbit > 0) {
    const double per_rank = t.nic_gbit / 8 * network_efficiency / std::max(1, t.gpus);
    f.inter.alpha_s = t.nic_latency_us * 1e-6;
    f.inter.beta_s_per_b = 1 / (per_rank * 1e9);
  }
  return f;
}

}  // namespace dltune::predict
