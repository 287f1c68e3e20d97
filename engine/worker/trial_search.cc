#include "engine/worker/trial_search.h"

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
#include "engine/train/layout_memory.h"
#include "engine/train/recipe_config.h"
#include "engine/train/train_data.h"
#include "engine/train/trainer.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {
namespace {

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
int64_t fault_trial_step(int rank) {
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
  std::vector<std::pair<int, double>> chunks;  // (steps, seconds) of each cycle, in order
  double compute_s = -1, comm_s = -1;          // means per timed step; < 0: none
  std::vector<double> allreduce_s;             // each bucket's allreduce alone (s)
};

// A candidate that failed in `round` without a measurement.
Record failed_record(size_t candidate, int round, const std::string& reason) {
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

class Search {
 public:
  Search(const recipes::Recipe& recipe, comm::Communicator* world, Schedule s,
         const std::string& progress)
      : recipe_(recipe),
        world_(world),
        s_(s),
        t0_(Clock::now()),
        log_(world == nullptr || world->rank() == 0 ? progress : "") {}

  Status add(const std::string& label, const recipes::Plan& plan) {
    Cand c;
    c.label = label;
    auto cfg = train_config_from(recipe_, plan, ranks());
    if (!cfg) {
      c.failed = true;
      c.reason = cfg.error().message();
    } else {
      c.cfg = *cfg;
      c.cfg.metrics_path.clear();
      c.cfg.checkpoint_path.clear();
      c.cfg.trace_path.clear();
      c.global_batch = c.cfg.global_batch_for(ranks());
      // A candidate that does not fit a rank's memory is never built; it fails with why.
      if (auto why = does_not_fit(c.cfg, plan.job.ranks_per_node)) {
        c.failed = true;
        c.reason = *why;
      }
      // The grid is the reference: each candidate measured alone, as if it were the only
      // one tried, so there every candidate is a family of its own.
      auto same = [&](const Family& f) {
        return recipes::trains_alike(f.training, plan.training) &&
               recipes::same_layout(f.parallel, plan.parallel);
      };
      const auto it = s_.halving.grid ? families_.end()
                                      : std::find_if(families_.begin(), families_.end(), same);
      c.family = static_cast<size_t>(it - families_.begin());
      if (it == families_.end())
        families_.push_back(Family{plan.training, plan.parallel, nullptr, 0});
    }
    cands_.push_back(std::move(c));
    return ok_status();
  }

  Status run();
  json result() const;

 private:
  // Why `cfg` does not fit one rank's memory (rank_memory_limit(): the recipe's
  // launch.memory_per_rank, else this node's share), by the memory model of its layout's
  // largest stage; nullopt when it fits (or the model cannot tell: building will say).
  std::optional<std::string> does_not_fit(const TrainConfig& cfg, int ranks_per_node) const {
    auto graph = model_graph(cfg);
    if (!graph) return std::nullopt;
    auto stages = layout_memory(*graph, layout_of(cfg, ranks()));
    if (!stages) return std::nullopt;
    int worst = 0;
    const int64_t need = worst_total(*stages, &worst);
    const RankMemoryLimit limit = rank_memory_limit(recipe_, ranks_per_node);
    if (limit.bytes <= 0 || need <= limit.bytes) return std::nullopt;
    std::string where = cfg.stages > 1 ? " on stage " + std::to_string(worst) : "";
    return "does not fit: needs " + strings::format_bytes(static_cast<uint64_t>(need)) +
           " per rank" + where + ", over the " +
           strings::format_bytes(static_cast<uint64_t>(limit.bytes)) + " limit (" + limit.source +
           "); not run";
  }

  int ranks() const { return world_ ? world_->size() : 1; }
  int rank() const { return world_ ? world_->rank() : 0; }
  double now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  // Max (sum) over the ranks, in place (no-op alone); `timeout` 0: the communicator's.
  Status reduce_max(std::vector<double>& v, std::chrono::milliseconds timeout = {}) {
    return reduce(v, comm::ReduceOp::kMax, timeout);
  }
  Status reduce_sum(std::vector<double>& v) { return reduce(v, comm::ReduceOp::kSum, {}); }
  Status reduce(std::vector<double>& v, comm::ReduceOp op, std::chrono::milliseconds timeout) {
    if (!world_ || world_->size() == 1) return ok_status();
    comm::AllreduceOptions o;
    o.timeout = timeout;
    return comm::allreduce(*world_, v.data(), v.data(), v.size(), comm::DataType::kF64, op, o);
  }

  // Synthetic data is generated by every rank, which costs seconds for a large set; a trial's
  // step time does not depend on how many samples the sampler draws from, so trials use at
  // most max(4096, 8 x the largest global batch) of them, and of large samples (ImageNet's
  // 600 KB) no more than kTrialDataBytes' worth beyond two global batches.
  static constexpr double kTrialDataBytes = 256.0 * (1 << 20);
  Result<const Dataset*> data_for(const TrainConfig& c) {
    auto graph = model_graph(c);
    if (!graph) return graph.error();
    int64_t size = c.train_size;
    if (c.data.starts_with("synthetic")) {
      int64_t g = 0;
      for (const Cand& k : cands_) g = std::max<int64_t>(g, k.global_batch);
      double sample_bytes = 4;
      for (int64_t d : graph->input) sample_bytes *= static_cast<double>(d);
      const auto fit = static_cast<int64_t>(kTrialDataBytes / sample_bytes);
      size = std::min(
          size, std::max<int64_t>(2 * g, std::min<int64_t>(fit, std::max<int64_t>(4096, 8 * g))));
    }
    const std::string key = c.data + "|" + std::to_string(size) + "|" + std::to_string(c.seed) +
                            "|" + recipes::describe_shape(graph->input) + "|" +
                            std::to_string(c.classes);
    auto it = data_.find(key);
    if (it != data_.end()) return &it->second;
    Dataset d;
    DLTUNE_TRY(load_train_data(c, &d, nullptr, size));
    return &data_.emplace(key, std::move(d)).first->second;
  }

  Trainer* trainer(const Cand& c) const { return families_[c.family].trainer.get(); }

  // Makes the candidate's family trainer ready for its steps: builds it and runs its warm-up
  // steps when it does not exist, and switches it to the candidate's bucket size and overlap.
  // All ranks agree on failure (the candidate fails; the search goes on).
  Status prepare(Cand& c) {
    if (!trainer(c)) DLTUNE_TRY(build(c));
    if (c.failed || !trainer(c)) return ok_status();
    if (Status st = trainer(c)->set_communication(c.cfg.bucket_bytes, c.cfg.overlap); !st) {
      fail(c, st.error().message());  // the same on every rank: it depends on the config only
    }
    return ok_status();
  }

  // Builds the family trainer and runs the warm-up steps. The set-up's duration is agreed over
  // the ranks (the slowest rank's end) so that the cost model decides alike everywhere.
  Status build(Cand& c) {
    const double t = now();
    const double agreed_start = elapsed_;
    log_.write({{"event", "trial_build"},
                {"candidate", index(c)},
                {"label", c.label},
                {"round", halving_->rounds()}});
    std::string why;
    try {
      set_blas_threads(c.cfg.threads);
      auto d = data_for(c.cfg);
      if (!d) {
        why = d.error().message();
      } else {
        DLTUNE_LOG(kInfo, "tuner") << "data ready after " << now() - t << " s";
        auto tr = Trainer::create(c.cfg, world_, **d, nullptr);
        if (!tr) {
          why = tr.error().message();
        } else {
          families_[c.family].trainer = std::move(*tr);
          families_[c.family].first_loss = 0;
          ++trainers_built_;
        }
      }
    } catch (const std::bad_alloc&) {
      why = "out of memory building the trainer (batch too large?)";
    }
    std::vector<double> flag = {why.empty() ? 0.0 : 1.0, now()};
    DLTUNE_TRY(reduce_max(flag));
    elapsed_ = flag[1];
    if (flag[0] != 0) {
      fail(c, why.empty() ? "failed on another rank" : why);
    } else {
      Steps warm = run_steps(c, s_.halving.warmup_steps, nullptr);
      std::vector<double> end = {now()};
      auto stands = agree(c, warm, &end);
      if (!stands) return stands.error();
      elapsed_ = end[0];
      if (*stands) cost_.record_setup(c.global_batch, elapsed_ - agreed_start);
    }
    if (trainer(c)) trainer(c)->release_scratch();
    setup_s_ += now() - t;
    DLTUNE_LOG(kInfo, "tuner") << "candidate " << c.label << " set up in " << now() - t << " s";
    return ok_status();
  }

  // One step of `c` on its family's trainer. A loss that is not finite is a divergence: its
  // learning rate (scaled with its global batch) makes this model diverge, and a configuration
  // that cannot train must not win on throughput. A finite loss is kept for agree(), which
  // judges the ranks' mean against kDivergedLossRise. (Seen on LeNet at 4x the reference lr:
  // the loss climbs from 2.3 to 4.2 in 20 steps and either turns NaN or the network dies at
  // chance level.)
  Steps step(Cand& c) {
    Family& f = families_[c.family];
    ++steps_run_;
    const Result<double> r = [&]() -> Result<double> {
      if (fault_step_ == steps_run_) {
        return internal_error("injected step failure (" + std::string(env::kFaultTrialStep.name) +
                              ")");
      }
      try {
        return f.trainer->step(false);
      } catch (const std::bad_alloc&) {
        return internal_error("out of memory in a training step (batch too large?)");
      }
    }();
    if (!r) return {r.error().message(), true, false};
    if (timing_) {
      c.split_compute_s += f.trainer->last().compute_s;
      c.split_comm_s += f.trainer->last().comm_s;
      ++c.split_steps;
    }
    if (std::isfinite(*r)) return {"", false, false, *r, 1};
    return {diverged_why(c, "the loss is not finite"), false, true};
  }

  // The reason a divergence of `c` seen as `what` is given.
  std::string diverged_why(const Cand& c, const std::string& what) {
    return "diverged: " + what + " after " + std::to_string(trainer(c)->steps_done()) +
           " steps at global batch " + std::to_string(c.global_batch) +
           " (its learning rate is too high)";
  }

  // Frees the trainers of families with no candidate in `alive`.
  void drop_idle_trainers(const std::vector<size_t>& alive) {
    std::vector<bool> used(families_.size(), false);
    for (size_t i : alive) used[cands_[i].family] = true;
    for (size_t f = 0; f < families_.size(); ++f) {
      if (!used[f]) families_[f].trainer.reset();
    }
  }

  // Marks `c` failed with `why` and frees its family's trainer; with `family_diverged`, every
  // other candidate of its family fails too.
  void fail(Cand& c, const std::string& why, bool family_diverged = false) {
    c.failed = true;
    c.reason = why;
    failed_now_.push_back(static_cast<size_t>(&c - cands_.data()));
    if (halving_) halving_->fail(static_cast<size_t>(&c - cands_.data()), why);
    families_[c.family].trainer.reset();  // a sibling that runs again builds a fresh one
    DLTUNE_LOG(kInfo, "tuner") << "candidate " << c.label << " failed: " << why;
    // Divergence belongs to the optimisation (batch and learning-rate schedule), not to the
    // bucket or overlap setting: the whole family fails with it, eliminated members included,
    // so the search spends no more steps on it.
    if (!family_diverged) return;
    for (Cand& s : cands_) {
      if (!s.failed && s.family == c.family) {
        fail(s, "diverged, as " + c.label + " (same batch and learning rate) did");
      }
    }
  }

  // Up to `n` steps of `c`, each one's seconds appended to `times` (optional). Every rank
  // runs all `n` unless a step breaks: a loss out of bounds is a local judgement (each rank
  // sees its own shard's loss), so the steps go on and the ranks agree afterwards (agree()).
  Steps run_steps(Cand& c, int n, std::vector<double>* times) {
    Steps out;
    for (int i = 0; i < n; ++i) {
      const auto t = Clock::now();
      const Steps one = step(c);
      const double s = std::chrono::duration<double>(Clock::now() - t).count();
      slowest_step_s_ = std::max(slowest_step_s_, s);
      if (times) times->push_back(s);
      if (out.why.empty()) out.why = one.why;
      out.diverged = out.diverged || one.diverged;
      out.loss_sum += one.loss_sum;
      out.losses += one.losses;
      if (one.broken) {
        out.broken = true;
        break;
      }
    }
    return out;
  }

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
  Result<bool> agree(Cand& c, const Steps& local, std::vector<double>* values) {
    std::vector<double>& v = *values;
    v.push_back(local.broken ? 1.0 : 0.0);
    v.push_back(local.diverged ? 1.0 : 0.0);
    std::chrono::milliseconds timeout{0};
    if (local.broken && world_) {
      timeout = std::min(
          world_->timeout(),
          std::chrono::duration_cast<std::chrono::milliseconds>(std::max(
              kBrokenWaitMin, kBrokenWaitSteps * std::chrono::duration<double>(slowest_step_s_))));
    }
    if (Status st = reduce_max(v, timeout); !st) {
      if (!local.broken) return st.error();
      return peer_failed("a training step of " + c.label + " failed on rank " +
                         std::to_string(rank()) + " (" + local.why +
                         ") but not on every rank, so the ranks no longer run the same "
                         "collectives; stopping the trial search (" +
                         st.error().message() + ")");
    }
    const bool broken = v[v.size() - 2] != 0;
    bool diverged = v.back() != 0;
    v.resize(v.size() - 2);
    std::string why = local.why;
    if (!broken && !diverged) {
      std::vector<double> loss = {local.loss_sum, static_cast<double>(local.losses)};
      DLTUNE_TRY(reduce_sum(loss));
      Family& f = families_[c.family];
      const double mean_loss = loss[1] > 0 ? loss[0] / loss[1] : 0;
      if (f.first_loss <= 0) {
        f.first_loss = mean_loss;
      } else if (mean_loss > kDivergedLossRise * f.first_loss) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "the loss rose from %.3g to %.3g", f.first_loss, mean_loss);
        why = diverged_why(c, buf);
        diverged = true;
      }
      if (!diverged) return true;
    }
    if (why.empty()) {
      why = diverged ? "diverged on another rank" : "a training step failed on another rank";
    }
    fail(c, why, diverged);
    return false;
  }

