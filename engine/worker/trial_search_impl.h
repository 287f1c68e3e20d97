// Internal to engine/worker: the trial search's candidates, families and records, and the
// Search class behind TrialSearch (trial_search.h; what it does: trial.h). Its methods live in
// trial_search.cc (the public calls, the halving rounds, the comparisons and the records) and
// trial_steps.cc (building, stepping, timing and agreeing on one candidate).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/allreduce.h"
#include "comm/mpi_communicator.h"
#include "common/env.h"
#include "common/halving.h"
#include "common/halving_cost.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/stats.h"
#include "common/strings.h"
#include "engine/train/rank_memory.h"
#include "engine/train/recipe_config.h"
#include "engine/train/train_data.h"
#include "engine/train/trainer.h"
#include "engine/train/training_memory.h"
#include "engine/worker/trial_search.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine::trial_detail {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using Schedule = TrialSchedule;

// Candidates that differ only in bucket size and overlap train alike: in halving they share
// one trainer (Trainer::set_communication() switches it between them), so the search builds
// and warms one model per batch and learning-rate schedule instead of one per candidate, and a
// divergence fails the whole family at once. The grid keeps one trainer per candidate.
struct Family {
  recipes::TrainingPlan training;    // its first member's (see recipes::trains_alike())
  recipes::ParallelLayout parallel;  // its layout (recipes::same_layout() for every member)
  std::unique_ptr<Trainer> trainer;
  double first_loss = 0;  // the ranks' mean loss over the trainer's warm-up steps (0: not yet)
  // Its trainer's training memory, measured once after the build and warm-up
  // (Search::measure_memory()): the memory model's estimate for the rank with the largest one
  // and that rank's measured peak, bytes; -1: not measured.
  int64_t memory_estimate = -1, memory_peak = -1;
};

struct Cand {
  std::string label;
  TrainConfig cfg;
  int global_batch = 0;
  bool failed = false;
  bool skipped = false;  // not measured: the budget ran out first (failed is set too)
  std::string reason;
  size_t family = 0;  // index into Search::families_
  // The step split of its timed steps since the last record (this rank's trainer timings),
  // and its buckets' allreduce seconds, measured once (Search::measure_buckets()).
  double split_compute_s = 0, split_comm_s = 0;
  int split_steps = 0;
  std::vector<double> allreduce_s;
  bool buckets_measured = false;
};

// A run of steps whose loss, averaged over its steps and over the ranks, is above this multiple
// of the trainer's warm-up loss (at initialisation, about ln(classes)) diverges: healthy
// training does not get worse than its untrained start. The mean over the ranks, not each
// rank's own loss: one rank's 64 samples make a noisy loss, and LeNet at 4 ranks with
// square-root lr scaling (which trains to 100 % held-out) once showed a single rank's step
// 1.5x above the start, which failed every candidate of the recipe.
constexpr double kDivergedLossRise = 1.5;

// How long a rank whose step broke waits for the others to agree (Search::agree()).
constexpr double kBrokenWaitSteps = 10;
constexpr std::chrono::duration<double> kBrokenWaitMin = std::chrono::seconds(5);

// The step (1-based count of rank `rank`'s trial steps) DLTUNE_FAULT_TRIAL_STEP makes fail;
// 0 none. A malformed value is reported and ignored.
inline int64_t fault_trial_step(int rank) {
  const auto v = env::get_if_set(env::kFaultTrialStep);
  if (!v) return 0;
  const size_t colon = v->find(':');
  const std::string who = v->substr(0, colon);
  auto n = strings::parse_int(colon == std::string::npos ? "" : v->substr(colon + 1));
  auto r = strings::parse_int(who);
  if (!n || *n < 1 || (who != "*" && !r)) {
    DLTUNE_LOG(kWarn, "tuner") << env::kFaultTrialStep.name << "='" << *v
                               << "' is not RANK:N or *:N; ignored";
    return 0;
  }
  return who == "*" || *r == rank ? *n : 0;
}

// What a run of steps of one candidate came to on this rank.
struct Steps {
  std::string why;        // the first failure ("" none)
  bool broken = false;    // a step failed (error, out of memory): the trainer cannot go on
  bool diverged = false;  // a loss was not finite (Search::step()); the steps went on
  double loss_sum = 0;    // the finite losses of the steps, summed
  int losses = 0;         // how many there were
};

struct Record {
  size_t candidate = 0;
  int round = 0, steps = 0;
  double sps = 0, step_s = 0;
  bool failed = false;
  std::string reason;
  bool skipped = false;
  std::vector<std::pair<int, double>> chunks;      // (steps, seconds) of each cycle, in order
  double compute_s = -1, comm_s = -1;              // means per timed step; < 0: none
  std::vector<double> allreduce_s;                 // each bucket's allreduce alone (s)
  int64_t memory_estimate = -1, memory_peak = -1;  // its family's (Family); -1: not measured
};

