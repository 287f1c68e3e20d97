#include "launcher/launch_dry_run.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/env.h"
#include "common/strings.h"
#include "tuner/recipe_tuning.h"

namespace dltune::launcher {
namespace {

std::string range_text(uint64_t lo, uint64_t hi) {
  if (lo == 0 && hi == recipes::kPlanMaxBytes) return "every size";
  if (lo == 0) return "below " + strings::format_bytes(hi);
  if (hi == recipes::kPlanMaxBytes) return "from " + strings::format_bytes(lo);
  return strings::format_bytes(lo) + " to " + strings::format_bytes(hi);
}

}  // namespace

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

std::string allreduce_in_words(const recipes::Plan& plan) {
  auto it = plan.collectives.find(recipes::Collective::kAllreduce);
  if (it == plan.collectives.end()) return "";
  std::vector<std::string> parts;
  for (const recipes::SizeRange& r : it->second) {
    std::string algo(recipes::algorithm_name(r.algo));
    if (r.segment_bytes > 0) algo += " (segments " + strings::format_bytes(r.segment_bytes) + ")";
    parts.push_back(algo + " " + range_text(r.min_bytes, r.max_bytes));
  }
  return strings::join(parts, ", ");
}

std::string describe_plan(const recipes::Plan& plan, const std::string& indent) {
  const recipes::TrainingPlan& t = plan.training;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "training: per-rank batch %lld, global %lld, %s scaling, lr x%.2f (warm-up %lld "
                "steps), bucket %s, overlap %s",
                static_cast<long long>(t.per_rank_batch), static_cast<long long>(t.global_batch),
                std::string(recipes::scaling_name(t.scaling)).c_str(), t.lr_scale,
                static_cast<long long>(t.warmup_steps),
                strings::format_bytes(t.bucket_bytes).c_str(), t.overlap ? "on" : "off");
  std::string out = indent + buf + "\n";
  if (plan.parallel.pipelined()) {
    const recipes::ParallelLayout& l = plan.parallel;
    out += indent + "layout: " + std::to_string(l.replicas) + " replica(s) x " +
           std::to_string(l.stages) + " stages, " + std::to_string(l.microbatches) +
           " micro-batches, " + std::string(recipes::schedule_name(l.schedule)) + " schedule\n";
  }
  const std::string allreduce = allreduce_in_words(plan);
  if (!allreduce.empty()) out += indent + "allreduce: " + allreduce + "\n";
  // A cached plan's text came from a database: parse_plan refuses control characters in it, and
  // nothing a terminal would act on is printed anyway.
  if (!plan.provenance.reason.empty()) {
    out += indent + "why: " + strings::printable(plan.provenance.reason, "") + "\n";
  }
  return out;
}

void print_dry_run(const DryRun& d) {
  const Job& job = *d.job;
  const PlanChoice& choice = *d.choice;
  const std::string run_dir = env::get(env::kRunsDir) + "/" + job.recipe.name + "-<UTC time>";
  // As a launch runs them: the plan reaches the ranks as the job's plan (PMIx job data).
  std::vector<std::string> cmd = launch_prefix(job, run_dir + "/train_config.json");
  const std::vector<std::string> ranks = {d.worker, "train", "--summary",
                                          run_dir + "/worker_summary.json"};
  cmd.insert(cmd.end(), ranks.begin(), ranks.end());
  const bool tunes = choice.source != "cache" && !d.no_tune && job.recipe.tune.budget_seconds > 0;
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
                        {"train_config", nlohmann::json::parse(engine::to_json(*d.config))},
                        {"run_dir", run_dir},
                        {"command", cmd},
                        {"notes", choice.notes}};
    if (!warning.empty()) j["warnings"] = {warning};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("dry run: nothing is started and nothing is written\n");
  std::printf("recipe:  %s (%s), %d rank(s) on %d node(s)\n",
              strings::printable(job.recipe.name, "").c_str(),
              strings::printable(job.recipe_path, "").c_str(), job.ranks, job.shape.nodes);
  if (!warning.empty()) std::printf("%s\n", warning.c_str());
  for (const std::string& n : choice.notes) {
    std::printf("note:    %s\n", strings::printable(n, "").c_str());
  }
  if (choice.source == "cache") {
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
    std::printf("plan:    the recipe's own settings (%s):\n",
                d.no_tune ? "--no-tune" : "tune.budget is 0");
  }
  std::printf("%s", describe_plan(choice.plan, "  ").c_str());
  std::printf("ranks:   %s\n", quote_argv(cmd).c_str());
  std::printf(
      "         (a launch creates %s and writes train_config.json there: the settings above as "
      "the engine reads them; --json prints them)\n",
      run_dir.c_str());
}

}  // namespace dltune::launcher
