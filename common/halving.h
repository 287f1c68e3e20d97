// Successive halving: find the fastest of many training configurations without training each
// one for long (Jamieson and Talwalkar's schedule, as the recipe tuner runs it).
//
// Every live candidate runs a short trial; the best 1/eta of them by throughput over all the
// steps measured so far (samples over total time, as in training: a median would favour short
// steps on a busy machine, where a 40 ms step often runs unpreempted and a 250 ms one never
// does; rounded up, at least two) go on to trials longer by the factor the
// field shrank, so that every round costs about the same steps; the round that compares two
// finalists is the last. Within a round the candidates run in an order that spreads the members
// of a group apart and rotates every round (callers interleave the candidates in short chunks
// so that the machine's slow phases hit all alike). A candidate that fails is dropped with its
// reason; when every survivor of a round failed, the best candidates eliminated earlier run
// that round's trial length again. No round is started whose estimated cost (the candidates'
// last step times) would overrun the budget. With `grid` every candidate runs once at the
// longest trial length: the reference the search is judged against. With `drop_below` set, a
// round also drops the survivors measured clearly below its best (racing), and candidates a
// caller's model predicts out of the race can be set aside unmeasured (set_aside).
//
// This is the one implementation: the rank-side trial search (engine/worker/trial.cc) executes
// it, the tuner (tuner/recipe_tuning.cc) sizes its schedule with it, and its unit tests drive
// it with synthetic candidates. It lives in common/ because both engine/ and tuner/ use it and
// neither may include the other (DESIGN.md's dependency rule); it is pure arithmetic over
// measured times, with no knowledge of trainers, ranks or recipes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/result.h"

namespace dltune::halving {

struct Options {
  bool grid = false;       // every candidate once, at max_steps
  int eta = 4;             // keep the best 1/eta each round (rounded up, at least two)
  int min_steps = 4;       // measured steps of a first-round trial
  int max_steps = 64;      // the longest trial; the grid's trial length
  int warmup_steps = 1;    // unmeasured steps a candidate runs when it is (re)built
  bool keep_built = true;  // survivors stay built between rounds (no warm-up again)
  double budget_s = 60;    // seconds from the start of the search
  // Racing: after a round, a survivor whose rate is below drop_below x the best's goes too
  // (at least two stay), so a clearly slower candidate is not measured again for the halving's
  // quota. 0: off. Callers set it from the trials' noise (tuner/program_tuning.h).
  double drop_below = 0;
};

// Ok, or invalid_input naming the rule broken: eta >= 2, 1 <= min_steps <= max_steps,
// warmup_steps >= 0, budget_s > 0, 0 <= drop_below < 1.
Status validate(const Options& options);

// How many of a field of `field` candidates go on to the next round: ceil(field / eta), at
// least two (at most `field`). Precondition: eta >= 2.
size_t survivors(size_t field, int eta);

// The next round's trial length after a field of `before` shrank to `keep`: steps x before /
// keep (so every round costs the same steps), at least steps + 1, at most max_steps.
int next_steps(int steps, size_t before, size_t keep, int max_steps);

// One candidate as the search sees it.
struct Candidate {
  double work_per_step = 1;  // samples one step processes (its global batch): rate = work / time
  size_t group = 0;          // the round order spreads a group's members apart
  std::string failure;       // non-empty: failed before the search (it never runs)
};

// The search's state: the caller asks for a round's order and trial length, runs the trials,
// reports each candidate's measured steps (record) or failure (fail), and ends the round.
//
//   halving::Search s(candidates, options);
//   while (!s.done()) {
//     for (size_t i : s.order()) {
//       if (s.failed(i)) continue;  // failed earlier in this round (with a sibling, say)
//       ... s.record(i, seconds, steps) or s.fail(i, why) ...
//     }
//     s.end_round(elapsed_s, cut_short);
//   }
//   int best = s.winner();
class Search {
 public:
  // Precondition: validate(options) is ok. With no candidate, or none that has not failed,
  // the search is done() at once.
  Search(const std::vector<Candidate>& candidates, const Options& options);

