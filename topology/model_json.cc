#include "topology/model_json.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "common/json_input.h"

namespace dltune::topology {
namespace {

using nlohmann::json;

// A field reader that keeps the first error, naming the field.
class In {
 public:
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  const json* at(const json& j, const char* key) {
    if (!j.is_object() || !j.contains(key)) return fail(key, "missing"), nullptr;
    return &j.at(key);
  }
  void get(const json& j, const char* key, int* out) {
    const json* v = at(j, key);
    if (v == nullptr) return;
    if (!v->is_number_integer() || v->get<int64_t>() < std::numeric_limits<int>::min() ||
        v->get<int64_t>() > std::numeric_limits<int>::max()) {
      return fail(key, "not an int");
    }
    *out = v->get<int>();
  }
  void get(const json& j, const char* key, uint64_t* out) {
    const json* v = at(j, key);
    if (v == nullptr) return;
    if (!v->is_number_unsigned()) return fail(key, "not an unsigned integer");
    *out = v->get<uint64_t>();
  }
  void get(const json& j, const char* key, double* out) {
    const json* v = at(j, key);
    if (v == nullptr) return;
    if (!v->is_number()) return fail(key, "not a number");
    *out = v->get<double>();
  }
  void get(const json& j, const char* key, bool* out) {
    const json* v = at(j, key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return fail(key, "not a boolean");
    *out = v->get<bool>();
  }
  void get(const json& j, const char* key, std::string* out) {
    const json* v = at(j, key);
    if (v == nullptr) return;
    if (!v->is_string()) return fail(key, "not a string");
    *out = v->get<std::string>();
  }
  void get(const json& j, const char* key, std::vector<int>* out) {
    const json* v = at(j, key);
    if (v == nullptr) return;
    if (!v->is_array()) return fail(key, "not an array");
    for (const json& x : *v) {
      if (!x.is_number_integer()) return fail(key, "not an array of integers");
      out->push_back(x.get<int>());
    }
  }
  void get(const json& j, const char* key, std::vector<std::string>* out) {
    const json* v = at(j, key);
    if (v == nullptr) return;
    if (!v->is_array()) return fail(key, "not an array");
    for (const json& x : *v) {
      if (!x.is_string()) return fail(key, "not an array of strings");
      out->push_back(x.get<std::string>());
    }
  }
  // Calls fn(element, &item) for every element of the array at `key`.
  template <typename T, typename Fn>
  void list(const json& j, const char* key, std::vector<T>* out, Fn fn) {
    const json* v = at(j, key);
    if (v == nullptr) return;
    if (!v->is_array()) return fail(key, "not an array");
    for (const json& x : *v) {
      T item;
      fn(x, &item);
      out->push_back(std::move(item));
    }
  }
  void fail(const char* key, const char* what) {
    if (error_.empty()) error_ = std::string(key) + ": " + what;
  }

 private:
  std::string error_;
};

json paths_json(const std::vector<std::vector<Path>>& m) {
  json rows = json::array();
  for (const auto& row : m) {
    json r = json::array();
    for (const Path& p : row) r.push_back({static_cast<int>(p.type), p.links});
    rows.push_back(std::move(r));
  }
  return rows;
}

void read_paths(In& in, const json& j, const char* key, std::vector<std::vector<Path>>* out) {
  const json* v = in.at(j, key);
  if (v == nullptr) return;
  if (!v->is_array()) return in.fail(key, "not an array");
  for (const json& row : *v) {
    if (!row.is_array()) return in.fail(key, "not an array of rows");
    std::vector<Path> r;
    for (const json& p : row) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() ||
          !p[1].is_number_integer() || p[0].get<int64_t>() < 0 ||
          p[0].get<int64_t>() > static_cast<int>(PathType::kSys)) {
        return in.fail(key, "not a path [type, links]");
      }
      r.push_back({static_cast<PathType>(p[0].get<int>()), p[1].get<int>()});
    }
    out->push_back(std::move(r));
  }
}

}  // namespace