  // `n` timed steps of `c`; returns the slowest rank's elapsed time since the start.
  Result<double> chunk(Cand& c, int n) {
    std::vector<double> v;
    timing_ = true;
    const Steps local = run_steps(c, n, &v);
    timing_ = false;
    v.resize(static_cast<size_t>(n), 0.0);  // a broken step ends the loop early
    v.push_back(now());
    auto stands = agree(c, local, &v);
    if (!stands) return stands.error();
    if (*stands) {
      double s = 0;
      for (int i = 0; i < n; ++i) s += v[static_cast<size_t>(i)];
      halving_->record(index(c), s, n);
      chunks_[{index(c), halving_->rounds()}].emplace_back(n, s);
      cost_.record_steps(c.family, c.global_batch, n, s);
      trial_s_ += s;
    }
    return v.back();
  }

  // Each gradient bucket of `c`'s trainer reduced alone, as the trainer reduces it (its
  // algorithm and segment, in place on node-shared memory): the slowest rank's median of three
  // after a warm-up, per bucket. Once per candidate; collective (every rank measures the same
  // candidates in the same order, as they run them). Host communicators only.
  Status measure_buckets(Cand& c) {
    c.buckets_measured = true;
    Trainer* tr = trainer(c);
    // A pipeline's stages hold different buckets, reduced among each stage's replicas only.
    if (!world_ || world_->size() < 2 || tr == nullptr || tr->on_gpu() || c.cfg.stages > 1)
      return ok_status();
    int64_t most = 1;
    for (const Bucket& b : tr->buckets()) most = std::max(most, b.end - b.begin);
    auto buf = world_->alloc_shared(static_cast<size_t>(most) * sizeof(float));
    if (!buf) return buf.error().wrap("measuring the buckets' allreduce");
    std::vector<double> times;
    for (const Bucket& b : tr->buckets()) {
      auto algo = comm::parse_algorithm(b.algorithm);
      if (!algo) {
        times.push_back(0);
        continue;
      }
      comm::AllreduceOptions o;
      o.algorithm = *algo;
      if (b.segment_bytes > 0) o.segment_bytes = b.segment_bytes;
      const size_t count = static_cast<size_t>(b.end - b.begin);
      std::vector<double> one;
      for (int k = 0; k < 4; ++k) {
        const auto t = Clock::now();
        DLTUNE_TRY(comm::allreduce(*world_, buf->data(), buf->data(), count, comm::DataType::kF32,
                                   comm::ReduceOp::kSum, o));
        if (k > 0) one.push_back(std::chrono::duration<double>(Clock::now() - t).count());
      }
      std::sort(one.begin(), one.end());
      times.push_back(one[one.size() / 2]);
    }
    DLTUNE_TRY(reduce_max(times));
    c.allreduce_s = std::move(times);
    return ok_status();
  }

