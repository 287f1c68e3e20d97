#include "tuner/halving.h"

#include <algorithm>
#include <cmath>

#include "common/log.h"

namespace dltune::tuner {
namespace {

Status check(size_t count, const HalvingOptions& o) {
  if (count == 0) return invalid_input("no candidate configurations to tune");
  if (o.eta < 2) return invalid_input("successive halving needs eta >= 2");
  if (o.min_steps < 1 || o.max_steps < o.min_steps) {
    return invalid_input("successive halving needs 1 <= min_steps <= max_steps");
  }
  return ok_status();
}

}  // namespace

Result<HalvingResult> successive_halving(size_t count, const TrainingTrial& trial,
                                         const HalvingOptions& o) {
  DLTUNE_TRY(check(count, o));
  HalvingResult out;
  std::vector<HalvingEntry> entries(count);
  for (size_t i = 0; i < count; ++i) entries[i].index = i;
  std::vector<size_t> alive(count);
  for (size_t i = 0; i < count; ++i) alive[i] = i;

  int steps = o.min_steps;
  while (!alive.empty()) {
    // One round: every live candidate once, starting with a different one each round.
    for (size_t k = 0; k < alive.size(); ++k) {
      HalvingEntry& e = entries[alive[(k + static_cast<size_t>(out.rounds)) % alive.size()]];
      auto r = trial(e.index, steps);
      if (!r) {
        e.failed = true;
        e.failure = r.error().message();
        DLTUNE_LOG(kInfo, "tuner") << "candidate " << e.index << " failed: " << e.failure;
        continue;
      }
      out.cost_s += r->seconds;
      e.samples_per_s = r->samples_per_s;
      e.steps = steps;
      e.rounds_survived = out.rounds + 1;
    }
    ++out.rounds;
    std::erase_if(alive, [&](size_t i) { return entries[i].failed; });
    if (alive.size() <= 1) break;
    std::sort(alive.begin(), alive.end(), [&](size_t a, size_t b) {
      return entries[a].samples_per_s > entries[b].samples_per_s;
    });
    if (out.cost_s >= o.budget_s) {
      out.budget_exhausted = true;
      break;
    }
    const size_t keep = std::max<size_t>(1, alive.size() / static_cast<size_t>(o.eta));
    alive.resize(keep);
    if (keep == 1) break;
    steps = std::min(o.max_steps, steps * o.eta);
  }

  std::vector<HalvingEntry> ranking = entries;
  std::sort(ranking.begin(), ranking.end(), [](const HalvingEntry& a, const HalvingEntry& b) {
    if (a.failed != b.failed) return !a.failed;
    if (a.rounds_survived != b.rounds_survived) return a.rounds_survived > b.rounds_survived;
    return a.samples_per_s > b.samples_per_s;
  });
  if (ranking.front().failed) {
    std::string why;
    for (const HalvingEntry& e : ranking) {
      why += (why.empty() ? "" : "; ") + std::to_string(e.index) + ": " + e.failure;
    }
    return peer_failed("every candidate configuration failed (" + why + ")");
  }
  out.ranking = std::move(ranking);
  return out;
}

}  // namespace dltune::tuner
