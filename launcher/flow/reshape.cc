#include "launcher/flow/reshape.h"

#include <algorithm>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace dltune::launcher {
namespace {

std::string count(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Whether a global batch of g samples splits evenly over r replicas, each getting one at least.
bool splits(int64_t g, int64_t r) { return r >= 1 && g >= r && g % r == 0; }

std::string shape_words(int nodes, int ranks) {
  return count(ranks, "rank", "ranks") + " on " + count(nodes, "node", "nodes");
}

}  // namespace

bool needs_reshape(const recipes::Plan& old, const recipes::JobShape& shape) {
  return old.job.nodes != shape.nodes || old.job.ranks_per_node != shape.ranks_per_node;
}

Status check_reshape(const recipes::Plan& old, int ranks) {
  const int64_t g = old.training.global_batch;
  if (splits(g, ranks)) return ok_status();
  // The rank counts that work: the divisors of the global batch, the few nearest the request.
  std::vector<int64_t> fit;
  for (int64_t d = 1; d <= g && d <= 4096; ++d)
    if (splits(g, d)) fit.push_back(d);
  std::sort(fit.begin(), fit.end(), [ranks](int64_t a, int64_t b) {
    return std::llabs(a - ranks) < std::llabs(b - ranks) ||
           (std::llabs(a - ranks) == std::llabs(b - ranks) && a < b);
  });
  if (fit.size() > 6) fit.resize(6);
  std::sort(fit.begin(), fit.end());
  std::vector<std::string> words;
  for (int64_t d : fit) words.push_back(std::to_string(d));
  return invalid_input("the run trained at global batch " + std::to_string(g) +
                       ", which does not split evenly over " + count(ranks, "rank", "ranks") +
                       "; it continues with that batch so that the data order and the "
                       "learning-rate schedule go on unchanged: resume on " +
                       strings::join(words, ", ") + " ranks");
}

int fewer_ranks(const recipes::Plan& old, int ranks, int min_ranks) {
  const int64_t g = old.training.global_batch;
  for (int r = ranks - 1; r >= std::max(1, min_ranks); --r)
    if (splits(g, r)) return r;
  return 0;
}

void carry_training(const recipes::Plan& old, recipes::Plan* fresh, Reshape* r) {
  const int ranks = fresh->job.nodes * fresh->job.ranks_per_node;
  recipes::TrainingPlan& t = fresh->training;
  const recipes::TrainingPlan& o = old.training;
  r->from_nodes = old.job.nodes;
  r->from_ranks = old.job.nodes * old.job.ranks_per_node;
  r->to_nodes = fresh->job.nodes;
  r->to_ranks = ranks;
  r->global_batch = o.global_batch;
  r->plan_source = std::string(recipes::plan_source_name(fresh->provenance.source));
  const int64_t per_rank = o.global_batch / std::max(1, ranks);
  if (per_rank != o.per_rank_batch) {
    r->changes.push_back("samples per replica " + std::to_string(o.per_rank_batch) + " -> " +
                         std::to_string(per_rank));
  }
  if (old.parallel.pipelined()) {
    r->changes.push_back("the layout (" + std::to_string(old.parallel.stages) + " stages x " +
                         std::to_string(old.parallel.replicas) + " replicas) chosen again");
  }
  if (old.job.threads_per_rank != fresh->job.threads_per_rank) {
    r->changes.push_back("threads per rank " + std::to_string(old.job.threads_per_rank) + " -> " +
                         std::to_string(fresh->job.threads_per_rank));
  }
  if (old.collectives != fresh->collectives) r->changes.push_back("the collectives' rules");
  if (o.bucket_bytes != t.bucket_bytes || o.overlap != t.overlap)
    r->changes.push_back("the gradient buckets");
  // Kept: what the data order and the loss curve depend on.
  t.scaling = recipes::Scaling::kStrong;
  t.global_batch = o.global_batch;
  t.per_rank_batch = per_rank;
  t.lr_scale = o.lr_scale;
  t.warmup_steps = o.warmup_steps;
  t.precision = o.precision;
  // Chosen again by the layout search (launch_layout.h apply_layout) at the kept batch.
  fresh->parallel = recipes::ParallelLayout{};
  fresh->parallel.replicas = ranks;
  fresh->provenance.reason = "continuing a run of " + shape_words(r->from_nodes, r->from_ranks) +
                             " at its global batch " + std::to_string(o.global_batch) +
                             (fresh->provenance.reason.empty()
                                  ? std::string()
                                  : "; the new shape's settings: " + fresh->provenance.reason);
}

nlohmann::json reshape_json(const Reshape& r) {
  return {{"from", {{"nodes", r.from_nodes}, {"ranks", r.from_ranks}}},
          {"to", {{"nodes", r.to_nodes}, {"ranks", r.to_ranks}}},
          {"global_batch", r.global_batch},
          {"plan_source", r.plan_source},
          {"changes", r.changes}};
}

std::string reshape_text(const nlohmann::json& r) {
  // Read back from a summary.json anyone may have edited: a field of another type counts as
  // missing, never an exception.
  auto whole = [](const nlohmann::json& j, const char* key) -> int64_t {
    return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>()
                                                                          : 0;
  };
  auto side = [&](const char* s) {
    return r.is_object() && r.contains(s) ? r[s] : nlohmann::json();
  };
  const nlohmann::json from = side("from"), to = side("to"), changes = side("changes");
  const nlohmann::json src = side("plan_source");
  std::string text =
      "from " +
      shape_words(static_cast<int>(whole(from, "nodes")), static_cast<int>(whole(from, "ranks"))) +
      " to " +
      shape_words(static_cast<int>(whole(to, "nodes")), static_cast<int>(whole(to, "ranks"))) +
      "; global batch " + std::to_string(whole(r, "global_batch")) +
      " kept; the new shape's settings: " +
      (src == "cache"   ? "the database's plan for it"
       : src == "tuned" ? "tuned for it (tune.restart_budget) and stored"
                        : "the recipe's own (none cached for it)");
  std::vector<std::string> words;
  for (size_t i = 0; changes.is_array() && i < changes.size(); ++i)
    if (changes[i].is_string()) words.push_back(changes[i].get<std::string>());
  if (!words.empty()) text += "; changed: " + strings::join(words, ", ");
  return text;
}

}  // namespace dltune::launcher