  // The record of `c` in `round`: its rate, cycles and step split since the last record.
  Record record_of(size_t i, int round) {
    Cand& c = cands_[i];
    const double m = halving_->round_step_s(i);
    const auto ch = chunks_.find({i, round});
    Record r = failed_record(i, round, c.reason);
    r.failed = c.failed && !c.skipped;
    r.skipped = c.skipped;
    r.steps = halving_->round_steps(i);
    r.sps = c.failed || m <= 0 ? 0.0 : c.global_batch / m;
    r.step_s = m;
    if (ch != chunks_.end()) r.chunks = ch->second;
    if (c.split_steps > 0) {
      r.compute_s = c.split_compute_s / c.split_steps;
      r.comm_s = c.split_comm_s / c.split_steps;
    }
    r.allreduce_s = c.allreduce_s;
    c.split_compute_s = c.split_comm_s = 0;
    c.split_steps = 0;
    return r;
  }

  size_t index(const Cand& c) const { return static_cast<size_t>(&c - cands_.data()); }

  // Marks `c` not measured because the budget ran out before its first trial: it cannot win,
  // and the outcome says what the budget cut. Every rank takes this decision alike.
  void skip(Cand& c, const std::string& why) {
    c.failed = true;
    c.skipped = true;
    c.reason = why;
    halving_->fail(index(c), why);
    log_.write(
        {{"event", "trial_skip"}, {"candidate", index(c)}, {"label", c.label}, {"why", why}});
  }

