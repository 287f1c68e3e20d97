#include "common/halving.h"

#include <algorithm>
#include <map>

namespace dltune::halving {

Status validate(const Options& o) {
  if (o.eta < 2)
    return invalid_input("successive halving needs eta >= 2, got " + std::to_string(o.eta));
  if (o.min_steps < 1 || o.max_steps < o.min_steps) {
    return invalid_input("successive halving needs 1 <= min_steps <= max_steps, got " +
                         std::to_string(o.min_steps) + " and " + std::to_string(o.max_steps));
  }
  if (o.warmup_steps < 0) return invalid_input("successive halving needs warmup_steps >= 0");
  if (!(o.budget_s > 0)) return invalid_input("successive halving needs a budget > 0 s");
  if (!(o.drop_below >= 0 && o.drop_below < 1)) {
    return invalid_input("successive halving needs 0 <= drop_below < 1");
  }
  return ok_status();
}

size_t survivors(size_t field, int eta) {
  const size_t e = static_cast<size_t>(eta);
  return std::min(field, std::max<size_t>(2, (field + e - 1) / e));
}

int next_steps(int steps, size_t before, size_t keep, int max_steps) {
  const long long grown = static_cast<long long>(steps) * static_cast<long long>(before) /
                          static_cast<long long>(std::max<size_t>(keep, 1));
  return static_cast<int>(std::min<long long>(max_steps, std::max<long long>(steps + 1LL, grown)));
}

Search::Search(const std::vector<Candidate>& candidates, const Options& options) : o_(options) {
  cands_.resize(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    cands_[i].work = candidates[i].work_per_step;
    cands_[i].group = candidates[i].group;
    cands_[i].failed = !candidates[i].failure.empty();
    cands_[i].failure = candidates[i].failure;
    if (!cands_[i].failed) alive_.push_back(i);
  }
  steps_ = o_.grid ? o_.max_steps : o_.min_steps;
  start_round();
}

void Search::start_round() {
  order_.clear();
  if (alive_.empty()) {
    done_ = true;
    return;
  }
  // Spread each group's members: the first of each group (in order of appearance), then the
  // second of each, and so on; a candidate then rarely runs right after a sibling, whose steps
  // left a shared model warm in the caches for it.
  std::vector<std::vector<size_t>> groups;
  std::map<size_t, size_t> group_of;
  for (size_t i : alive_) {
    auto [it, added] = group_of.try_emplace(cands_[i].group, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  std::vector<size_t> spread;
  for (size_t k = 0; spread.size() < alive_.size(); ++k) {
    for (const auto& g : groups) {
      if (k < g.size()) spread.push_back(g[k]);
    }
  }
  for (size_t k = 0; k < spread.size(); ++k) {
    order_.push_back(spread[(k + static_cast<size_t>(rounds_)) % spread.size()]);
  }
  for (size_t i : order_) {
    cands_[i].round_s = 0;
    cands_[i].round_steps = 0;
    cands_[i].aside = false;
    cands_[i].previous_round = cands_[i].last_round;
    cands_[i].last_round = rounds_;
  }
}

void Search::record(size_t i, double seconds, int steps) {
  Cand& c = cands_[i];
  c.round_s += seconds;
  c.total_s += seconds;
  c.round_steps += steps;
  c.total_steps += steps;
}

void Search::fail(size_t i, const std::string& why) {
  Cand& c = cands_[i];
  if (c.failed) return;
  c.failed = true;
  c.failure = why;
}

void Search::set_aside(size_t i) {
  Cand& c = cands_[i];
  if (c.failed || c.aside || c.last_round != rounds_ || done_) return;
  c.aside = true;
  c.last_round = c.previous_round;  // it did not run in this round
}

bool Search::within_budget(double elapsed_s, double cost_s) const {
  return elapsed_s + cost_s <= o_.budget_s;
}

double Search::estimate(const std::vector<size_t>& who, int steps, int extra) const {
  double s = 0;
  for (size_t i : who) s += (steps + extra) * round_step_s(i);
  return s;
}

void Search::end_round(double elapsed_s, bool cut_short) {
  if (done_) return;
  const size_t ran = order_.size();
  ++rounds_;
  auto dead = [&](size_t i) { return cands_[i].failed; };
  std::erase_if(alive_, dead);
  std::erase_if(reserve_, dead);
  // The set-aside leave the field and join the reserve last: behind those eliminated by
  // measurement, earlier or (inserted ahead of them below) in this round.
  for (size_t i : order_) {
    if (cands_[i].aside && !cands_[i].failed) reserve_.push_back(i);
  }
  std::erase_if(alive_, [&](size_t i) { return cands_[i].aside; });
  if (cut_short) exhausted_ = true;
  if (o_.grid || cut_short) {
    done_ = true;
    order_.clear();
    return;
  }
  if (alive_.empty() && !reserve_.empty()) {
    // Every survivor failed (the fastest are often the largest batches, whose scaled learning
    // rate diverges): the best eliminated ones run this round's trial length again, rebuilt.
    const auto n = static_cast<std::ptrdiff_t>(std::min(reserve_.size(), ran));
    alive_.assign(reserve_.begin(), reserve_.begin() + n);
    reserve_.erase(reserve_.begin(), reserve_.begin() + n);
    if (!within_budget(elapsed_s, estimate(alive_, steps_, o_.warmup_steps))) {
      exhausted_ = true;
      alive_.clear();
    }
    start_round();
    return;
  }
  if (alive_.size() <= 2) {  // the finalists have been compared (or nothing is left)
    alive_.clear();
    start_round();
    return;
  }
  // Ranked by samples over time of every step measured so far (the survivors of a round all
  // ran the same trials), which halves the noise of the short first trials.
  std::stable_sort(alive_.begin(), alive_.end(),
                   [&](size_t a, size_t b) { return rate(a) > rate(b); });
  const size_t before = alive_.size();
  size_t keep = survivors(before, o_.eta);
  while (keep > 2 && o_.drop_below > 0 &&
         rate(alive_[keep - 1]) < o_.drop_below * rate(alive_[0])) {
    --keep;
  }
  // The eliminated, best first, ahead of those eliminated in earlier rounds (measured less).
  reserve_.insert(reserve_.begin(), alive_.begin() + static_cast<std::ptrdiff_t>(keep),
                  alive_.end());
  alive_.resize(keep);
  const int next = next_steps(steps_, before, keep, o_.max_steps);
  if (!within_budget(elapsed_s, estimate(alive_, next, o_.keep_built ? 0 : o_.warmup_steps))) {
    exhausted_ = true;
    alive_.clear();
  } else {
    steps_ = next;
  }
  start_round();
}

double Search::rate(size_t i) const {
  const Cand& c = cands_[i];
  return c.total_s > 0 ? c.work * static_cast<double>(c.total_steps) / c.total_s : 0.0;
}

double Search::round_step_s(size_t i) const {
  const Cand& c = cands_[i];
  return c.round_steps > 0 ? c.round_s / static_cast<double>(c.round_steps) : 0.0;
}

int Search::winner() const {
  int last = -1;
  for (const Cand& c : cands_) {
    if (!c.failed) last = std::max(last, c.last_round);
  }
  int best = -1;
  for (size_t i = 0; i < cands_.size(); ++i) {
    const Cand& c = cands_[i];
    if (c.failed || c.last_round != last || last < 0) continue;
    if (best < 0 || rate(i) > rate(static_cast<size_t>(best))) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace dltune::halving