  // True when no round is left to run: one round in grid mode, the two finalists compared,
  // every candidate failed, or the budget spent.
  bool done() const { return done_; }
  // Rounds ended so far; the current round's index.
  int rounds() const { return rounds_; }
  // The current round's trial length (measured steps per candidate).
  int steps() const { return steps_; }
  // The current round's candidates in run order: the live ones, a group's members spread apart
  // (the first of each group in order of appearance, then the second of each, ...), rotated by
  // the round's index; it is not changed by fail() during the round (callers skip failed()
  // candidates). Empty when done().
  const std::vector<size_t>& order() const { return order_; }

  // Adds `steps` measured steps taking `seconds` in total to candidate i's current round.
  void record(size_t i, double seconds, int steps);
  // Marks candidate i failed with `why` (before the first round too); it runs no more and
  // cannot win. A second call keeps the first reason.
  void fail(size_t i, const std::string& why);
  // Takes candidate i out of the current round without a trial and without failing it (a model
  // predicted it out of the race: tuner/screening.h): it does not count in the field the next
  // round's survivors are taken from, and joins the reserve behind every candidate eliminated
  // by measurement, so it runs only when every measured survivor fails. Call during a round,
  // before end_round(), for a candidate of order() that recorded no steps in it; no effect on
  // a failed candidate or outside a round.
  void set_aside(size_t i);
  bool set_aside_now(size_t i) const { return cands_[i].aside; }

  // Whether work of `cost_s` more seconds, started `elapsed_s` after the search began, ends
  // within the budget. Callers that run a round in chunks ask it before each chunk cycle and
  // end the round early (cut_short) when it says no.
  bool within_budget(double elapsed_s, double cost_s) const;
  // Ends the current round `elapsed_s` seconds after the search began and sets up the next
  // (or done()). `cut_short`: the budget ended the round before every trial ran its steps.
  void end_round(double elapsed_s, bool cut_short = false);

  // True once the budget stopped the search early (a round cut short or not started).
  bool budget_exhausted() const { return exhausted_; }
  // Samples per second over every step candidate i had measured (0 before any).
  double rate(size_t i) const;
  // Mean measured step time of candidate i in the last round it ran (0 before any), and how
  // many steps it measured there.
  double round_step_s(size_t i) const;
  int round_steps(size_t i) const { return static_cast<int>(cands_[i].round_steps); }
  bool failed(size_t i) const { return cands_[i].failed; }
  const std::string& failure(size_t i) const { return cands_[i].failure; }
  // The last round candidate i ran in (-1: none).
  int last_round(size_t i) const { return cands_[i].last_round; }
  // The winner: among the candidates that never failed and ran in the latest round any such
  // candidate ran in, the highest rate(); -1 when every candidate failed.
  int winner() const;

 private:
  struct Cand {
    double work = 0;
    size_t group = 0;
    bool failed = false;
    std::string failure;
    bool aside = false;  // set aside in the current round (set_aside)
    double total_s = 0, round_s = 0;
    long long total_steps = 0, round_steps = 0;
    int last_round = -1;
    int previous_round = -1;  // last_round before the current round began
  };
  void start_round();
  // Estimated seconds of a round of `steps` (plus `extra` unmeasured) for `who`.
  double estimate(const std::vector<size_t>& who, int steps, int extra) const;

  Options o_;
  std::vector<Cand> cands_;
  std::vector<size_t> alive_;    // this round's field, before ordering
  std::vector<size_t> reserve_;  // eliminated by halving, not failed: best first
  std::vector<size_t> order_;
  int steps_ = 0;
  int rounds_ = 0;
  bool done_ = false;
  bool exhausted_ = false;
};

}  // namespace dltune::halving
