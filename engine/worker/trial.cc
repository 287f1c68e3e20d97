#include "engine/worker/trial.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "comm/mpi_communicator.h"
#include "common/halving_json.h"
#include "common/paths.h"
#include "engine/worker/trial_search.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {
namespace {

using json = nlohmann::json;

struct TrialOptions {
  std::string recipe, candidates, out;
  double budget_s = -1;
  double deadline = 0;   // > 0: the search ends by this time (seconds since the Unix epoch)
  std::string progress;  // rank 0 appends its progress events here ("" none)
  bool grid = false;
};
TrialOptions g_opts;

Status run_trials(const TrialOptions& o) {
  auto recipe = recipes::load_recipe(o.recipe);
  if (!recipe) return recipe.error();
  auto text = paths::read_file(o.candidates);
  if (!text) return invalid_input("candidates file: " + text.error().message());
  const json c = json::parse(*text, nullptr, false);
  const std::string where = "candidates file " + o.candidates;
  if (c.is_discarded() || !c.is_object()) return invalid_input(where + " is not a JSON object");
  if (c.value("version", 0) != 1) return invalid_input(where + ": expected \"version\": 1");
  if (!c.contains("base") || !c.contains("candidates") || !c["candidates"].is_array() ||
      c["candidates"].empty() || !c.contains("schedule")) {
    return invalid_input(where + ": needs 'base', a non-empty 'candidates' list and 'schedule'");
  }
  auto sched = halving::schedule_from_json(c["schedule"]);
  if (!sched) return sched.error().wrap(where);
  if (o.budget_s > 0) sched->halving.budget_s = o.budget_s;
  if (o.grid) sched->halving.grid = true;
  const auto since_epoch = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  std::vector<std::pair<std::string, recipes::Plan>> plans;
  for (size_t i = 0; i < c["candidates"].size(); ++i) {
    const json& k = c["candidates"][i];
    json p = c["base"];
    if (!k.is_object() || !k.contains("training") || !p.is_object()) {
      return invalid_input(where + ": candidates[" + std::to_string(i) + "] has no 'training'");
    }
    p["training"] = k["training"];
    if (k.contains("parallel")) p["parallel"] = k["parallel"];  // a pipeline layout
    auto plan = recipes::plan_from_json(p);
    if (!plan) return plan.error().wrap(where + ": candidates[" + std::to_string(i) + "]");
    plans.emplace_back(k.value("label", "candidate " + std::to_string(i)), *plan);
  }

  std::unique_ptr<comm::Communicator> world;
  if (comm::launched_as_rank() && comm::mpi_available()) {
    auto w = comm::create_mpi_world();
    if (!w) return w.error().wrap("starting the MPI communicator");
    world = std::move(*w);
  }
  // The deadline counts from the launcher's clock: the ranks' start-up is part of the budget.
  if (o.deadline > 0) sched->halving.budget_s = std::max(1e-3, o.deadline - since_epoch());
  Status st = ok_status();
  {
    TrialSearch search(*recipe, world.get(), *sched, o.progress);
    for (const auto& [label, plan] : plans) DLTUNE_TRY(search.add(label, plan));
    st = search.run();
    if (!st && world && world->size() > 1) {
      // The other ranks may be blocked in collectives this rank will never join (a step that
      // broke here only): MPI_Finalize (a fence over every rank) and the trainers'
      // communication threads would wait for them. Exit now; the launcher stops the others.
      std::fprintf(stderr, "dltune-worker trial: %s\n", st.error().message().c_str());
      std::fflush(stderr);
      std::_Exit(st.error().exit_code());
    }
    if (st.ok() && (!world || world->rank() == 0)) {
      st = paths::write_file_atomic(o.out, search.result().dump(1));
    }
  }
  world.reset();
  comm::mpi_finalize();
  return st;
}

}  // namespace

CLI::App* add_trial_command(CLI::App& app) {
  auto* t = app.add_subcommand("trial", "recipe tuning: short trial trainings of candidates");
  t->add_option("--recipe", g_opts.recipe, "the recipe (file or bundled name)")->required();
  t->add_option("--candidates", g_opts.candidates, "candidates JSON (tuner/recipe_tuning.h)")
      ->required();
  t->add_option("--out", g_opts.out, "where rank 0 writes the trials JSON")->required();
  t->add_option("--budget", g_opts.budget_s, "seconds (overrides the candidates file)");
  t->add_option(
      "--deadline", g_opts.deadline,
      "end the search by this time, in seconds since the Unix epoch (overrides --budget)");
  t->add_option("--progress", g_opts.progress, "rank 0 appends JSON progress events to this file");
  t->add_flag("--grid", g_opts.grid, "measure every candidate with the same number of steps");
  return t;
}

int run_trial_command() {
  Status st = run_trials(g_opts);
  if (!st) {
    std::fprintf(stderr, "dltune-worker trial: %s\n", st.error().message().c_str());
    return st.error().exit_code();
  }
  return 0;
}

}  // namespace dltune::engine
