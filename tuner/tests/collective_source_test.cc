// CommCollectiveSource and tune_collectives over the in-process ThreadCommunicator: real
// collectives, real timing. Every rank must take identical decisions; a candidate made
// artificially slow must lose; failing candidates are recorded and the search goes on.
#include "tuner/collective_source.h"

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "comm/allreduce.h"
#include "comm/thread_communicator.h"
#include "tuner/collective_plan.h"
#include "tuner/collective_tuning.h"

namespace dltune::tuner {
namespace {

// Runs tune_collectives on `ranks` threads; returns every rank's outcome as JSON text.
std::vector<std::string> tune_on_threads(int ranks, const TuneOptions& options,
                                         int ranks_per_node = 0) {
  std::vector<std::string> out(static_cast<size_t>(ranks));
  std::mutex mu;
  Status s = comm::spawn(
      ranks,
      [&](comm::Communicator& c) -> Status {
        auto o = tune_collectives(c, options);
        if (!o) return o.error();
        std::lock_guard<std::mutex> lock(mu);
        out[static_cast<size_t>(c.rank())] = outcome_to_json(*o).dump();
        return ok_status();
      },
      ranks_per_node);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
  return out;
}

TuningOutcome parse(const std::string& text) {
  auto o = outcome_from_json(nlohmann::json::parse(text));
  EXPECT_TRUE(o.ok());
  return o.ok() ? *o : TuningOutcome{};
}

// Adds `delay` of busy work after the real algorithm (on every rank).
CustomCall slowed(comm::Algorithm algo, std::chrono::microseconds delay) {
  return [algo, delay](comm::Communicator& c, float* buf, size_t count) -> Status {
    comm::AllreduceOptions o;
    o.algorithm = algo;
    DLTUNE_TRY(comm::allreduce(c, buf, buf, count, comm::DataType::kF32, comm::ReduceOp::kSum, o));
    std::this_thread::sleep_for(delay);
    return ok_status();
  };
}

TuneOptions small_options(const std::string& strategy) {
  TuneOptions o;
  o.min_bytes = 4;
  o.max_bytes = 16 << 10;
  o.strategy = strategy;
  o.source.sample_ms = 1.0;
  o.source.budget_s = 120;
  o.source.measure.max_rounds = 12;
  return o;
}

TEST(CollectiveCandidate, ParsesNamesAndSegments) {
  auto r = parse_candidate("ring/262144");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->algo, comm::Algorithm::kRing);
  EXPECT_EQ(r->segment_bytes, 262144u);
  EXPECT_EQ(candidate_name(*r), "ring/262144");
  ASSERT_TRUE(parse_candidate("rd").ok());
  EXPECT_EQ(candidate_name(*parse_candidate("ring")), "ring");
  EXPECT_FALSE(parse_candidate("rd/4096").ok());
  auto h = parse_candidate("hier/262144");  // the ring among nodes takes segments too
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->algo, comm::Algorithm::kHierarchical);
  EXPECT_EQ(h->segment_bytes, 262144u);
  EXPECT_EQ(candidate_name(*h), "hier/262144");
  EXPECT_FALSE(parse_candidate("shm/4096").ok());
  EXPECT_FALSE(parse_candidate("ring/0").ok());
  EXPECT_FALSE(parse_candidate("ring/x").ok());
  EXPECT_FALSE(parse_candidate("rign").ok());
  EXPECT_FALSE(parse_candidate("").ok());
}

TEST(CollectiveCandidate, DefaultsDependOnTheJobShape) {
  auto one = default_candidates(1, true);
  EXPECT_NE(std::find(one.begin(), one.end(), "shm"), one.end());
  EXPECT_NE(std::find(one.begin(), one.end(), "cma"), one.end());
  EXPECT_EQ(std::find(one.begin(), one.end(), "hier"), one.end());
  EXPECT_NE(std::find(one.begin(), one.end(), "native"), one.end());
  auto two = default_candidates(2, false);
  EXPECT_EQ(std::find(two.begin(), two.end(), "shm"), two.end());
  EXPECT_EQ(std::find(two.begin(), two.end(), "cma"), two.end());
  EXPECT_NE(std::find(two.begin(), two.end(), "hier"), two.end());
  EXPECT_NE(std::find(two.begin(), two.end(), "hier/262144"), two.end());
  EXPECT_EQ(std::find(two.begin(), two.end(), "native"), two.end());
}

