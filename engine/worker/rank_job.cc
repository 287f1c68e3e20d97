#include "engine/worker/rank_job.h"

#include <filesystem>

#include "common/paths.h"
#include "common/run_layout.h"
#include "engine/train/recipe_config.h"
#include "recipes/plan_fit.h"
#include "recipes/recipe_overrides.h"

namespace dltune::engine {
namespace {

std::string cwd() {
  std::error_code ec;
  const auto p = std::filesystem::current_path(ec);
  return ec ? std::string(".") : p.string();
}

Result<recipes::Recipe> load_recipe(const RankJobOptions& o, const comm::Bootstrap* boot) {
  if (!o.recipe.empty()) {
    std::vector<recipes::Override> overrides;
    for (const std::string& text : o.sets) {
      auto ov = recipes::parse_override(text);
      if (!ov) return ov.error();
      overrides.push_back(std::move(*ov));
    }
    return recipes::load_recipe_with_overrides(o.recipe, overrides);
  }
  if (!o.sets.empty()) return invalid_input("--set changes the file --recipe names; give --recipe");
  std::string text;
  if (boot != nullptr) {
    auto blob = boot->recipe_blob();
    if (!blob) return blob.error().wrap("reading the job's recipe");
    text = std::move(*blob);
  }
  if (text.empty()) {
    return invalid_input(
        "no recipe: give --recipe FILE (or a bundled recipe's name), or start the ranks with "
        "`dltune launch` (or `dltune run --recipe FILE`)");
  }
  // The recipe as run has absolute data paths; a relative one resolves from here.
  auto recipe = recipes::load_recipe_text(text, "the job's recipe", cwd());
  if (!recipe) return recipe.error().wrap("the job's recipe");
  return recipe;
}

// The plan text and where it came from ("" = none given).
Result<std::pair<std::string, std::string>> plan_text(const RankJobOptions& o,
                                                      const comm::Bootstrap* boot) {
  if (!o.plan.empty()) {
    auto t = paths::read_file(o.plan);
    if (!t) return t.error().wrap("--plan");
    return std::make_pair(std::move(*t), "plan file " + o.plan);
  }
  if (boot != nullptr) {
    auto t = boot->plan_blob();
    if (!t) return t.error().wrap("reading the job's plan");
    if (!t->empty()) return std::make_pair(std::move(*t), std::string("the job's plan"));
  }
  return std::make_pair(std::string(), std::string());
}

Status check_shape(const recipes::Plan& plan, int ranks, int nodes) {
  const recipes::JobShape& j = plan.job;
  if (int64_t{j.nodes} * j.ranks_per_node == ranks && j.nodes == nodes) return ok_status();
  return invalid_input("the plan is for a " + std::to_string(j.nodes) + "x" +
                       std::to_string(j.ranks_per_node) +
                       " job (nodes x ranks per node), this "
                       "one has " +
                       std::to_string(ranks) + " ranks on " + std::to_string(nodes) + " node(s)");
}

void set_paths(const RankJobOptions& o, RankJob* job) {
  TrainConfig& c = job->config;
  if (!o.run_dir.empty()) {
    c.metrics_path = run_layout::in(o.run_dir, run_layout::kMetrics);
    c.checkpoint_path = run_layout::in(o.run_dir, run_layout::kCheckpoint);
    c.trace_path = run_layout::in(o.run_dir, run_layout::kTrace);
    job->summary_path = run_layout::in(o.run_dir, run_layout::kWorkerSummary);
  }
  if (!o.metrics.empty()) c.metrics_path = o.metrics;
  if (!o.checkpoint.empty()) c.checkpoint_path = o.checkpoint;
  if (!o.summary.empty()) job->summary_path = o.summary;
}

}  // namespace

Result<RankJob> load_rank_job(const RankJobOptions& o, const comm::Bootstrap* boot, int ranks,
                              int nodes) {
  RankJob job;
  auto recipe = load_recipe(o, boot);
  if (!recipe) return recipe.error();
  job.recipe = std::move(*recipe);
  auto text = plan_text(o, boot);
  if (!text) return text.error();
  if (text->first.empty()) {
    const recipes::JobShape shape{nodes, ranks / std::max(1, nodes)};
    job.plan = recipes::recipe_default_plan(job.recipe, shape);
    job.plan_source = "the recipe's own settings";
  } else {
    auto plan = recipes::parse_plan(text->first);
    if (!plan) return plan.error().wrap(text->second);
    job.plan = std::move(*plan);
    job.plan_source = text->second;
    DLTUNE_TRY_CTX(check_shape(job.plan, ranks, nodes), job.plan_source);
  }
  auto cfg = train_config_from(job.recipe, job.plan, ranks);
  if (!cfg) return cfg.error().wrap(job.plan_source);
  job.config = std::move(*cfg);
  set_paths(o, &job);
  return job;
}

}  // namespace dltune::engine