// A candidate that failed in `round` without a measurement.
inline Record failed_record(size_t candidate, int round, const std::string& reason) {
  Record r;
  r.candidate = candidate;
  r.round = round;
  r.failed = true;
  r.reason = reason;
  return r;
}

// After the round that compares the two finalists, more cycles while their paired interval
// still holds 1 (the difference is not yet known) and the budget allows, up to this many.
constexpr int kMaxExtraCycles = 24;

// Rank 0's progress events for the launcher (one JSON object per line, flushed per line).
class ProgressLog {
 public:
  explicit ProgressLog(const std::string& path)
      : f_(path.empty() ? nullptr : std::fopen(path.c_str(), "a")) {}
  ~ProgressLog() {
    if (f_) std::fclose(f_);
  }
  ProgressLog(const ProgressLog&) = delete;
  ProgressLog& operator=(const ProgressLog&) = delete;
  void write(const json& j) {
    if (!f_) return;
    std::fprintf(f_, "%s\n", j.dump().c_str());
    std::fflush(f_);
  }

 private:
  std::FILE* f_;
};

// The search on this rank (every rank runs one; their decisions agree through allreduces).
class Search {
 public:
  Search(const recipes::Recipe& recipe, comm::Communicator* world, Schedule s,
         const std::string& progress)
      : recipe_(recipe),
        world_(world),
        s_(s),
        t0_(Clock::now()),
        log_(world == nullptr || world->rank() == 0 ? progress : "") {}

  Status add(const std::string& label, const recipes::Plan& plan);

  Status run();
  json result() const;

 private:
  // Why `cfg` does not fit one rank's memory (rank_memory_limit(): the recipe's
  // launch.memory_per_rank, else this node's share), by the memory model of its layout's
  // largest stage; nullopt when it fits (or the model cannot tell: building will say).
  std::optional<std::string> does_not_fit(const TrainConfig& cfg, int ranks_per_node) const;

  int ranks() const { return world_ ? world_->size() : 1; }
  int rank() const { return world_ ? world_->rank() : 0; }
  double now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  // Max (sum) over the ranks, in place (no-op alone); `timeout` 0: the communicator's.
  Status reduce_max(std::vector<double>& v, std::chrono::milliseconds timeout = {});
  Status reduce_sum(std::vector<double>& v) { return reduce(v, comm::ReduceOp::kSum, {}); }
  Status reduce(std::vector<double>& v, comm::ReduceOp op, std::chrono::milliseconds timeout);

  // Synthetic data is generated by every rank, which costs seconds for a large set; a trial's
  // step time does not depend on how many samples the sampler draws from, so trials use at
  // most max(4096, 8 x the largest global batch) of them, and of large samples (ImageNet's
  // 600 KB) no more than kTrialDataBytes' worth beyond two global batches.
  static constexpr double kTrialDataBytes = 256.0 * (1 << 20);
  Result<const Dataset*> data_for(const TrainConfig& c);

  Trainer* trainer(const Cand& c) const { return families_[c.family].trainer.get(); }

  // Makes the candidate's family trainer ready for its steps: builds it and runs its warm-up
  // steps when it does not exist, and switches it to the candidate's bucket size and overlap.
  // All ranks agree on failure (the candidate fails; the search goes on).
  Status prepare(Cand& c);

  // Builds the family trainer and runs the warm-up steps. The set-up's duration is agreed over
  // the ranks (the slowest rank's end) so that the cost model decides alike everywhere.
  Status build(Cand& c);

  // After `c`'s family trainer was built and warmed up, on every rank (collective): each rank's
  // memory-model estimate for its stage (rank_memory()) and its measured peak above `base`
  // (MemoryBaseline::peak_bytes()). The family keeps the pair of the rank with the largest
  // estimate, the one that decides whether the layout fits.
  Status measure_memory(Cand& c, const MemoryBaseline& base);

  // One step of `c` on its family's trainer. A loss that is not finite is a divergence: its
  // learning rate (scaled with its global batch) makes this model diverge, and a configuration
  // that cannot train must not win on throughput. A finite loss is kept for agree(), which
  // judges the ranks' mean against kDivergedLossRise. (Seen on LeNet at 4x the reference lr:
  // the loss climbs from 2.3 to 4.2 in 20 steps and either turns NaN or the network dies at
  // chance level.)
  Steps step(Cand& c);