TEST(TuningSizes, ValidatesTheRange) {
  auto s = tuning_sizes(4, 64);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (std::vector<uint64_t>{4, 8, 16, 32, 64}));
  EXPECT_EQ(tuning_sizes(4, 100)->back(), 64u);
  EXPECT_FALSE(tuning_sizes(2, 64).ok());
  EXPECT_FALSE(tuning_sizes(12, 64).ok());
  EXPECT_FALSE(tuning_sizes(64, 32).ok());
  EXPECT_FALSE(tuning_sizes(4, (uint64_t{1} << 30) + 4).ok());
  EXPECT_TRUE(check_strategy("model").ok());
  EXPECT_FALSE(check_strategy("random").ok());
}

TEST(CommCollectiveSource, RejectsBadSizesAndCustomNames) {
  Status s = comm::spawn(2, [](comm::Communicator& c) -> Status {
    SourceOptions o;
    o.custom["bogus"] = slowed(comm::Algorithm::kRing, std::chrono::microseconds(1));
    EXPECT_FALSE(CommCollectiveSource::create(c, 1024, o).ok());
    auto src = CommCollectiveSource::create(c, 1024, SourceOptions{});
    if (!src) return src.error();
    EXPECT_FALSE((*src)->measure(6, {"ring"}).ok());
    EXPECT_FALSE((*src)->measure(2048, {"ring"}).ok());
    return ok_status();
  });
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
}

// warm_up runs each candidate twice at the size asked for, records nothing, and takes a
// failing candidate in its stride (on every rank alike); bad sizes are errors.
TEST(CommCollectiveSource, WarmUpRunsEachCandidateTwiceAndRecordsNothing) {
  std::mutex mu;
  std::map<size_t, int> calls;  // element count -> calls of "ring/4096", summed over ranks
  Status s = comm::spawn(2, [&](comm::Communicator& c) -> Status {
    SourceOptions o;
    o.custom["ring/4096"] = [&](comm::Communicator&, float*, size_t n) -> Status {
      std::lock_guard<std::mutex> lock(mu);
      ++calls[n];
      return ok_status();
    };
    o.custom["tree"] = [](comm::Communicator&, float*, size_t) -> Status {
      return internal_error("broken on purpose");
    };
    auto src = CommCollectiveSource::create(c, 4096, o);
    if (!src) return src.error();
    EXPECT_FALSE((*src)->warm_up(6, {"ring"}).ok());
    EXPECT_FALSE((*src)->warm_up(8192, {"ring"}).ok());
    Status w = (*src)->warm_up(4096, {"rd", "ring/4096", "tree"});
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message());
    EXPECT_TRUE((*src)->records().empty());
    EXPECT_FALSE((*src)->budget_exhausted());
    return ok_status();
  });
  ASSERT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
  EXPECT_EQ(calls, (std::map<size_t, int>{{1024, 4}}));  // 2 calls x 2 ranks, 4096 B
}

