// The trial search's rounds: candidates added (a failed one when its plan cannot train or does
// not fit), successive halving over them in interleaved cycles within the budget, the final
// comparison extended while the finalists' interval holds 1, and rank 0's records. The work on
// one candidate: trial_steps.cc.
#include "engine/worker/trial_search.h"

#include "common/halving_json.h"
#include "engine/graph/batch_buffers.h"
#include "engine/worker/trial_search_impl.h"

namespace dltune::engine {
namespace trial_detail {

Status Search::add(const std::string& label, const recipes::Plan& plan) {
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
    const auto it =
        s_.halving.grid ? families_.end() : std::find_if(families_.begin(), families_.end(), same);
    c.family = static_cast<size_t>(it - families_.begin());
    if (it == families_.end())
      families_.push_back(Family{plan.training, plan.parallel, nullptr, 0});
  }
  cands_.push_back(std::move(c));
  return ok_status();
}

std::optional<std::string> Search::does_not_fit(const TrainConfig& cfg, int ranks_per_node) const {
  auto graph = model_graph(cfg);
  if (!graph) return std::nullopt;
  auto stages = planning::layout_memory(*graph, layout_of(cfg, ranks()), batch_buffers);
  if (!stages) return std::nullopt;
  int worst = 0;
  const int64_t need = planning::worst_total(*stages, &worst);
  const planning::RankMemoryLimit limit = rank_memory_limit(recipe_, ranks_per_node);
  if (limit.bytes <= 0 || need <= limit.bytes) return std::nullopt;
  std::string where = cfg.stages > 1 ? " on stage " + std::to_string(worst) : "";
  return "does not fit: needs " + strings::format_bytes(static_cast<uint64_t>(need)) + " per rank" +
         where + ", over the " + strings::format_bytes(static_cast<uint64_t>(limit.bytes)) +
         " limit (" + limit.source + "); not run";
}

Status Search::reduce_max(std::vector<double>& v, std::chrono::milliseconds timeout) {
  return reduce(v, comm::ReduceOp::kMax, timeout);
}

Status Search::reduce(std::vector<double>& v, comm::ReduceOp op,
                      std::chrono::milliseconds timeout) {
  if (!world_ || world_->size() == 1) return ok_status();
  comm::AllreduceOptions o;
  o.timeout = timeout;
  return comm::allreduce(*world_, v.data(), v.data(), v.size(), comm::DataType::kF64, op, o);
}

Record Search::record_of(size_t i, int round) {
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
  r.memory_estimate = families_[c.family].memory_estimate;
  r.memory_peak = families_[c.family].memory_peak;
  c.split_compute_s = c.split_comm_s = 0;
  c.split_steps = 0;
  return r;
}

void Search::skip(Cand& c, const std::string& why) {
  c.failed = true;
  c.skipped = true;
  c.reason = why;
  halving_->fail(index(c), why);
  log_.write({{"event", "trial_skip"}, {"candidate", index(c)}, {"label", c.label}, {"why", why}});
}

bool Search::affordable(const Cand& c, int n) const {
  const double setup = trainer(c) != nullptr ? 0.0 : cost_.setup_s(c.global_batch);
  if (trainer(c) == nullptr && !cost_.knows_setup()) return halving_->within_budget(elapsed_, 0);
  return halving_->within_budget(elapsed_, setup + n * cost_.step_s(c.family, c.global_batch));
}

stats::RatioInterval Search::compare(size_t a, size_t b) const {
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

int Search::leader() const {
  int best = -1;
  for (size_t i = 0; i < cands_.size(); ++i) {
    if (cands_[i].failed || halving_->rate(i) <= 0) continue;
    if (best < 0 || halving_->rate(i) > halving_->rate(static_cast<size_t>(best))) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

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
                // The finalists' extra cycles run past the round's planned steps: the count
                // grows with them rather than reading "step 20 of 10" (issue 42).
                {"steps", std::max(steps, done + n)},
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
  std::vector<halving::TrialRecord> trials;
  for (const Record& r : records_) {
    halving::TrialRecord t;
    t.candidate = r.candidate;
    t.label = cands_[r.candidate].label;
    t.round = r.round;
    t.steps = r.steps;
    t.samples_per_s = r.sps;
    t.step_s = r.step_s;
    t.failed = r.failed;
    t.skipped = r.skipped;
    t.reason = r.reason;
    t.chunks = r.chunks;
    if (r.compute_s >= 0) t.compute_s = r.compute_s;
    if (r.comm_s >= 0) t.exposed_comm_s = r.comm_s;
    t.allreduce_s = r.allreduce_s;
    if (r.memory_estimate > 0) t.memory_estimate_bytes = r.memory_estimate;
    if (r.memory_peak > 0) t.memory_peak_bytes = r.memory_peak;
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
          {"trials", halving::trials_to_json(trials)}};
}

}  // namespace trial_detail

class TrialSearch::Impl : public trial_detail::Search {
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