  // The reason a divergence of `c` seen as `what` is given.
  std::string diverged_why(const Cand& c, const std::string& what);

  // Frees the trainers of families with no candidate in `alive`.
  void drop_idle_trainers(const std::vector<size_t>& alive);

  // Marks `c` failed with `why` and frees its family's trainer; with `family_diverged`, every
  // other candidate of its family fails too.
  void fail(Cand& c, const std::string& why, bool family_diverged = false);

  // Up to `n` steps of `c`, each one's seconds appended to `times` (optional). Every rank
  // runs all `n` unless a step breaks: a loss out of bounds is a local judgement (each rank
  // sees its own shard's loss), so the steps go on and the ranks agree afterwards (agree()).
  Steps run_steps(Cand& c, int n, std::vector<double>* times);

  // Agrees with the other ranks on `local` and fails `c` when any rank's steps failed or the
  // ranks' mean loss over the steps rose above kDivergedLossRise x the family's warm-up loss
  // (a divergence fails its family; the first agreement after the trainer is built sets that
  // loss). `values` (in/out, may be empty) are reduced with the max in the same allreduce.
  // Returns whether `c` still stands.
  //
  // A rank whose step broke stopped its steps there. When every rank's step broke alike (the
  // usual case: the same configuration runs out of memory everywhere) they all meet here. When
  // only this rank's did, the others went on into their next collectives, which this rank will
  // never join: it then waits only kBrokenWaitSteps x the slowest step seen (at least
  // kBrokenWaitMin) and returns an error, so that the job ends now (see run_trials) instead of
  // after the communication timeout.
  Result<bool> agree(Cand& c, const Steps& local, std::vector<double>* values);

  // `n` timed steps of `c`; returns the slowest rank's elapsed time since the start.
  Result<double> chunk(Cand& c, int n);

  // Each gradient bucket of `c`'s trainer reduced alone, as the trainer reduces it (its
  // algorithm and segment, in place on node-shared memory): the slowest rank's median of three
  // after a warm-up, per bucket. Once per candidate; collective (every rank measures the same
  // candidates in the same order, as they run them). Host communicators only.
  Status measure_buckets(Cand& c);

  // The record of `c` in `round`: its rate, cycles and step split since the last record.
  Record record_of(size_t i, int round);

  size_t index(const Cand& c) const { return static_cast<size_t>(&c - cands_.data()); }

  // Marks `c` not measured because the budget ran out before its first trial: it cannot win,
  // and the outcome says what the budget cut. Every rank takes this decision alike.
  void skip(Cand& c, const std::string& why);

  // Whether `n` more steps of `c` (and building its trainer first, when it is not built) end
  // within the budget, by the cost model; with nothing measured yet, whether budget is left
  // (the first candidate's cost is what the model learns from).
  bool affordable(const Cand& c, int n) const;

  // The paired comparison of candidates a and b over every cycle both ran (all rounds).
  stats::RatioInterval compare(size_t a, size_t b) const;

  // The candidate with the highest rate so far among those still standing (-1 none).
  int leader() const;

  // One cycle: `n` steps of every live candidate of `order`, building trainers as needed
  // (a candidate whose build would overrun the budget is skipped in the first round, or ends
  // the round in later ones: `*cut`). Progress events name each chunk.
  Status cycle(const std::vector<size_t>& order, int n, int done, int steps, bool* cut);
  Status extend_final(const std::vector<size_t>& order, int len);
  const recipes::Recipe& recipe_;
  comm::Communicator* world_;
  Schedule s_;
  Clock::time_point t0_;
  ProgressLog log_;
  halving::CostModel cost_;
  std::map<std::pair<size_t, int>, std::vector<std::pair<int, double>>> chunks_;
  int planned_rounds_ = 1;  // rounds halving runs when nothing fails and the budget allows
  int extra_cycles_ = 0;    // cycles added to the final round (kMaxExtraCycles)
  int skipped_ = 0;
  std::vector<Cand> cands_;
  std::vector<Family> families_;
  std::map<std::string, Dataset> data_;
  std::vector<Record> records_;
  std::vector<size_t> failed_now_;          // candidates failed in the current round
  std::optional<halving::Search> halving_;  // the search (set by run())
  double elapsed_ = 0, trial_s_ = 0, setup_s_ = 0;
  double slowest_step_s_ = 0;  // the slowest step this rank ran (agree()'s wait after a break)
  int64_t steps_run_ = 0;      // steps this rank ran (the fault injection counts them)
  int64_t fault_step_ = fault_trial_step(rank());
  int trainers_built_ = 0;
  bool timing_ = false;  // step() is running timed steps (chunk())
};

}  // namespace dltune::engine::trial_detail