  // Whether `n` more steps of `c` (and building its trainer first, when it is not built) end
  // within the budget, by the cost model; with nothing measured yet, whether budget is left
  // (the first candidate's cost is what the model learns from).
  bool affordable(const Cand& c, int n) const {
    const double setup = trainer(c) != nullptr ? 0.0 : cost_.setup_s(c.global_batch);
    if (trainer(c) == nullptr && !cost_.knows_setup()) return halving_->within_budget(elapsed_, 0);
    return halving_->within_budget(elapsed_, setup + n * cost_.step_s(c.family, c.global_batch));
  }

  // The paired comparison of candidates a and b over every cycle both ran (all rounds).
  stats::RatioInterval compare(size_t a, size_t b) const {
    std::vector<double> wa, ta, wb, tb;
    for (const auto& [key, list] : chunks_) {
      if (key.first != a) continue;
      auto other = chunks_.find({b, key.second});
      if (other == chunks_.end()) continue;
      for (size_t k = 0; k < std::min(list.size(), other->second.size()); ++k) {
        wa.push_back(static_cast<double>(list[k].first) * cands_[a].global_batch);
        ta.push_back(list[k].second);
        wb.push_back(static_cast<double>(other->second[k].first) * cands_[b].global_batch);
        tb.push_back(other->second[k].second);
      }
    }
    return stats::paired_rate_ratio(wa, ta, wb, tb);
  }

