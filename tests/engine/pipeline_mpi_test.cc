// Pipeline equivalence with ranks as processes over MPI: run under mpirun -np 6 (ctest does).
// The whole matrix of layouts: a deep MLP with dropout, resnet20 (batch norm, residual blocks)
// and a GPT whose embedding is tied to its head; GPipe, 1F1B and async; 2 and 3 stages; 1 and 2
// replicas (M = 4 and 2 micro-batches each); with and without recomputation: 72 layouts.
//
// Each test splits the world into the layout's first S x R ranks (the others go on to the next
// test's split and wait there). Every rank trains its stage for kSteps steps and checks, against
// references it computes itself (cached per network):
// - the loss of every step equals one rank's with R x M micro-batches on the same global batch
//   (gradient accumulation), within 1e-5 relative;
// - its parameters and batch-norm statistics equal, tensor by tensor, one rank's (R = 1) or
//   the same replica's of plain data parallelism over R ranks (R = 2: its gradients are summed
//   in the same order; pipeline_test says why one rank's order is not the yardstick there);
//   and the stages of each replica together hold every tensor once (a sum over the layout);
// - the replicas of a stage hold bitwise identical parameters (the maximum and the minimum
//   over the stage's replicas are equal);
// - GPT: the head's copy of the embedding, sent from the last stage, equals the first's.
// Every process runs every test under gtest; only rank 0 prints. Failures anywhere make every
// process exit 1.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "comm/allreduce.h"
#include "comm/mpi_communicator.h"
#include "engine/train/trainer.h"

#include "tests/engine/pipeline_nets.h"

namespace dltune::engine {
namespace {

using namespace pipeline_testing;

comm::Communicator* g_world = nullptr;

struct Case {
  std::string net;
  std::string schedule;
  int stages, replicas;
  bool recompute;
  int microbatches() const { return replicas == 1 ? 4 : 2; }  // R x M = 4 on every layout
};

void PrintTo(const Case& k, std::ostream* os) {
  *os << k.net << ", " << k.stages << " stages x " << k.replicas << " replicas, "
      << k.microbatches() << " micro-batches, " << k.schedule << (k.recompute ? ", recompute" : "");
}

std::vector<Case> matrix() {
  std::vector<Case> out;
  for (const char* net : {"deep-mlp", "resnet20", "gpt"})
    for (const char* schedule : {"gpipe", "1f1b", "async"})
      for (int stages : {2, 3})
        for (int replicas : {1, 2})
          for (bool recompute : {false, true})
            out.push_back({net, schedule, stages, replicas, recompute});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  const Case& k = i.param;
  return (k.net == "deep-mlp" ? std::string("deep_mlp") : k.net) + "_S" + std::to_string(k.stages) +
         "R" + std::to_string(k.replicas) + "_" + (k.schedule == "1f1b" ? "onefoneb" : k.schedule) +
         (k.recompute ? "_recompute" : "");
}

// A network and its references: one rank with 4 micro-batches, and data parallelism over 2
// ranks (threads in this process) with 2 micro-batches each.
struct References {
  Net net;
  Trained one;
  std::vector<Trained> dp;
};

const References& references(const std::string& name) {
  static std::map<std::string, std::unique_ptr<References>> cache;
  std::unique_ptr<References>& r = cache[name];
  if (!r) {
    r.reset(new References{net(name), {}, {}});
    r->one = one_rank(r->net, 4);
    r->dp = data_parallel(r->net, 2, 2);
  }
  return *r;
}

comm::AllreduceOptions native() {
  comm::AllreduceOptions o;
  o.algorithm = comm::Algorithm::kNative;
  return o;
}

// On ranks other than 0 (whose default printer reports everything): each failed assertion and
// failed test, prefixed with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "rank %d: %s:%d: Failure\n%s\n", rank_,
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    if (t.result()->Failed())
      std::fprintf(stderr, "rank %d: [  FAILED  ] %s.%s\n", rank_, t.test_suite_name(), t.name());
  }

 private:
  int rank_;
};

class PipelineOverMpi : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineOverMpi, SameParametersAndLossesAsOneRank) {
  const Case& k = GetParam();
  comm::Communicator& world = *g_world;
  const int S = k.stages, R = k.replicas, ranks = S * R;
  ASSERT_GE(world.size(), ranks) << "run under mpirun -np 6";
  auto sub = world.split(world.rank() < ranks ? 0 : comm::kUndefined, world.rank());
  ASSERT_TRUE(sub.ok()) << sub.error().message();
  if (!*sub) return;  // not part of this layout
  comm::Communicator& c = **sub;
  const References& ref = references(k.net);
  const int stage = c.rank() % S, replica = c.rank() / S;
  const std::string where = "on stage " + std::to_string(stage) + " of replica " +
                            std::to_string(replica) + " (rank " + std::to_string(c.rank()) + ")";

