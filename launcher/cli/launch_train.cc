// `dltune launch`'s training phase (launch_state.h): the ranks with the run directory's plan,
// and what happens when they fail. A failed job continues from the run's last checkpoint up to
// launch.restarts times: on the same ranks; on fewer when the failure comes again before a step
// and launch.min_ranks allows it (local ranks); under Slurm, without the failed rank's node when
// it no longer answers, on a spare node or one the allocation grows by (--nodes MIN-MAX) in its
// place, else on the nodes left where launch.min_nodes allows it. Every change of shape is
// planned again as `--resume -n` does (launcher/flow/reshape.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/paths.h"
#include "common/strings.h"
#include "engine/train/trace.h"
#include "launcher/backend/slurm_backend.h"
#include "launcher/cli/launch_state.h"
#include "launcher/flow/launch_progress.h"
#include "recipes/plan_fit.h"

namespace dltune::cli::launch_phases {
namespace {

// Plans the run again for `ranks` ranks on `nodes` nodes (slurm; 0 locally), leaving out
// L.jo.exclude, as `--resume -n` does (launcher/flow/reshape.h): the run directory's plan and
// launch.json rewritten. A --nodes MIN-MAX job keeps its range (a later loss may still grow
// the allocation) and its least (launch.min_nodes), though this shape is a fixed one.
Status replan(Launch& L, Progress& progress, int ranks, int nodes) {
  launcher::JobOptions jo = L.jo;
  jo.recipe = L.dir->recipe();  // the recipe as run: its overrides are in it
  jo.overrides.clear();
  jo.ranks = ranks;
  jo.nodes = nodes;
  jo.nodes_max = 0;
  auto job = launcher::make_job(jo, L.topo);
  if (!job) return job.error();
  job->nodes_max = L.job.nodes_max;
  job->recipe.launch.min_nodes = L.job.recipe.launch.min_nodes;
  L.job = std::move(*job);
  L.old_plan = L.choice.plan;
  L.reshape.emplace();
  L.resumed = L.dir;  // planned as a resumed run is: in its run directory (tune.restart_budget)
  DLTUNE_TRY(choose_new(L, progress, *L.layers));
  DLTUNE_TRY(recipes::check_plan_for_recipe(L.job.recipe, L.choice.plan, L.job.ranks));
  return record(L);
}

// Local ranks: a failure that came again before the restarted job trained a step is taken as
// lasting (a rank that cannot start again): with launch.min_ranks below the job's ranks, the
// next attempt runs on the most ranks down to it that the global batch splits over, planned
// again (replan()). Returns whether it did (false: the same ranks again, and `why` says why
// not).
Result<bool> continue_on_fewer(Launch& L, Progress& progress, std::string* why) {
  const int64_t min = L.job.recipe.launch.min_ranks;
  if (min <= 0 || min >= L.job.ranks) {
    *why = "launch.min_ranks does not allow fewer ranks";
    return false;
  }
  const int r = launcher::fewer_ranks(L.choice.plan, L.job.ranks, static_cast<int>(min));
  if (r == 0) {
    *why = "no count of ranks down to launch.min_ranks " + std::to_string(min) +
           " splits the global batch " + std::to_string(L.choice.plan.training.global_batch);
    return false;
  }
  DLTUNE_TRY(replan(L, progress, r, 0));
  return true;
}

// The most a node is given to run a one-task step, the first time it is asked
// (DLTUNE_NODE_ANSWER_MS); the second time, a node that did not answer the first is given twice
// as long: a busy controller or a node still tearing down the failed step may take longer.
// Errors: a value that is not a number of ms from 100 to 600000.
Result<int> node_answer_ms() {
  auto ms = strings::parse_int(env::get(env::kNodeAnswer));
  if (!ms || *ms < 100 || *ms > 600'000)
    return invalid_input(std::string(env::kNodeAnswer.name) +
                         " must be a number of milliseconds from 100 to 600000, not '" +
                         strings::printable(env::get(env::kNodeAnswer), "") + "'");
  return static_cast<int>(*ms);
}

// A node found lost, and the spare node that takes its place ("" when the job continues on
// fewer nodes); both "" when no node was lost.
struct NodeLoss {
  std::string node;
  std::string spare;
  bool grown = false;  // the spare was added to the allocation for it (grow_for())
};

// How many nodes lost_node() asks at once (each a one-task srun step).
constexpr size_t kNodesAskedAtOnce = 16;

// Which of `nodes` do not run a one-task step within `timeout_ms`, asked kNodesAskedAtOnce at
// a time (their order kept). Errors: node_answers()'s.
Result<std::vector<std::string>> silent_nodes(Progress& progress,
                                              const std::vector<std::string>& nodes,
                                              int timeout_ms) {
  std::vector<std::string> silent;
  for (size_t at = 0; at < nodes.size(); at += kNodesAskedAtOnce) {
    const size_t end = std::min(nodes.size(), at + kNodesAskedAtOnce);
    progress.status("asking " + std::to_string(end - at) + " node(s) of the job whether they " +
                    "still run a step");
    std::vector<std::future<Result<bool>>> asked;
    for (size_t i = at; i < end; ++i) {
      asked.push_back(std::async(std::launch::async, [&n = nodes[i], timeout_ms] {
        return launcher::node_answers(n, timeout_ms);
      }));
    }
    std::vector<Result<bool>> answers;
    for (auto& f : asked) answers.push_back(f.get());  // every step waited for
    for (size_t i = at; i < end; ++i) {
      Result<bool>& answer = answers[i - at];
      if (!answer) return std::move(answer).error().wrap("asking node " + nodes[i]);
      if (!*answer) silent.push_back(nodes[i]);
    }
  }
  return silent;
}

// The first of the job's `nodes` that runs no one-task step, in this order: `named` (the failed
// rank's, from srun's task-status line; "" unknown) first, then the job's others, since a node
// lost whole (its step daemon gone with its ranks) shows in srun's lines only as its peers'
// failures. Each node is asked (node_answer_ms()), and those that did not answer once more
// (twice as long): a node is lost when it answers neither. "" when every node answers.
// Errors: node_answers()'s; no node of a job of several answering at all (Slurm itself not
// running steps: nothing tells which node is lost).
Result<std::string> lost_node(Progress& progress, const std::vector<std::string>& nodes,
                              const std::string& named) {
  std::vector<std::string> order;
  if (!named.empty()) order.push_back(named);
  for (const std::string& n : nodes)
    if (n != named) order.push_back(n);
  auto ms = node_answer_ms();
  if (!ms) return ms.error();
  auto silent = silent_nodes(progress, order, *ms);
  if (!silent) return silent.error();
  if (silent->empty()) return std::string();
  silent = silent_nodes(progress, *silent, 2 * *ms);
  if (!silent) return silent.error();
  if (silent->empty()) return std::string();
  if (order.size() > 1 && silent->size() == order.size()) {
    char again[32];
    std::snprintf(again, sizeof again, "%.3g", 2 * *ms / 1000.0);
    return peer_failed("no node of the job runs a step (asked twice, the second time for " +
                       std::string(again) + " s): is Slurm's controller running? (scontrol ping)");
  }
  return silent->front();
}

// A node of the allocation beyond the job's that answers a one-task step, to run in place of
// a lost one (launch.spare_nodes), once the lost node is in L.jo.exclude: the node the job's
// next step takes that `before` (the failed attempt's nodes) did not have. One that does not
// answer is left out too (L.jo.exclude) and the next is tried. "" when no spare is left.
Result<std::string> take_spare(Launch& L, Progress& progress,
                               const std::vector<std::string>& before) {
  const int allocated = launcher::allocation_nodes();
  while (allocated > 0 && allocated - static_cast<int>(L.jo.exclude.size()) >= L.job.shape.nodes) {
    auto now = launcher::job_nodes(L.job.shape.nodes, L.jo.exclude);
    if (!now) return std::move(now).error().wrap("the job's nodes");
    std::string spare;
    for (const std::string& n : *now)
      if (std::find(before.begin(), before.end(), n) == before.end()) spare = n;
    if (spare.empty()) return std::string();
    progress.status("asking spare node " + spare + " whether it runs a step");
    auto ms = node_answer_ms();
    if (!ms) return ms.error();
    auto answers = launcher::node_answers(spare, *ms);
    if (!answers) return std::move(answers).error().wrap("asking node " + spare);
    if (*answers) return spare;
    progress.message("  spare node " + spare + " does not answer either: left out");
    L.jo.exclude.push_back(spare);
  }
  return std::string();
}

// With --nodes MIN-MAX, the allocation grown by a node in a lost one's place when it has no
// spare (launcher::grow_allocation(): Slurm's job expansion, within node_answer_ms()), and that
// node, once it answers a step (take_spare()); "" when Slurm grants none, saying why (the job
// then goes on on fewer). Errors: node_answer_ms()'s and take_spare()'s.
Result<std::string> grow_for(Launch& L, Progress& progress, const std::string& lost,
                             const std::vector<std::string>& before) {
  auto ms = node_answer_ms();
  if (!ms) return ms.error();
  progress.status("asking Slurm for a node in " + lost + "'s place (--nodes " +
                  std::to_string(L.job.recipe.launch.min_nodes) + "-" +
                  std::to_string(L.job.nodes_max) + ")");
  auto grown = launcher::grow_allocation(*ms);
  progress.finish();
  if (!grown) {
    progress.message("  the allocation could not grow by a node: " + grown.error().message());
    return std::string();
  }
  progress.message("  the allocation grew by node " + *grown);
  return take_spare(L, progress, before);
}

// Under Slurm, the job's nodes are asked to run a one-task step, the failed rank's first
// (lost_node()): when all do, the failure was transient and the job restarts on the same nodes
// ({}). When one does not, it is taken as lost and the next attempt leaves it out (srun
// --exclude): on a spare node of the allocation in its place when one answers (take_spare():
// the same shape and plan), else on the nodes left with the same ranks per node, planned again
// (replan()), down to launch.min_nodes nodes and launch.min_ranks ranks. Errors (the job stops,
// its checkpoint kept): a lost node that launch.min_nodes or min_ranks does not allow
// continuing without, or a global batch that does not split over the ranks left.
Result<NodeLoss> continue_without_node(Launch& L, Progress& progress, const std::string& named) {
  auto before = launcher::job_nodes(L.job.shape.nodes, L.jo.exclude);  // the failed attempt's
  if (!before) return std::move(before).error().wrap("the job's nodes");
  auto found = lost_node(progress, *before, named);
  if (!found) return found.error();
  if (found->empty()) return NodeLoss{};
  const std::string host = *found;
  L.jo.exclude.push_back(host);
  auto spare = take_spare(L, progress, *before);
  if (!spare) return spare.error();
  bool grown = false;
  if (spare->empty() && L.job.nodes_max > 0) {
    spare = grow_for(L, progress, host, *before);
    if (!spare) return spare.error();
    grown = !spare->empty();
  }
  if (!spare->empty()) {
    L.job.exclude = L.jo.exclude;
    return NodeLoss{host, *spare, grown};
  }
  const int nodes = L.job.shape.nodes - 1;
  const int ranks = nodes * L.job.shape.ranks_per_node;
  const int64_t min_nodes = L.job.recipe.launch.min_nodes;
  const int64_t min_ranks = L.job.recipe.launch.min_ranks;
  const std::string lost = "node " + host + " does not answer (it ran rank(s) of the job)";
  if (min_nodes <= 0 || nodes < min_nodes || nodes < 1) {
    return peer_failed(lost + "; launch.min_nodes " + std::to_string(min_nodes) +
                       " does not allow continuing on " + std::to_string(nodes) + " node" +
                       (nodes == 1 ? "" : "s") +
                       (min_nodes <= 0 ? " (0: never fewer than the job's own)" : ""));
  }
  if (min_ranks > 0 && ranks < min_ranks) {
    return peer_failed(lost + "; the " + std::to_string(ranks) +
                       " ranks on the nodes left are fewer than launch.min_ranks " +
                       std::to_string(min_ranks));
  }
  DLTUNE_TRY_CTX(launcher::check_reshape(L.choice.plan, ranks), lost);
  DLTUNE_TRY(replan(L, progress, ranks, nodes));
  return NodeLoss{host, ""};
}

// The shape the next attempt runs on, after a failure that restarts (outcome, `again`: it came
// again before the restarted job trained a step): under Slurm, without a node that no longer
// answers (continue_without_node); locally, on fewer ranks when the failure came again
// (continue_on_fewer); else the same. Fills r's fewer / lost_node / nodes and says what it chose.
// Errors: the job cannot continue (the caller stops it, keeping the checkpoint).
Status restart_shape(Launch& L, Progress& progress, const launcher::LaunchOutcome& outcome,
                     bool again, launcher::Restart* r) {
  if (L.job.backend == launcher::Backend::kSlurm) {
    const size_t lost_before = L.jo.exclude.size();
    auto lost = continue_without_node(L, progress, outcome.host);
    progress.finish();
    if (L.jo.exclude.size() != lost_before) {  // --resume leaves them out too
      if (Status s = record_launch(L); !s.ok())
        progress.message("warning: the lost nodes were not written to launch.json: " +
                         s.error().message());
    }
    if (!lost) return std::move(lost).error().wrap("cannot continue");
    if (lost->node.empty()) {
      const std::string who =
          outcome.host.empty()
              ? "every node of the job still answers"
              : "node " + outcome.host + " still answers, as does every other node of the job";
      progress.message("  " + who + ": the same nodes again");
      return ok_status();
    }
    r->lost_node = lost->node;
    r->spare_node = lost->spare;
    r->grown = lost->grown;
    r->nodes = L.job.shape.nodes;
    if (!lost->spare.empty()) {
      progress.message("  node " + lost->node + " does not answer: continuing on " +
                       (lost->grown ? "node " + lost->spare + ", added to the allocation,"
                                    : "spare node " + lost->spare) +
                       " in its place, the same " + std::to_string(L.job.ranks) + " ranks on " +
                       std::to_string(L.job.shape.nodes) + " nodes");
      return ok_status();
    }
    r->fewer = true;
    progress.message("  node " + lost->node + " does not answer: continuing without it, " +
                     launcher::reshape_text(launcher::reshape_json(*L.reshape)));
    return ok_status();
  }
  if (!again) return ok_status();
  std::string why_not;
  auto fewer = continue_on_fewer(L, progress, &why_not);
  if (!fewer) return std::move(fewer).error().wrap("cannot continue on fewer ranks");
  r->fewer = *fewer;
  if (*fewer) {
    progress.message("  the failure came again before a step: continuing on fewer ranks, " +
                     launcher::reshape_text(launcher::reshape_json(*L.reshape)));
  } else {
    progress.message("the failure came again before a step; the same ranks again (" + why_not +
                     ")");
  }
  return ok_status();
}

// Tells the user how to continue a job that stops after a failure (its checkpoint is kept:
// `--resume`), when `always` or when a checkpoint exists, and returns its exit code.
int stop_after_failure(const RunDir& dir, int code, bool always) {
  if (always || paths::exists(dir.checkpoint())) {
    std::fprintf(stderr,
                 "dltune launch: the last checkpoint is kept; continue with: dltune launch "
                 "--resume %s\n",
                 dir.path.c_str());
  }
  return code != 0 ? code : 1;
}

}  // namespace

std::vector<std::string> train_argv(const std::string& worker, const RunDir& dir, bool resume) {
  std::vector<std::string> argv = {worker, "train", "--run-dir", dir.path};
  if (resume) argv.insert(argv.end(), {"--resume", dir.checkpoint()});
  return argv;
}

int restarts_allowed(const Launch& L) {
  return L.o->max_restarts >= 0 ? L.o->max_restarts
                                : static_cast<int>(L.job.recipe.launch.restarts);
}

// Phase 4: the ranks, following rank 0's metrics. A failed job continues from the run's last
// checkpoint up to launch.restarts times (launcher/flow/restarts.h), on the shape
// restart_shape() chooses. Returns the exit code (0: trained).
int train(Launch& L, Progress& progress, bool* resumed_from_checkpoint) {
  const RunDir& dir = *L.dir;
  const bool resume_ckpt = L.resumed && paths::exists(dir.checkpoint());
  *resumed_from_checkpoint = resume_ckpt;
  if (L.resumed && !resume_ckpt)
    progress.message("no checkpoint yet in " + dir.path + "; starting over");
  const int allowed = restarts_allowed(L);
  if (L.job.backend == launcher::Backend::kSlurm && allowed > 0) {
    // Read again when a node is lost; a bad value is refused now, before a rank starts.
    if (auto ms = node_answer_ms(); !ms) {
      std::fprintf(stderr, "dltune launch: %s\n", ms.error().message().c_str());
      return 2;
    }
  }
  bool from_checkpoint = resume_ckpt;
  std::chrono::steady_clock::time_point failed_at;
  for (;;) {
    const int done = static_cast<int>(L.restarts.size());
    progress.phase(done > 0 ? "training (restart " + std::to_string(done) + " of " +
                                  std::to_string(allowed) + ")"
                   : from_checkpoint ? "training (resumed)"
                                     : "training");
    progress.status("starting " + std::to_string(L.job.ranks) + " rank(s)");
    launcher::clear_failure_notes(dir.path);
    launcher::remove_partial_checkpoints(dir.path);
    int code = 0;
    launcher::LaunchOutcome outcome;
    Status trained;
    std::optional<std::chrono::steady_clock::time_point> first_step;
    {
      launcher::MetricsFollower follow(dir.metrics(), static_cast<long>(L.steps), &progress);
      trained =
          launcher::run_ranks(L.job, "training", train_argv(L.worker, dir, from_checkpoint), &code,
                              dir.plan(), dir.recipe(), !L.choice.plan.placement.empty(), &outcome);
      follow.stop();
      first_step = follow.first_step_at();
    }
    progress.finish();
    if (done > 0 && first_step) {
      L.restarts.back().lost_s = std::chrono::duration<double>(*first_step - failed_at).count();
    }
    if (trained.ok()) break;
    failed_at = std::chrono::steady_clock::now();
    std::fprintf(stderr, "dltune launch: %s\n", trained.error().message().c_str());
    const std::string refusal = launcher::restart_refusal(outcome, done, allowed);
    if (!refusal.empty()) {
      if (done > 0 && !outcome.interrupted)
        std::fprintf(stderr, "dltune launch: not restarting again: %s\n", refusal.c_str());
      return stop_after_failure(dir, code, false);
    }
    launcher::Restart r;
    r.at_s = since(L.t0);
    r.exit_code = code;
    r.why = launcher::failure_why(outcome.message, dir.path);
    r.from_step = launcher::checkpoint_step(dir.checkpoint());
    if (Status s = restart_shape(L, progress, outcome, done > 0 && !first_step, &r); !s.ok()) {
      std::fprintf(stderr, "dltune launch: %s\n", s.error().message().c_str());
      return stop_after_failure(dir, code, true);
    }
    r.ranks = L.job.ranks;
    from_checkpoint = r.from_step > 0;
    L.restarts.push_back(r);
    progress.message(
        "restart " + std::to_string(done + 1) + " of " + std::to_string(allowed) +
        " (launch.restarts): " + launcher::restart_text(launcher::restarts_json({r}).front()));
  }
  if (Status m = engine::merge_traces(dir.trace(), L.job.ranks); !m.ok()) {
    std::fprintf(stderr, "dltune launch: no trace.json: %s\n", m.error().message().c_str());
  }
  return 0;
}

}  // namespace dltune::cli::launch_phases