  // The candidate with the highest rate so far among those still standing (-1 none).
  int leader() const {
    int best = -1;
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (cands_[i].failed || halving_->rate(i) <= 0) continue;
      if (best < 0 || halving_->rate(i) > halving_->rate(static_cast<size_t>(best))) {
        best = static_cast<int>(i);
      }
    }
    return best;
  }

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

Status Search::cycle(const std::vector<size_t>& order, int n, int done, int steps, bool* cut) {
  const bool keep = s_.halving.keep_built;
  const int round = halving_->rounds();
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    Cand& c = cands_[i];
    if (c.failed) continue;
    if (!affordable(c, n)) {
      if (round > 0 || halving_->round_steps(i) > 0) {
        *cut = true;  // a candidate already measured: end the round here
        return ok_status();
      }
      skip(c, "not measured: the tune.budget ran out before its first trial");
      ++skipped_;
      continue;
    }
    DLTUNE_TRY(prepare(c));
    if (c.failed) continue;
    auto t = chunk(c, n);
    if (!t) return t.error();
    elapsed_ = *t;
    if (!c.failed && !c.buckets_measured) DLTUNE_TRY(measure_buckets(c));
    if (!keep) {
      families_[c.family].trainer.reset();
    } else if (trainer(c)) {
      trainer(c)->release_scratch();  // the next candidate's steps reuse its pages
    }
    const int lead = leader();
    log_.write({{"event", "trial_chunk"},
                {"round", round},
                {"rounds", planned_rounds_},
                {"candidate", i},
                {"label", c.label},
                {"position", k + 1},
                {"field", order.size()},
                {"steps_done", done + n},
                {"steps", steps},
                {"elapsed_s", elapsed_},
                {"budget_s", s_.halving.budget_s},
                {"best", lead < 0 ? std::string() : cands_[static_cast<size_t>(lead)].label},
                {"best_sps", lead < 0 ? 0.0 : halving_->rate(static_cast<size_t>(lead))}});
  }
  return ok_status();
}