  TrainConfig cfg = ref.net.config;
  cfg.stages = S;
  cfg.partition = partition(cfg, S);
  cfg.microbatches = k.microbatches();
  cfg.pipeline_schedule = *recipes::parse_schedule(k.schedule);
  cfg.recompute = k.recompute;
  cfg.bucket_bytes = 4 << 10;  // several buckets per stage
  auto t = Trainer::create(cfg, &c, ref.net.train, nullptr);
  ASSERT_TRUE(t.ok()) << t.error().message();
  Trained got;
  Status st = train(**t, got);
  ASSERT_TRUE(st.ok()) << st.error().message();

  ASSERT_EQ(got.losses.size(), ref.one.losses.size());
  for (size_t i = 0; i < got.losses.size(); ++i)
    EXPECT_NEAR(got.losses[i], ref.one.losses[i], 1e-5 * std::abs(ref.one.losses[i]))
        << where << " step " << i;

  const Trained& want = R == 1 ? ref.one : ref.dp[static_cast<size_t>(replica)];
  int64_t found[2] = {compare_named(want.tensors, got.tensors, where),
                      compare_named(want.state, got.state, where)};
  st = comm::allreduce(c, found, found, 2, comm::DataType::kI64, comm::ReduceOp::kSum, native());
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(found[0], int64_t{R} * static_cast<int64_t>(want.tensors.size()))
      << "parameter tensors held over the stages";
  EXPECT_EQ(found[1], int64_t{R} * static_cast<int64_t>(want.state.size()))
      << "state tensors held over the stages";

  // The replicas of this stage: bitwise identical parameters.
  auto stage_group = c.split(stage, c.rank());
  ASSERT_TRUE(stage_group.ok()) << stage_group.error().message();
  std::vector<float> hi(got.params.size()), lo(got.params.size());
  for (auto [out, op] : {std::pair{&hi, comm::ReduceOp::kMax}, {&lo, comm::ReduceOp::kMin}}) {
    st = comm::allreduce(**stage_group, got.params.data(), out->data(), got.params.size(),
                         comm::DataType::kF32, op, native());
    ASSERT_TRUE(st.ok()) << st.error().message();
  }
  EXPECT_EQ(hi, got.params) << where << ": the replicas differ";
  EXPECT_EQ(lo, got.params) << where << ": the replicas differ";

  if (k.net == "gpt") {  // the head's copy of the embedding stayed equal to it
    auto tensor = [&](const char* name) {
      for (const auto& [n, v] : got.tensors)
        if (n == name) return v;
      return std::vector<float>{};
    };
    constexpr int kTag = 7;
    if (stage == S - 1) {
      const std::vector<float> copy = tensor("lm_head.weight");
      ASSERT_FALSE(copy.empty()) << where;
      st = c.send(replica * S, kTag, copy.data(), copy.size() * sizeof(float),
                  c.deadline_from_now());
      ASSERT_TRUE(st.ok()) << st.error().message();
    } else if (stage == 0) {
      const std::vector<float> owner = tensor("wte.weight");
      ASSERT_FALSE(owner.empty()) << where;
      std::vector<float> copy(owner.size());
      st = c.recv(replica * S + S - 1, kTag, copy.data(), copy.size() * sizeof(float),
                  c.deadline_from_now());
      ASSERT_TRUE(st.ok()) << st.error().message();
      EXPECT_EQ(copy, owner) << "the head's copy of the embedding, replica " << replica;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, PipelineOverMpi, ::testing::ValuesIn(matrix()), case_name);

}  // namespace
}  // namespace dltune::engine

int main(int argc, char** argv) {
  using namespace dltune;
  ::testing::InitGoogleTest(&argc, argv);
  auto world = comm::create_mpi_world();
  if (!world) {
    std::fprintf(stderr, "FAIL: %s\n", world.error().message().c_str());
    return 1;
  }
  // A rank that fails early must not stall the others for long.
  (*world)->set_timeout(std::chrono::seconds(60));
  engine::g_world = world->get();
  if ((*world)->rank() != 0) {  // one report, rank 0's; the others print only failures
    ::testing::TestEventListeners& l = ::testing::UnitTest::GetInstance()->listeners();
    delete l.Release(l.default_result_printer());
    l.Append(new engine::FailurePrinter((*world)->rank()));
  }
  int64_t failed = RUN_ALL_TESTS() != 0;
  Status st = comm::allreduce(**world, &failed, &failed, 1, comm::DataType::kI64,
                              comm::ReduceOp::kMax, engine::native());
  if (!st) std::fprintf(stderr, "FAIL: %s\n", st.error().message().c_str());
  engine::g_world = nullptr;
  world->reset();
  comm::mpi_finalize();
  return (!st || failed) ? 1 : 0;
}
