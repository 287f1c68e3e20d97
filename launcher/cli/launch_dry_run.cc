#include "launcher/cli/launch_dry_run.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/env.h"
#include "common/run_layout.h"
#include "common/strings.h"
#include "tuner/recipe_tuning.h"

namespace dltune::launcher {

std::string oversubscription_warning(const Job& job, int cores, int nodes_per_machine) {
  const int nodes = std::max(1, job.shape.nodes);
  const int npm = std::clamp(nodes_per_machine, 1, nodes);
  const int per_machine = job.ranks / nodes * npm;
  if (cores <= 0 || per_machine <= cores) return "";
  const std::string where = npm > 1
                                ? " ranks per machine (" + std::to_string(npm) + " nodes each) on "
                                : " ranks per node on ";
  // The most ranks per node whose machines keep a core each; none when a machine has fewer
  // cores than nodes.
  const int fit = cores / npm;
  return "warning: " + std::to_string(per_machine) + where + std::to_string(cores) +
         " cores: the ranks will share cores, so each gets less than a core and the throughput "
         "and scaling efficiency fall below what one rank per core gives; " +
         (fit > 0 ? "use -n " + std::to_string(fit * nodes) + " or fewer"
                  : "use fewer nodes per machine");
}

void print_dry_run(const DryRun& d) {
  const Job& job = *d.job;
  const PlanChoice& choice = *d.choice;
  const std::string run_dir = !d.resumed.empty()
                                  ? d.resumed
                                  : env::get(env::kRunsDir) + "/" + job.recipe.name + "-<UTC time>";
  // As a launch runs them: the plan and the recipe as run reach the ranks as the job's (PMIx
  // job data), the rest is the run directory's.
  std::vector<std::string> cmd =
      launch_prefix(job, run_dir + "/" + run_layout::kPlan, run_dir + "/" + run_layout::kRecipe,
                    !choice.plan.placement.empty());
  const std::vector<std::string> ranks = {d.worker, "train", "--run-dir", run_dir};
  cmd.insert(cmd.end(), ranks.begin(), ranks.end());
  const bool tunes = choice.source != "cache" && !d.no_tune && d.resumed.empty() &&
                     job.recipe.tune.budget_seconds > 0;
  size_t candidates = 0;
  if (tunes) {
    auto c = tuner::generate_candidates(job.recipe, job.shape);
    if (c) candidates = c->size();
  }
  const auto [lo, hi] = sweep_range(job_bucket_sizes(job.recipe));
  const std::string warning = oversubscription_warning(job, d.cores_per_node);
  if (d.json) {
    nlohmann::json j = {{"event", "dry_run"},
                        {"plan_source", choice.source},
                        {"plan_signed_by", choice.signed_by},
                        {"would_tune", tunes},
                        {"budget_s", job.recipe.tune.budget_seconds},
                        {"candidates", candidates},
                        {"sweep_bytes", {lo, hi}},
                        {"plan", recipes::plan_to_json(choice.plan)},
                        {"ranks", job.ranks},
                        {"threads_per_rank", job.shape.threads_per_rank},
                        {"threads_reason", job.threads_reason},
                        {"shape_search", d.shape_search},
                        {"precision", choice.plan.training.precision},
                        {"steps", d.steps},
                        {"checkpoint_every", d.checkpoint_every},
                        {"run_dir", run_dir},
                        {"command", cmd},
                        {"notes", choice.notes}};
    if (!warning.empty()) j["warnings"] = {warning};
    if (!d.resumed.empty()) j["resumed"] = d.resumed;
    if (!d.reshaped.empty()) j["reshaped"] = d.reshaped;
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("dry run: nothing is started and nothing is written\n");
  std::printf("recipe:  %s (%s), %d rank(s) x %d thread(s) on %d node(s)\n",
              strings::printable(job.recipe.name, "").c_str(),
              strings::printable(job.recipe_path, "").c_str(), job.ranks,
              job.shape.threads_per_rank, job.shape.nodes);
  std::printf("threads: %d per rank: %s\n", job.shape.threads_per_rank, job.threads_reason.c_str());
  std::printf("compute: %s%s\n", choice.plan.training.precision.c_str(),
              job.precision_reason.empty() ? "" : (" (" + job.precision_reason + ")").c_str());
  if (!warning.empty()) std::printf("%s\n", warning.c_str());
  for (const std::string& n : choice.notes) {
    std::printf("note:    %s\n", strings::printable(n, "").c_str());
  }
  if (!d.reshaped.empty()) {
    std::printf("plan:    planned again for the new shape: %s:\n",
                strings::printable(d.reshaped, "").c_str());
  } else if (!d.resumed.empty()) {
    std::printf("plan:    the run directory's plan.json, as it is:\n");
  } else if (choice.source == "cache") {
    std::printf("plan:    cached in %s%s; a launch uses it as it is:\n",
                strings::printable(choice.db_path, "").c_str(),
                choice.signed_by == tuner::db::kUnsigned ? " (imported unsigned)" : "");
  } else if (tunes) {
    std::printf(
        "plan:    not cached: a launch would first tune for up to %.0f s (tune.budget): "
        "allreduce measured from %s to %s, then trial trainings of %zu candidates; until then "
        "it has the recipe's own settings:\n",
        job.recipe.tune.budget_seconds, strings::format_bytes(lo).c_str(),
        strings::format_bytes(hi).c_str(), candidates);
  } else {
    const std::string why = !d.no_tune              ? "tune.budget is 0"
                            : d.no_tune_why.empty() ? "--no-tune"
                                                    : "not tuned: " + d.no_tune_why;
    std::printf("plan:    the recipe's own settings (%s):\n", strings::printable(why, "").c_str());
  }
  std::printf("%s", describe_plan(choice.plan, "  ").c_str());
  std::printf("  run: %lld steps, a checkpoint every %lld\n", static_cast<long long>(d.steps),
              static_cast<long long>(d.checkpoint_every));
  std::printf("ranks:   %s\n", quote_argv(cmd).c_str());
  if (!d.resumed.empty()) {
    std::printf(
        "         (a launch continues %s from its last checkpoint%s; --json prints the plan)\n",
        strings::printable(run_dir, "").c_str(),
        d.reshaped.empty() ? "" : ", its plan until then kept as plan.previous.json");
  } else {
    std::printf(
        "         (a launch creates %s and writes the plan and the recipe as run there; the "
        "ranks read them from it; --json prints the plan)\n",
        run_dir.c_str());
  }
}

}  // namespace dltune::launcher
