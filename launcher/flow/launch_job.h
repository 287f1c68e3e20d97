// `dltune launch`'s job: the recipe it runs, the job shape, the backend, and how ranks start.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/progress.h"
#include "common/result.h"
#include "launcher/backend/host_list.h"
#include "launcher/backend/launch_spec.h"
#include "launcher/flow/run_dir.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"
#include "recipes/recipe_overrides.h"
#include "topology/topology.h"

namespace dltune::launcher {

struct JobOptions {
  std::string recipe;                        // a path or a bundled recipe name
  std::vector<recipes::Override> overrides;  // --set KEY=VALUE, applied before validation
  int ranks = 0;                             // -n; 0 = the recipe's, else auto
  int nodes = 0;                             // --nodes; 0 = the allocation's (slurm) or 1
  int nodes_max = 0;    // --nodes MIN-MAX's MAX (nodes its MIN); 0 = nodes is the job's count
  std::string backend;  // "" = default_backend()
  std::vector<std::string> exclude;  // slurm: the allocation's nodes lost, left out
  std::vector<HostSlots> hosts;      // -H / --hostfile: the job's machines, over ssh
  // What every `dltune run` of the launch is also given, as mpirun's words: "-x", "NAME=VALUE",
  // "--map-by", "numa" (launch -x / --map-by).
  std::vector<std::string> run_options;
};

// What the launch is: the job shape, the backend and how ranks bind.
struct Job {
  recipes::Recipe recipe;  // validated, launch.ranks / ranks_per_node set to the job's
  std::string recipe_path;
  Backend backend = Backend::kLocal;
  recipes::JobShape shape;  // with threads_per_rank
  int ranks = 1;
  std::string threads_reason;      // why shape.threads_per_rank ("the node's 36 cores shared ...")
  std::string precision_reason;    // why training.precision, when the recipe left it auto
  std::vector<std::string> notes;  // what --set changed beyond its keys (a shorter schedule)
  topology::BindPolicy bind = topology::BindPolicy::kAuto;
  std::vector<std::string> exclude;  // slurm: nodes not to run on (JobOptions::exclude)
  // -H / --hostfile: the hosts the job's nodes are, in order (shape.nodes of them, each
  // running shape.ranks_per_node ranks through `dltune run -H`); empty: this machine or Slurm's.
  std::vector<std::string> hosts;
  std::vector<std::string> run_options;  // JobOptions::run_options
  // --nodes MIN-MAX (slurm): the most nodes the job runs on; a lost node's place is taken by
  // a node the allocation grows by (launcher::grow_allocation) when it has no spare, and the
  // job goes on on fewer down to MIN (launch.min_nodes). 0 = a fixed count.
  int nodes_max = 0;
  // Ranks and threads per rank were both left auto (no -n, launch.ranks, ranks_per_node or
  // threads_per_rank) for a local job on a node without GPUs: the shape above is the rule's,
  // and a launch that tunes measures the others (shape_search.h).
  bool shape_auto = false;
};

// Loads the recipe with the options' overrides (--set), validates it, and works out the job
// shape: ranks from -n, else the recipe,
// else SLURM_NTASKS (slurm), else one per GPU, else (launch.threads_per_rank N) as many N-thread
// ranks as a node's cores hold, else one per NUMA domain, per node; threads per rank from the
// recipe, else 1 for GPU ranks, else the node's cores over its ranks; nodes from
// --nodes, else SLURM_JOB_NUM_NODES less the excluded nodes (slurm), else 1; with --nodes
// MIN-MAX (slurm only), as many as the allocation has up to MAX (MIN outside one, which then asks
// salloc for the range), launch.min_nodes set to MIN and the ranks launch.ranks_per_node (else
// SLURM_NTASKS's share, else auto) per node, -n refused. The recipe is
// validated again with the job's rank count (batch vs ranks); `notes` says what the overrides
// changed beyond their own keys (recipes::parse_recipe_with_overrides). Errors (invalid_input, exit
// 2): every recipe problem as `file:line:col: key: message`, one per line; ranks that do not divide
// over the nodes; more than one node without the slurm backend; inside an allocation, more nodes
// than it has; comm.backend nccl on a local machine without a GPU. not_found (exit 2): no such
// recipe.
// With hosts (-H / --hostfile) the nodes are those hosts (the first `nodes` of them when
// --nodes is given), ranks from -n, else the recipe's, else launch.ranks_per_node per host,
// else every host's slots when they are all equal, else the rule per node from `topo` (the
// first host's own when the caller asked it, ssh_backend.h's hosts_own_topology(), else this
// machine's; a note says which when no host is this machine); a host
// given more than one slot but fewer than the ranks per node, hosts with --backend slurm or
// --nodes MIN-MAX, or ranks that do not divide over the hosts are refused.
Result<Job> make_job(const JobOptions& options, const topology::Topology& topo);

// `--nodes`'s value: "N" -> {N, 0}; "MIN-MAX" -> {MIN, MAX} (MIN-MIN is MIN: {MIN, 0}), every
// count from 1 to 4096. Errors (invalid_input): anything else, MIN above MAX.
Result<std::pair<int, int>> parse_node_count(std::string_view text);

// Threads per rank as a launch runs them, and why: the recipe's launch.threads_per_rank; 1 for
// GPU ranks (comm.backend nccl: the device computes); else a node's `cores` shared evenly among
// its `per_node` ranks. Cores left idle, or shared by more threads than they can run, are said.
std::pair<int, std::string> threads_per_rank(const recipes::Recipe& r, int per_node, int cores);

// Runs argv (argv[0] an executable path) as every rank of the job in a `dltune run` child
// process (launch_prefix(): one embedded PMIx server per process, and a launch does several)
// and waits; SIGINT / SIGTERM are forwarded to it once. `exit_code` (optional) receives the
// child's exit code (0, 1, 130, 143). Errors: peer_failed "PHASE failed ..." when a rank failed
// (the child printed which), kInternal "PHASE was interrupted" for 130 / 143, not_found when
// this binary cannot be found.
// With `plan_file` and `recipe_file`, the ranks get those files' text as the job's plan and
// recipe (PMIx job data, `dltune run --plan P --recipe R`): no shared filesystem is needed for
// them; `placed`: the plan has a placement, which binds the ranks (else launch.binding does).
// `outcome` (optional) receives the child's outcome (`dltune run --outcome-file`): its exit
// code, the failure's sentence naming the rank, and whether it was interrupted, which tells a
// rank killed by SIGTERM (143) from a launch stopped by one; where the child wrote none (it
// could not start the ranks), the exit code with no sentence.
Status run_ranks(const Job& job, const std::string& phase, const std::vector<std::string>& argv,
                 int* exit_code = nullptr, const std::string& plan_file = "",
                 const std::string& recipe_file = "", bool placed = false,
                 LaunchOutcome* outcome = nullptr);

// argv as a shell would need it typed ('quoted' where needed).
std::string quote_argv(const std::vector<std::string>& argv);
// The `dltune run` command equivalent to how run_ranks() starts the job, up to the "--". The
// ranks bind as the plan places them when `placed` (the plan in `plan_file` has a placement:
// `dltune run` applies it), else by the recipe's launch.binding.
std::vector<std::string> launch_prefix(const Job& job, const std::string& plan_file = "",
                                       const std::string& recipe_file = "", bool placed = false);

// The scaling efficiency's 1-rank baseline.
struct Baseline {
  double sps = 0;     // samples/s over its timed steps (all but the first, as the job's)
  int64_t steps = 0;  // steps of the run that gave it
  double rel_ci = 0;  // ~95 % interval of its mean step time, relative (stats::mean_rel_ci_batched)
  std::string bind;   // the binding policy it ran under (the job's)
  double seconds = 0;  // the time its runs' steps took, all runs together
  // Reused from the database (baseline_reuse.h): when (Unix seconds, > 0) and on which host it
  // was measured; 0 and "" for a baseline this launch measured.
  int64_t measured_at = 0;
  std::string measured_on;
};
inline constexpr double kBaselineRelCi = 0.05;    // the interval the baseline runs long enough for
inline constexpr int64_t kBaselineMinSteps = 40;  // and at least this many (2 per batch mean)
inline constexpr int64_t kBaselineFewestSteps = 8;  // where 40 would not fit the budget
inline constexpr double kBaselineShare = 0.10;      // of the training's time, at most (about)
inline constexpr double kBaselineMinBudgetS = 2;    // but this long where that is less
inline constexpr double kBaselineMaxS = 40;         // and never longer

// The seconds a baseline after a training of `training_s` seconds may take: kBaselineShare of
// it, within [kBaselineMinBudgetS, kBaselineMaxS].
double baseline_budget_s(double training_s);

// The steps of the baseline's first run for a step of about `step_s` seconds (<= 0: unknown,
// 0.05 s assumed) and `budget_s`: 0.8 x budget_s / step_s, at least kBaselineMinSteps where
// that many fit the whole budget, else as many as fit it but at least kBaselineFewestSteps (issue
// 42: AlexNet's 1.9 s steps made kBaselineMinSteps 75 s against a 10 s budget).
int64_t baseline_first_steps(double step_s, double budget_s);

// Samples/s of the same per-rank batch on one rank alone, for the scaling efficiency, measured
// as the job's ranks run: the job's recipe as run (job.recipe_path) and its `plan` laid over one
// rank (baseline_plan()), started as `worker train` by `dltune run -n 1` with the job's backend
// and binding (so on the cores of the job's rank 0), warmed as the job is (its first step is not
// timed), and, within `budget_s` (baseline_budget_s()), long enough that the ~95 % interval of
// its mean step time (batch means, so that the machine's slow phases count) is within
// kBaselineRelCi: it first runs baseline_first_steps(`step_s`, budget_s) steps
// (`step_s`: the job's step time: most of the budget in one run, the interval's best chance),
// then 4x as many while the interval is wider and the steps run so far and the next run fit
// the budget (where one rank alone ran much faster than the job's step); the result says how
// wide the interval came out and how long its steps took. It measures speed, not learning: the
// learning rate is made negligible so that a recipe whose rate diverges at this batch on one rank
// (its lr is scaled for the whole job's batch) still gives its step time. Errors: a run failed (its
// exit code) or wrote no throughput. `progress` (optional) shows each run's steps.
Result<Baseline> measure_baseline(const Job& job, const std::string& worker,
                                  const recipes::Plan& plan, double step_s, double budget_s,
                                  const RunDir& dir, Progress* progress = nullptr);

// What measure_baseline() does, for any job and plan: `plan` (laid over `job`'s ranks, its
// placement binding them when it has one) trained as `job` runs it, measured as above; `what`
// names the runs in progress and errors ("the 1-rank baseline"), and its files are `files`
// followed by plan.json, recipe.yaml, metrics.jsonl and summary.json. The shape search
// (shape_search.h) measures each ranks x threads candidate with it.
Result<Baseline> measure_throughput(const Job& job, const std::string& worker,
                                    const recipes::Plan& plan, const std::string& what,
                                    const std::string& files, double step_s, double budget_s,
                                    Progress* progress = nullptr);

// `plan` laid over one rank for the baseline: a 1x1 job, one replica of one stage training a
// replica's batch whole (its micro-batches kept, which bound its activations as the stages'
// did), weak scaling, no placement (the baseline binds as the job's binding says).
recipes::Plan baseline_plan(const recipes::Plan& plan);

// The job measure_baseline() runs: `job` with one rank on one node (under Slurm, `dltune run
// -n 1 --nodes 1` inside the job's allocation: one rank cannot spread over its nodes).
Job baseline_job(const Job& job);

}  // namespace dltune::launcher