// Executes halving_'s rounds: each round's candidates (its order) run in chunks of
// chunk_steps steps, cycling through them so that all see the same machine phases, until each
// ran the round's trial length; a round is cut short at a chunk boundary when the next cycle
// would end past the budget, and a candidate whose trainer could not be built and run within
// the budget is not measured (cycle()). The round that compares the two finalists goes on
// while their paired interval still holds 1 (extend_final()). Candidates that train alike
// share a trainer (Family).
Status Search::run() {
  std::vector<halving::Candidate> hc;
  size_t live = 0;
  for (size_t i = 0; i < cands_.size(); ++i) {
    const Cand& c = cands_[i];
    hc.push_back({static_cast<double>(c.global_batch), c.family, c.failed ? c.reason : ""});
    if (c.failed) records_.push_back(failed_record(i, 0, c.reason));
    live += c.failed ? 0 : 1;
  }
  // The budget as every rank sees it: the smallest left, from the slowest rank's start.
  std::vector<double> start = {now(), -s_.halving.budget_s};
  DLTUNE_TRY(reduce_max(start));
  elapsed_ = start[0];
  s_.halving.budget_s = std::max(1e-3, -start[1]);
  if (!s_.halving.grid) {
    for (size_t m = live; m > 2; m = halving::survivors(m, s_.halving.eta)) ++planned_rounds_;
  }
  halving_.emplace(hc, s_.halving);
  log_.write({{"event", "trial_start"},
              {"candidates", cands_.size()},
              {"families", families_.size()},
              {"rounds", planned_rounds_},
              {"budget_s", s_.halving.budget_s}});
  while (!halving_->done()) {
    const std::vector<size_t> order = halving_->order();
    const int steps = halving_->steps();
    const int round = halving_->rounds();
    drop_idle_trainers(order);
    const bool keep = s_.halving.keep_built;
    const int len = keep ? std::min(s_.chunk_steps, steps) : steps;
    bool cut = false;
    for (int done = 0; done < steps && !cut; done += len) {
      const int n = std::min(len, steps - done);
      const double cycle_start = trial_s_;
      DLTUNE_TRY(cycle(order, n, done, steps, &cut));
      // Stop mid-round only at a chunk boundary, so every candidate has the same steps.
      if (!cut) {
        cut = done + n < steps && !halving_->within_budget(elapsed_, trial_s_ - cycle_start);
      }
    }
    if (!cut && keep && !s_.halving.grid && order.size() <= 2) {
      DLTUNE_TRY(extend_final(order, len));
    }
    for (size_t i : order) {  // a failed one's steps before it failed count in the cost
      records_.push_back(record_of(i, round));
    }
    for (size_t i : failed_now_) {  // siblings failed with one of this round, not in it
      if (std::find(order.begin(), order.end(), i) == order.end()) {
        records_.push_back(failed_record(i, round, cands_[i].reason));
      }
    }
    failed_now_.clear();
    halving_->end_round(elapsed_, cut);
    log_.write({{"event", "trial_round"}, {"round", round}, {"rounds", planned_rounds_}});
  }
  for (Family& f : families_) f.trainer.reset();
  std::vector<double> e = {now()};
  DLTUNE_TRY(reduce_max(e));
  elapsed_ = e[0];
  return ok_status();
}

