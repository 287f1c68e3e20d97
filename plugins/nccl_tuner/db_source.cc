#include "plugins/nccl_tuner/db_source.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include <unistd.h>

#include "common/log.h"
#include "topology/isolated_load.h"
#include "topology/topology.h"
#include "tuner/db/key.h"
#include "tuner/db/lookup.h"

namespace dltune::plugins {
namespace {

// The environment the topology helper gets: the user's own variables that decide what is
// discovered and where its saved discovery lives, nothing else.
std::vector<std::string> helper_env() {
  std::vector<std::string> env = {"HWLOC_HIDE_ERRORS=2"};
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view v(*e);
    for (std::string_view keep :
         {"PATH=", "HOME=", "TMPDIR=", "XDG_RUNTIME_DIR=", "DLTUNE_TOPO_CACHE=", "HWLOC_"}) {
      if (v.starts_with(keep) && !v.starts_with("HWLOC_HIDE_ERRORS=")) {
        env.emplace_back(v);
        break;
      }
    }
  }
  return env;
}

// This node's topology, discovered once per process (NCCL may create many communicators, from
// several threads); rediscovered only when DLTUNE_TOPO_XML changes. Failures are not cached.
// hwloc runs in dltune-topo-probe (topology/isolated_load.h), never in the training job: a
// hostile export or a saved discovery someone tampered with cannot crash it.
Result<topology::Topology> node_topology() {
  static std::mutex mu;
  static std::optional<std::string> cached_for;  // the DLTUNE_TOPO_XML value it was read for
  static topology::Topology cached;
  const char* xml = std::getenv("DLTUNE_TOPO_XML");
  const std::string key = xml ? std::string("xml:") + xml : "discover";
  const std::lock_guard<std::mutex> lock(mu);
  if (cached_for != key) {
    topology::IsolatedLoad req;
    req.helper = topology::sibling_bin("dltune-topo-probe");
    req.xml_path = xml ? xml : "";
    req.env = helper_env();
    auto topo = topology::load_isolated(req);
    if (!topo) return std::move(topo).error();
    cached = std::move(*topo);
    cached_for = key;
  }
  return cached;
}

}  // namespace

Result<DbPlan> plan_from_db(size_t n_ranks, size_t n_nodes) {
  DbPlan out;
  if (n_nodes == 0 || n_ranks == 0 || n_ranks % n_nodes != 0) {
    out.description = "the communicator's " + std::to_string(n_ranks) + " rank(s) on " +
                      std::to_string(n_nodes) + " node(s) are not a nodes x ranks-per-node shape";
    return out;
  }
  auto layers = tuner::db::layers_from_env(std::nullopt);
  if (!layers) return std::move(layers).error();
  auto topo = node_topology();
  if (!topo) return std::move(topo).error().wrap("reading this node's topology");
  const tuner::db::JobShape shape{static_cast<int64_t>(n_nodes),
                                  static_cast<int64_t>(n_ranks / n_nodes)};
  const tuner::db::Key key = tuner::db::make_key(*topo, shape, "", /*with_nccl=*/true);
  auto hit = tuner::db::lookup_plan(*layers, key);
  if (!hit) return std::move(hit).error().wrap("looking the plan up in " + layers->user_db);
  for (const std::string& w : hit->warnings) DLTUNE_LOG(kWarn, "db") << w;
  const std::string what = "fingerprint " + key.fingerprint.substr(0, 12) + ", " +
                           std::to_string(shape.nodes) + "x" + std::to_string(shape.ranks_per_node);
  if (hit->kind == tuner::db::HitKind::kMiss) {
    out.description = "the databases (" + layers->user_db +
                      (layers->site_dbs.empty() ? "" : " and site databases") +
                      ") have no plan for " + what;
    return out;
  }
  out.plan_json = hit->plan.plan_json;
  out.description =
      std::string(tuner::db::hit_kind_name(hit->kind)) + " hit for " + what + " in " + hit->db_path;
  return out;
}

}  // namespace dltune::plugins
