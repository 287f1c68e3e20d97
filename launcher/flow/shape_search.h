// Ranks x threads per node chosen by measurement (engine issue 38 item 2).
//
// A CPU node's cores can train as a few ranks of many threads or many ranks of few: 2 x 18,
// 6 x 6, 12 x 3 or 36 x 1 on a 36-core node of 2 NUMA domains. Which is fastest depends on the
// model and the CPU: ranks pay an allreduce and a copy of the model each, threads pay their
// split of each layer (a small layer splits badly). The rule a launch otherwise follows, one rank
// per NUMA domain with every core of it as threads, is one of the candidates, not an answer.
//
// How the search works. For a local job whose ranks and threads per rank are both auto
// (launch.ranks and launch.threads_per_rank, no -n), on a node without GPUs:
//   1. candidates: every ranks-per-node count r that divides the node's cores and is a multiple
//      of its NUMA domains (each rank's cores in one domain), threads = cores / r; more than
//      kMostShapes are thinned to a geometric spread that keeps both ends (shape_candidates);
//   2. each candidate runs the recipe's own settings (recipes::recipe_default_plan, what the
//      recipe fixes written over it) at one global batch for all (the rule's shape's, so that
//      every candidate trains the same job; a recipe that fixes the per-rank batch keeps it),
//      measured as the 1-rank baseline is (launch_job.h measure_throughput: a short training to
//      a +-5 % interval or its share of the budget), kShapeRounds times round-robin, its best
//      run counting (a shared machine's slow phases only ever slow a run), and stored in the user
//      database's baselines table under the candidate's key and plan (baseline_reuse.h): a
//      later launch on this machine takes the measurements from there and measures nothing;
//   3. the fastest wins; one within kShapeTie of it with fewer ranks wins instead (less memory,
//      less to allreduce).
// Where nothing may be measured (--dry-run, --no-tune, tune.budget 0) the database's
// measurements decide when it has every candidate's; else the rule stands, and says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/progress.h"
#include "common/result.h"
#include "launcher/flow/launch_job.h"
#include "recipes/plan.h"
#include "topology/topology.h"

namespace dltune::launcher {

inline constexpr size_t kMostShapes = 4;    // candidates measured at most
inline constexpr double kShapeTie = 0.02;   // within 2 % of the fastest: fewer ranks win
inline constexpr double kShapeShare = 0.3;  // of tune.budget, for all the candidates
inline constexpr double kShapeMinS = 2;     // but at least this long for each
inline constexpr int kShapeRounds = 2;      // runs of each, round-robin: the best one counts

struct RanksThreads {
  int ranks_per_node = 1;
  int threads = 1;
  bool operator==(const RanksThreads&) const = default;
};

// "2 ranks x 1 thread".
std::string describe(const RanksThreads& s);

// The shapes a search measures on a node of `cores` cores in `numa` NUMA domains (section 1
// above), fewest ranks first. Where no multiple of `numa` divides `cores` (6 cores in 4
// domains), the divisors of `cores`. One shape (a 1-core node) when there is nothing to choose.
std::vector<RanksThreads> shape_candidates(int cores, int numa, size_t most = kMostShapes);

// `job` (one node) as `s.ranks_per_node` ranks of `s.threads` threads: its ranks, shape and
// the recipe's launch.ranks / ranks_per_node (launch.threads_per_rank stays auto: it is in the
// tuning key's recipe signature, and the shape's threads follow from the node).
Job job_with_shape(const Job& job, const RanksThreads& s);

// The plan a candidate `job` (job_with_shape) is measured with (section 2): the recipe's own
// settings, at `global_batch` samples per step in strong scaling when > 0 (else the recipe's
// fixed per-rank batch).
recipes::Plan shape_plan(const Job& job, int64_t global_batch);

// The global batch every candidate of `job` (as make_job shaped it: the rule's) trains: the
// recipe's own settings' at the rule's shape; 0 when the recipe fixes the per-rank batch.
int64_t shape_search_batch(const Job& job);

struct ShapeMeasurement {
  RanksThreads shape;
  double sps = 0;           // samples/s (0: not measured)
  double rel_ci = 0;        // its interval, relative
  std::string source;       // "measured", "database", or "" (not measured: `error` says why)
  int64_t measured_at = 0;  // database: when (Unix seconds)
  std::string error;        // why it was not measured or failed
};

struct ShapeChoice {
  bool decided = false;  // by measurements (this launch's or the database's); false: the rule
  RanksThreads chosen;
  std::vector<ShapeMeasurement> shapes;  // in candidate order
  std::string why;     // one line: "measured on this node: 2 ranks x 1 thread 3,400 samples/s ..."
  double seconds = 0;  // this launch's measuring
  // A SIGINT / SIGTERM stopped the measuring: the run's message ("measuring 2 ranks x 1 thread
  // was interrupted (SIGINT)"); the launch stops with it, as an interrupted tuning does.
  std::string interrupted;
};

// The choice among measured `shapes` (section 3): the fastest, or one with fewer ranks within
// kShapeTie of it; decided = false (the rule's `rule` kept) when none was measured. `why` names
// each measured shape's figure against the chosen one.
ShapeChoice decide_shape(const std::vector<ShapeMeasurement>& shapes, const RanksThreads& rule);

// summary.json's "shape_search": chosen (ranks_per_node, threads), decided, why, seconds, and
// each candidate's ranks_per_node, threads, samples_per_s, rel_ci, source, error.
nlohmann::json shape_choice_json(const ShapeChoice& c);

struct ShapeSearch {
  const Job* job = nullptr;  // as make_job shaped it (the rule's), shape_auto
  const topology::Topology* topo = nullptr;
  std::string worker;    // dltune-worker
  std::string db_path;   // the user database: measurements read from and stored in
  std::string work_dir;  // the candidates' files
  bool measure = true;   // false: only the database's measurements (dry run, --no-tune)
  // Non-empty: the topology is not this machine's (DLTUNE_TOPO_XML's export of another one),
  // whose shapes a run here would not measure: only the database's measurements count, and
  // this says why (in ShapeChoice::why).
  std::string elsewhere;
  bool remeasure = false;  // --retune: measure even what the database has
  double budget_s = 0;     // for all the candidates' measurements
  Progress* progress = nullptr;
};

// The search (sections 1-3) for s.job on its node. Never fails the launch: a candidate that
// cannot run (its batch does not split, its ranks fail) is left out with its reason, a database
// that cannot be read or written is said in `why`, and with nothing measured the rule stands.
// An interrupt (SIGINT / SIGTERM forwarded to the ranks) ends it at once, in `interrupted`.
ShapeChoice search_shape(const ShapeSearch& s);

}  // namespace dltune::launcher