// The finalists' round, once its steps are run: while their paired interval (over every cycle
// both ran) still holds 1, another cycle of both, as long as it fits in the budget, up to
// kMaxExtraCycles. Every rank computes the same interval from the same agreed times.
Status Search::extend_final(const std::vector<size_t>& order, int len) {
  for (;;) {
    std::vector<size_t> live;
    for (size_t i : order) {
      if (!cands_[i].failed) live.push_back(i);
    }
    if (live.size() != 2) return ok_status();
    const stats::RatioInterval ci = compare(live[0], live[1]);
    log_.write({{"event", "trial_compare"},
                {"a", cands_[live[0]].label},
                {"b", cands_[live[1]].label},
                {"ratio", ci.ratio},
                {"lo", ci.lo},
                {"hi", std::isfinite(ci.hi) ? json(ci.hi) : json(nullptr)},
                {"rounds", ci.rounds},
                {"extra_cycles", extra_cycles_}});
    if (ci.significant() || extra_cycles_ >= kMaxExtraCycles) return ok_status();
    double cost = 0;
    for (size_t i : live) cost += len * cost_.step_s(cands_[i].family, cands_[i].global_batch);
    if (!halving_->within_budget(elapsed_, cost)) return ok_status();
    bool cut = false;
    DLTUNE_TRY(cycle(order, len, halving_->round_steps(live[0]), halving_->steps(), &cut));
    ++extra_cycles_;
    if (cut) return ok_status();
  }
}

json Search::result() const {
  json trials = json::array();
  for (const Record& r : records_) {
    json chunks = json::array();
    for (const auto& [n, sec] : r.chunks) chunks.push_back({n, sec});
    json t = {{"candidate", r.candidate}, {"label", cands_[r.candidate].label},
              {"round", r.round},         {"steps", r.steps},
              {"samples_per_s", r.sps},   {"step_s", r.step_s},
              {"failed", r.failed},       {"skipped", r.skipped},
              {"reason", r.reason},       {"chunks", chunks}};
    if (r.compute_s >= 0) t["compute_s"] = r.compute_s;
    if (r.comm_s >= 0) t["exposed_comm_s"] = r.comm_s;
    if (!r.allreduce_s.empty()) t["allreduce_s"] = r.allreduce_s;
    trials.push_back(std::move(t));
  }
  // The winner: among the candidates that reached the last round and never failed, the most
  // samples over time across all its trials (halving::Search::winner()).
  return {{"version", 1},
          {"ranks", world_ ? world_->size() : 1},
          {"grid", s_.halving.grid},
          {"budget_s", s_.halving.budget_s},
          {"budget_exhausted", halving_->budget_exhausted() || skipped_ > 0},
          {"skipped", skipped_},
          {"extra_cycles", extra_cycles_},
          {"winner", halving_->winner()},
          {"rounds", halving_->rounds()},
          {"tuning_s", elapsed_},
          {"trial_s", trial_s_},
          {"setup_s", setup_s_},
          {"trainers_built", trainers_built_},
          {"trials", trials}};
}

}  // namespace

class TrialSearch::Impl : public Search {
 public:
  using Search::Search;
};

TrialSearch::TrialSearch(const recipes::Recipe& recipe, comm::Communicator* world,
                         TrialSchedule schedule, const std::string& progress)
    : impl_(std::make_unique<Impl>(recipe, world, schedule, progress)) {}
TrialSearch::~TrialSearch() = default;
Status TrialSearch::add(const std::string& label, const recipes::Plan& plan) {
  return impl_->add(label, plan);
}
Status TrialSearch::run() { return impl_->run(); }
nlohmann::json TrialSearch::result() const { return impl_->result(); }

}  // namespace dltune::engine
