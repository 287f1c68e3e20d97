// Distributed equivalence: P ranks in strong scaling (global batch split with remainders) end
// with the same parameters as 1 rank on the same global batch, for every allreduce algorithm
// the thread communicator supports (and the ring pipelined in the plan's segments), with overlap
// on and off; all ranks stay bitwise identical.
#include <cmath>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "comm/thread_communicator.h"
#include "engine/train/trainer.h"

namespace dltune::engine {
namespace {

constexpr int kSteps = 4;

TrainConfig config() {
  TrainConfig c;
  c.model = "lenet5";
  c.train_size = 256;
  c.heldout_size = 0;
  c.global_batch = 10;  // 3 ranks: 4 + 3 + 3
  c.lr = 0.05;
  c.steps = kSteps;
  c.seed = 3;
  c.bucket_bytes = 16 << 10;  // several buckets
  return c;
}

std::vector<float> single_rank(const Dataset& data) {
  auto t = Trainer::create(config(), nullptr, data, nullptr);
  EXPECT_TRUE(t.ok());
  for (int i = 0; i < kSteps; ++i) EXPECT_TRUE((*t)->step().ok());
  Model& m = (*t)->model();
  return {m.params(), m.params() + m.num_params()};
}

struct Case {
  int ranks;
  std::string algo;
  bool overlap;
  uint64_t segment = 0;  // the ring's segment from the plan (0: comm's default)
};

class Equivalence : public ::testing::TestWithParam<Case> {};

TEST_P(Equivalence, SameParametersAsOneRank) {
  const Case& k = GetParam();
  Dataset data = synthetic_digits(256, 3);
  static std::vector<float> reference;
  if (reference.empty()) reference = single_rank(data);
  std::vector<std::vector<float>> finals(k.ranks);
  std::vector<size_t> nbuckets(k.ranks);
  std::vector<uint64_t> segments(k.ranks);
  Status st = comm::spawn(k.ranks, [&](comm::Communicator& c) -> Status {
    TrainConfig cfg = config();
    cfg.overlap = k.overlap;
    cfg.algorithms = {{UINT64_MAX, *parse_algorithm(k.algo), k.segment}};
    auto t = Trainer::create(cfg, &c, data, nullptr);
    if (!t) return t.error();
    for (int i = 0; i < kSteps; ++i) {
      auto l = (*t)->step();
      if (!l) return l.error();
    }
    Model& m = (*t)->model();
    finals[c.rank()].assign(m.params(), m.params() + m.num_params());
    nbuckets[c.rank()] = (*t)->buckets().size();
    segments[c.rank()] = (*t)->buckets().front().segment_bytes;
    return ok_status();
  });
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_GE(nbuckets[0], 3u);
  EXPECT_EQ(segments[0], k.segment);
  ASSERT_EQ(finals[0].size(), reference.size());
  for (int r = 1; r < k.ranks; ++r) EXPECT_EQ(finals[r], finals[0]) << "rank " << r;
  double max_err = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) {
    const double err = std::abs(double{finals[0][i]} - reference[i]);
    max_err = std::max(max_err, err);
    ASSERT_LE(err, 1e-5 + 1e-5 * std::abs(reference[i])) << "param " << i;
  }
  RecordProperty("max_abs_diff", std::to_string(max_err));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int ranks : {2, 3})
    for (const char* algo : {"ring", "rd", "rabenseifner", "tree", "hier", "shm"})
      for (bool overlap : {true, false}) out.push_back({ranks, algo, overlap});
  // A ring segment far below the buckets' size, so every bucket is pipelined in many segments.
  for (int ranks : {2, 3})
    for (bool overlap : {true, false}) out.push_back({ranks, "ring", overlap, 1024});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  return std::to_string(p.param.ranks) + "ranks_" + p.param.algo +
         (p.param.segment ? "_seg" + std::to_string(p.param.segment) : "") +
         (p.param.overlap ? "_overlap" : "_blocking");
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, Equivalence, ::testing::ValuesIn(cases()), case_name);

// The recipe tuner switches one trainer between candidates' bucket sizes and overlap
// settings: every step after a switch trains as a trainer built with those settings would, so
// the parameters still match one rank's.
TEST(Distributed, SwitchingBucketsAndOverlapMidRunKeepsTheResult) {
  Dataset data = synthetic_digits(256, 3);
  const std::vector<float> reference = single_rank(data);
  std::vector<std::vector<float>> finals(3);
  std::vector<std::vector<size_t>> counts(3);
  Status st = comm::spawn(3, [&](comm::Communicator& c) -> Status {
    auto t = Trainer::create(config(), &c, data, nullptr);
    if (!t) return t.error();
    const std::pair<uint64_t, bool> settings[kSteps] = {
        {16 << 10, true}, {1 << 30, true}, {4 << 10, false}, {64 << 10, true}};
    for (const auto& [bytes, overlap] : settings) {
      DLTUNE_TRY((*t)->set_communication(bytes, overlap));
      counts[c.rank()].push_back((*t)->buckets().size());
      auto l = (*t)->step();
      if (!l) return l.error();
    }
    if ((*t)->set_communication(0, true).ok()) return internal_error("bucket_bytes 0 accepted");
    Model& m = (*t)->model();
    finals[c.rank()].assign(m.params(), m.params() + m.num_params());
    return ok_status();
  });
  ASSERT_TRUE(st.ok()) << st.error().message();
  // One bucket holding every gradient; more, smaller buckets at 4 KiB than at 16 KiB.
  EXPECT_EQ(counts[0][1], 1u);
  EXPECT_GT(counts[0][2], counts[0][0]);
  EXPECT_GT(counts[0][0], counts[0][3]);
  for (int r = 1; r < 3; ++r) EXPECT_EQ(finals[r], finals[0]) << "rank " << r;
  ASSERT_EQ(finals[0].size(), reference.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    ASSERT_LE(std::abs(double{finals[0][i]} - reference[i]), 1e-5 + 1e-5 * std::abs(reference[i]))
        << "param " << i;
  }
}

TEST(Distributed, WeakScalingUsesPerRankBatch) {
  Dataset data = synthetic_digits(256, 3);
  Status st = comm::spawn(2, [&](comm::Communicator& c) -> Status {
    TrainConfig cfg = config();
    cfg.scaling = Scaling::kWeak;
    cfg.per_rank_batch = 8;
    auto t = Trainer::create(cfg, &c, data, nullptr);
    if (!t) return t.error();
    auto l = (*t)->step();
    if (!l) return l.error();
    EXPECT_EQ((*t)->last().batch, 16);
    return ok_status();
  });
  ASSERT_TRUE(st.ok()) << st.error().message();
}

}  // namespace
}  // namespace dltune::engine