// Across nodes, before the search measures anything, every candidate but Open MPI's own runs
// at the largest size: the first calls a candidate sees are of the largest size. On one node
// there is no warm-up: the first call is the search's, at the smallest size.
TEST(TuneCollectives, AcrossNodesTheNetworkIsWarmedAtTheLargestSizeFirst) {
  for (const int ranks_per_node : {2, 0}) {
    SCOPED_TRACE(ranks_per_node == 0 ? "one node" : "two nodes");
    std::mutex mu;
    std::vector<size_t> order;  // element counts of "tree" calls on rank 0, in order
    TuneOptions o = small_options("model");
    o.candidates = {"rd", "tree"};
    o.source.custom["tree"] = [&](comm::Communicator& c, float* buf, size_t n) -> Status {
      if (c.rank() == 0) {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(n);
      }
      comm::AllreduceOptions ao;
      ao.algorithm = comm::Algorithm::kTree;
      return comm::allreduce(c, buf, buf, n, comm::DataType::kF32, comm::ReduceOp::kSum, ao);
    };
    auto outs = tune_on_threads(4, o, ranks_per_node);
    ASSERT_FALSE(outs[0].empty());
    EXPECT_EQ(parse(outs[0]).nodes, ranks_per_node == 0 ? 1 : 2);
    ASSERT_GE(order.size(), 3u);
    const size_t largest = o.max_bytes / 4;
    if (ranks_per_node > 0) {
      EXPECT_EQ(order[0], largest);
      EXPECT_EQ(order[1], largest);
      EXPECT_EQ(order[2], 1u);  // then the search, from the smallest size (4 B)
    } else {
      EXPECT_EQ(order[0], 1u);
    }
  }
}

// The slow rank decides: a delay on one rank only shows on every rank, identically. The delay
// (4 ms) is far above what a 64-byte allreduce of 3 threads costs even under ASan on a loaded
// 2-core machine (400 us was not: CI once measured rd alone slower than rd + 400 us).
TEST(CommCollectiveSource, EveryRankSeesTheSlowestRanksTime) {
  std::vector<Comparison> got(3);
  std::mutex mu;
  Status s = comm::spawn(3, [&](comm::Communicator& c) -> Status {
    SourceOptions o;
    o.sample_ms = 0.5;
    o.measure.max_rounds = 8;
    const int rank = c.rank();
    o.custom["ring/4096"] = [rank](comm::Communicator& cc, float* b, size_t n) -> Status {
      comm::AllreduceOptions ao;
      ao.algorithm = comm::Algorithm::kRecursiveDoubling;
      DLTUNE_TRY(comm::allreduce(cc, b, b, n, comm::DataType::kF32, comm::ReduceOp::kSum, ao));
      if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(4));
      return ok_status();
    };
    auto src = CommCollectiveSource::create(c, 4096, o);
    if (!src) return src.error();
    auto cmp = (*src)->measure(64, {"rd", "ring/4096"});
    if (!cmp) return cmp.error();
    std::lock_guard<std::mutex> lock(mu);
    got[static_cast<size_t>(rank)] = *cmp;
    return ok_status();
  });
  ASSERT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
  for (const Comparison& c : got) {
    ASSERT_EQ(c.results.size(), 2u);
    EXPECT_EQ(c.results[0].samples, got[0].results[0].samples);
    EXPECT_EQ(c.results[1].samples, got[0].results[1].samples);
    EXPECT_EQ(c.best(), 0);
    EXPECT_GT(c.results[1].summary.median, 4e-3);
  }
}

TEST(TuneCollectives, IdenticalDecisionsOnEveryRank) {
  TuneOptions o = small_options("model");
  o.candidates = {"ring", "rd", "tree", "rabenseifner"};
  auto outs = tune_on_threads(3, o);
  ASSERT_EQ(outs.size(), 3u);
  ASSERT_FALSE(outs[0].empty());
  EXPECT_EQ(outs[1], outs[0]);
  EXPECT_EQ(outs[2], outs[0]);
  TuningOutcome t = parse(outs[0]);
  EXPECT_EQ(t.ranks, 3);
  EXPECT_EQ(t.sizes.size(), 13u);  // 4 B .. 16 KiB
  for (const SizeOutcome& s : t.sizes) EXPECT_FALSE(s.chosen.empty()) << s.bytes;
  EXPECT_GT(t.tuning_s, 0);
  EXPECT_FALSE(t.measurements.empty());
}

