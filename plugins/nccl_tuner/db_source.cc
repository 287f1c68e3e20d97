#include "plugins/nccl_tuner/db_source.h"

#include <cstdlib>
#include <mutex>
#include <optional>

#include "topology/topology.h"
#include "tuner/db/lookup.h"
#include "tuner/key.h"

namespace dltune::plugins {
namespace {

// This node's topology, discovered once per process (NCCL may create many communicators, from
// several threads); rediscovered only when DLTUNE_TOPO_XML changes. Failures are not cached.
Result<topology::Topology> node_topology() {
  static std::mutex mu;
  static std::optional<std::string> cached_for;  // the DLTUNE_TOPO_XML value it was read for
  static topology::Topology cached;
  const char* xml = std::getenv("DLTUNE_TOPO_XML");
  const std::string key = xml ? std::string("xml:") + xml : "discover";
  const std::lock_guard<std::mutex> lock(mu);
  if (cached_for != key) {
    auto topo = topology::discover_default();
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
  const tuner::db::Key key = tuner::make_key(*topo, shape, "", /*with_nccl=*/true);
  auto hit = tuner::db::lookup_plan(*layers, key);
  if (!hit) return std::move(hit).error().wrap("looking the plan up in " + layers->user_db);
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
