// The step-time model's gradient buckets (planning/buckets.h: what `dltune predict` charges) are
// the ones the trainer reduces, and each becomes ready when the trainer starts reducing it:
// bucket by bucket the same slice of the gradient buffer, and the node after whose backward the
// model says it is complete (GradBucket::ready_after, which the overlap timeline of
// planning/step_time.h starts it at) is the node after whose backward the running trainer
// started its allreduce (two ranks as threads, overlap on). For chains, residual networks and a
// transformer with tied embeddings, at several bucket sizes.
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/thread_communicator.h"
#include "engine/train/train_data.h"
#include "engine/train/trainer.h"
#include "planning/buckets.h"
#include "recipes/model/builtins.h"

namespace dltune {
namespace {

struct Case {
  const char* model;
  const char* data;
};

// What rank 0's trainer ran: its buckets and the node that completed each.
struct Observed {
  std::vector<engine::Bucket> buckets;
  std::vector<int> ready_after;
};

Observed train_one_step(const Case& k, uint64_t bucket_bytes) {
  engine::TrainConfig c;
  c.model = k.model;
  c.data = k.data;
  c.train_size = 64;
  c.heldout_size = 0;
  c.heldout_split = std::string(k.data).rfind("text:", 0) == 0 ? 0.1 : 0.0;
  c.per_rank_batch = 2;
  c.global_batch = 4;
  c.bucket_bytes = bucket_bytes;
  c.overlap = true;
  engine::Dataset train;
  EXPECT_TRUE(engine::load_train_data(c, &train, nullptr, 64).ok()) << k.model;
  Observed seen;
  std::mutex mu;
  Status st = comm::spawn(2, [&](comm::Communicator& comm) -> Status {
    auto t = engine::Trainer::create(c, &comm, train, nullptr);
    if (!t) return t.error();
    auto loss = (*t)->step();
    if (!loss) return loss.error();
    if (comm.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      seen.buckets = (*t)->buckets();
      seen.ready_after = (*t)->bucket_ready_nodes();
    }
    return ok_status();
  });
  EXPECT_TRUE(st.ok()) << k.model << ": " << (st.ok() ? "" : st.error().message());
  return seen;
}

TEST(Buckets, ThePredictorsBucketsAreTheTrainersAndReadyWhenItStartsThem) {
  for (const Case& k : {Case{"lenet", "synthetic"}, Case{"resnet20", "synthetic-cifar"},
                        Case{"gpt-tiny", "text:/usr/share/common-licenses/GPL-3"}}) {
    auto graph = recipes::builtin_graph(k.model, {});
    ASSERT_TRUE(graph.has_value());
    const recipes::GraphInfo info = recipes::analyze_graph(*graph);
    ASSERT_TRUE(info.ok());
    for (uint64_t bucket : {uint64_t{16} << 10, uint64_t{256} << 10, uint64_t{4} << 20}) {
      SCOPED_TRACE(std::string(k.model) + " at " + std::to_string(bucket) + " bytes");
      const Observed seen = train_one_step(k, bucket);
      const std::vector<planning::GradBucket> want = planning::gradient_buckets(info, bucket);
      ASSERT_EQ(seen.buckets.size(), want.size());
      ASSERT_EQ(seen.ready_after.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(seen.buckets[i].begin, want[i].begin) << "bucket " << i;
        EXPECT_EQ(seen.buckets[i].end, want[i].end) << "bucket " << i;
        EXPECT_EQ(seen.ready_after[i], want[i].ready_after)
            << "bucket " << i << ": the model says it is complete after node "
            << graph->nodes[static_cast<size_t>(want[i].ready_after)].name
            << ", the trainer started it after node " << seen.ready_after[i];
      }
    }
  }
}

}  // namespace
}  // namespace dltune