// rd is the natural winner for small messages; slowed by 400 us it must lose everywhere.
TEST(TuneCollectives, FindsTheWinnerWhenOneAlgorithmIsMadeSlow) {
  for (const std::string strategy : {"model", "exhaustive"}) {
    TuneOptions o = small_options(strategy);
    o.max_bytes = 4 << 10;
    o.candidates = {"rd", "tree"};
    o.source.custom["rd"] =
        slowed(comm::Algorithm::kRecursiveDoubling, std::chrono::microseconds(400));
    auto outs = tune_on_threads(2, o);
    ASSERT_FALSE(outs[0].empty());
    EXPECT_EQ(outs[1], outs[0]);
    for (const SizeOutcome& s : parse(outs[0]).sizes) {
      EXPECT_EQ(s.chosen, "tree") << strategy << " at " << s.bytes << " B";
    }
    // And the other way round.
    o.source.custom.clear();
    o.source.custom["tree"] = slowed(comm::Algorithm::kTree, std::chrono::microseconds(400));
    outs = tune_on_threads(2, o);
    ASSERT_FALSE(outs[0].empty());
    for (const SizeOutcome& s : parse(outs[0]).sizes) {
      EXPECT_EQ(s.chosen, "rd") << strategy << " at " << s.bytes << " B";
      if (s.measured) {
        EXPECT_EQ(s.runner_up, "tree");
        EXPECT_GT(s.paired_ratio, 1.5);
      }
    }
  }
}

// native has no implementation on threads; ring/4096 fails on rank 1 only. Both are recorded
// as failed (on every rank) and the search goes on with the others.
TEST(TuneCollectives, FailingCandidatesAreRecordedAndSkipped) {
  TuneOptions o = small_options("exhaustive");
  o.max_bytes = 256;
  o.candidates = {"rd", "native", "ring/4096", "tree"};
  o.source.custom["ring/4096"] = [](comm::Communicator& c, float*, size_t) -> Status {
    if (c.rank() == 1) return io_error("injected failure on rank 1");
    return ok_status();
  };
  auto outs = tune_on_threads(2, o);
  ASSERT_FALSE(outs[0].empty());
  TuningOutcome t = parse(outs[0]);
  for (const SizeOutcome& s : t.sizes) {
    EXPECT_TRUE(s.chosen == "rd" || s.chosen == "tree") << s.chosen;
  }
  int native_failed = 0, ring_failed = 0;
  for (const MeasuredPoint& p : t.measurements) {
    if (p.candidate == "native" && p.failed) ++native_failed;
    if (p.candidate == "ring/4096" && p.failed) {
      ++ring_failed;
      EXPECT_FALSE(p.reason.empty());
    }
  }
  EXPECT_EQ(native_failed, 7);  // 4 B .. 256 B
  EXPECT_EQ(ring_failed, 7);
  EXPECT_EQ(t.failures.size(), 14u);
}

// Slow trials keep the budget large against scheduling noise: with 50 ms and fast trials, a
// loaded CI machine (ASan, both cores busy) once spent it before the first size. A 10 ms tree
// trial makes a size cost ~0.15 s, so 0.5 s measures the first sizes and stops long before
// the 13th.
TEST(TuneCollectives, BudgetStopsEarlyAndKeepsWhatWasMeasured) {
  TuneOptions o = small_options("exhaustive");
  o.candidates = {"rd", "tree"};
  o.source.custom["tree"] = slowed(comm::Algorithm::kTree, std::chrono::microseconds(10000));
  o.source.measure.target_rel_ci = 1e-12;  // every size runs max_rounds (12)
  o.source.budget_s = 0.5;
  auto outs = tune_on_threads(2, o);
  ASSERT_FALSE(outs[0].empty());
  EXPECT_EQ(outs[1], outs[0]);
  TuningOutcome t = parse(outs[0]);
  EXPECT_TRUE(t.budget_exhausted);
  ASSERT_EQ(t.sizes.size(), 13u);
  EXPECT_TRUE(t.sizes.front().measured);
  EXPECT_FALSE(t.sizes.back().measured);
  for (const SizeOutcome& s : t.sizes) EXPECT_FALSE(s.chosen.empty());
}