std::string model_to_json(const Topology& t) {
  json j = {{"source", t.source},
            {"pus", t.pus},
            {"usable_pus", t.usable_pus},
            {"has_nvlink", t.has_nvlink}};
  j["packages"] = json::array();
  for (const Package& p : t.packages) {
    j["packages"].push_back(
        {{"os_index", p.os_index}, {"cpu_model", p.cpu_model}, {"cores", p.cores}, {"pus", p.pus}});
  }
  j["numa_nodes"] = json::array();
  for (const NumaNode& n : t.numa_nodes) {
    j["numa_nodes"].push_back({{"os_index", n.os_index},
                               {"package", n.package},
                               {"memory_bytes", n.memory_bytes},
                               {"pus", n.pus}});
  }
  j["cores"] = json::array();
  for (const Core& c : t.cores) {
    j["cores"].push_back({{"numa", c.numa}, {"package", c.package}, {"pus", c.pus}});
  }
  j["gpus"] = json::array();
  for (const Gpu& g : t.gpus) {
    j["gpus"].push_back({{"index", g.index},
                         {"vendor_index", g.vendor_index},
                         {"name", g.name},
                         {"busid", g.busid},
                         {"vendor", g.vendor},
                         {"model", g.model},
                         {"numa", g.numa},
                         {"package", g.package},
                         {"closest_nics", g.closest_nics},
                         {"local_pus", g.local_pus}});
  }
  j["nics"] = json::array();
  for (const Nic& n : t.nics) {
    j["nics"].push_back({{"name", n.name},
                         {"netdev", n.netdev},
                         {"busid", n.busid},
                         {"kind", static_cast<int>(n.kind)},
                         {"hpc", n.hpc},
                         {"numa", n.numa},
                         {"package", n.package},
                         {"model", n.model},
                         {"pci_id", n.pci_id},
                         {"link_gbps", n.link_gbps}});
  }
  j["gpu_paths"] = paths_json(t.gpu_paths);
  j["gpu_nic_paths"] = paths_json(t.gpu_nic_paths);
  j["nic_paths"] = paths_json(t.nic_paths);
  // Strings came through hwloc from the export; replace what JSON cannot carry, never throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Topology> model_from_json(std::string_view text) {
  auto parsed = parse_json_bounded(text, {.max_bytes = size_t{256} << 20, .max_depth = 8});
  if (!parsed) return std::move(parsed).error().wrap("topology model");
  const json& j = *parsed;
  In in;
  Topology t;
  in.get(j, "source", &t.source);
  in.get(j, "pus", &t.pus);
  in.get(j, "usable_pus", &t.usable_pus);
  in.get(j, "has_nvlink", &t.has_nvlink);
  in.list(j, "packages", &t.packages, [&](const json& x, Package* p) {
    in.get(x, "os_index", &p->os_index);
    in.get(x, "cpu_model", &p->cpu_model);
    in.get(x, "cores", &p->cores);
    in.get(x, "pus", &p->pus);
  });
  in.list(j, "numa_nodes", &t.numa_nodes, [&](const json& x, NumaNode* n) {
    in.get(x, "os_index", &n->os_index);
    in.get(x, "package", &n->package);
    in.get(x, "memory_bytes", &n->memory_bytes);
    in.get(x, "pus", &n->pus);
  });
  in.list(j, "cores", &t.cores, [&](const json& x, Core* c) {
    in.get(x, "numa", &c->numa);
    in.get(x, "package", &c->package);
    in.get(x, "pus", &c->pus);
  });
  in.list(j, "gpus", &t.gpus, [&](const json& x, Gpu* g) {
    in.get(x, "index", &g->index);
    in.get(x, "vendor_index", &g->vendor_index);
    in.get(x, "name", &g->name);
    in.get(x, "busid", &g->busid);
    in.get(x, "vendor", &g->vendor);
    in.get(x, "model", &g->model);
    in.get(x, "numa", &g->numa);
    in.get(x, "package", &g->package);
    in.get(x, "closest_nics", &g->closest_nics);
    in.get(x, "local_pus", &g->local_pus);
  });
  in.list(j, "nics", &t.nics, [&](const json& x, Nic* n) {
    int kind = 0;
    in.get(x, "name", &n->name);
    in.get(x, "netdev", &n->netdev);
    in.get(x, "busid", &n->busid);
    in.get(x, "kind", &kind);
    if (kind < 0 || kind > static_cast<int>(NicKind::kEthernet)) in.fail("kind", "out of range");
    n->kind = static_cast<NicKind>(kind);
    in.get(x, "hpc", &n->hpc);
    in.get(x, "numa", &n->numa);
    in.get(x, "package", &n->package);
    in.get(x, "model", &n->model);
    in.get(x, "pci_id", &n->pci_id);
    in.get(x, "link_gbps", &n->link_gbps);
  });
  read_paths(in, j, "gpu_paths", &t.gpu_paths);
  read_paths(in, j, "gpu_nic_paths", &t.gpu_nic_paths);
  read_paths(in, j, "nic_paths", &t.nic_paths);
  if (!in.ok()) return invalid_input("topology model: " + in.error());
  return t;
}

}  // namespace dltune::topology