// A comparison that would run for a second stops within about one trial of a 0.3 s budget,
// on every rank after the same trial (identical outcomes); the sizes not reached are marked.
TEST(TuneCollectives, BudgetIsAgreedAndCheckedAfterEveryTrial) {
  TuneOptions o = small_options("exhaustive");
  o.candidates = {"rd", "tree"};
  o.source.custom["tree"] = slowed(comm::Algorithm::kTree, std::chrono::microseconds(20000));
  o.source.measure.max_rounds = 60;        // ~1.3 s per size if nothing stopped it
  o.source.measure.target_rel_ci = 1e-12;  // never converges early
  o.source.budget_s = 0.3;
  auto outs = tune_on_threads(2, o);
  ASSERT_FALSE(outs[0].empty());
  EXPECT_EQ(outs[1], outs[0]);
  TuningOutcome t = parse(outs[0]);
  EXPECT_TRUE(t.budget_exhausted);
  EXPECT_GE(t.tuning_s, 0.3);
  // One tree trial is ~20 ms; a check only after each size (~1.3 s) would overrun by far more
  // than this margin, which leaves room for a loaded CI machine.
  EXPECT_LT(t.tuning_s, 0.3 + 0.3);
  ASSERT_EQ(t.sizes.size(), 13u);
  EXPECT_TRUE(t.sizes.front().measured);
  EXPECT_EQ(t.sizes.front().chosen, "rd");
  EXPECT_TRUE(t.sizes.back().extrapolated);
  for (const SizeOutcome& s : t.sizes) {
    EXPECT_EQ(s.chosen, "rd") << s.bytes;
    EXPECT_NE(s.measured, s.extrapolated) << s.bytes;  // exhaustive: measured or not reached
  }
  auto plan = plan_from_outcome(t);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_NE(plan->provenance.reason.find("not reached"), std::string::npos)
      << plan->provenance.reason;
  EXPECT_NE(format_outcome(t).find("^"), std::string::npos);
}

TEST(TuneCollectives, VerifyComparesWithTheOracle) {
  TuneOptions o = small_options("model");
  o.max_bytes = 1024;
  o.candidates = {"rd", "tree"};
  o.verify = true;
  o.source.custom["tree"] = slowed(comm::Algorithm::kTree, std::chrono::microseconds(400));
  auto outs = tune_on_threads(2, o);
  ASSERT_FALSE(outs[0].empty());
  TuningOutcome t = parse(outs[0]);
  ASSERT_TRUE(t.verify.has_value());
  ASSERT_EQ(t.verify->rows.size(), t.sizes.size());
  for (const VerifyRow& r : t.verify->rows) {
    EXPECT_EQ(r.oracle, "rd");
    EXPECT_DOUBLE_EQ(r.vs_oracle, 1.0);
  }
  // The smallest size is a probe: the search measured both candidates there as well.
  EXPECT_EQ(t.sizes.front().measured_candidates.size(), 2u);
  EXPECT_TRUE(t.verify->rows.front().searched_all);
  EXPECT_DOUBLE_EQ(t.verify->worst_where_searched_all, 1.0);
  EXPECT_GT(t.verify->exhaustive_s, 0);
  EXPECT_GT(t.verify->cost_fraction, 0);
  EXPECT_DOUBLE_EQ(t.verify->worst_vs_oracle, 1.0);
}

TEST(TuneCollectives, RejectsBadOptions) {
  Status s = comm::spawn(1, [](comm::Communicator& c) -> Status {
    TuneOptions o;
    o.min_bytes = 3;
    EXPECT_FALSE(tune_collectives(c, o).ok());
    o.min_bytes = 4;
    o.strategy = "guess";
    EXPECT_FALSE(tune_collectives(c, o).ok());
    return ok_status();
  });
  EXPECT_TRUE(s.ok());
}

}  // namespace
}  // namespace dltune::tuner
