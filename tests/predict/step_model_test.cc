// The predictor and the layout search charge one step-time model (planning/step_time.h): on the
// same inputs (each node's seconds, from a device rate; the same stages, micro-batches and
// replicas; the same allreduce bandwidth; no sends and no optimizer) `dltune predict`'s pipeline
// (planning::pipeline_step) and the layout search's candidate (planning::layout_candidates) cut
// the model at the same nodes and predict the same step. Micro-batches of 8 samples out of a
// profile of 8 M keep both sides' per-node arithmetic exact (powers of two), so the cuts
// cannot differ by rounding.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/graph/batch_buffers.h"
#include "planning/layout_search.h"
#include "planning/step_time.h"
#include "recipes/model/builtins.h"

#include "predict/compute.h"

namespace dltune {
namespace {

constexpr double kBandwidth = 2e9;  // bytes/s, the layout search's default

TEST(StepModel, PredictorAndLayoutSearchPredictTheSameStep) {
  const recipes::Graph graph = *recipes::builtin_graph("resnet20", {});
  auto model = planning::model_costs(graph, "resnet20");
  ASSERT_TRUE(model.ok());
  struct Case {
    int stages, replicas, microbatches;
  };
  for (const Case& k : {Case{2, 1, 4}, Case{4, 1, 8}, Case{2, 2, 4}, Case{3, 1, 4}}) {
    SCOPED_TRACE(std::to_string(k.replicas) + " x " + std::to_string(k.stages) + ", M " +
                 std::to_string(k.microbatches));
    const int ranks = k.stages * k.replicas;
    const int64_t replica_batch = 8 * k.microbatches;
    // One rank's compute at the replica batch: a device's rate, backward twice forward.
    const planning::ComputeProfile compute =
        predict::profile_from_rate(*model, static_cast<int>(replica_batch), 1e10, 0, "test");
    // The layout search: those seconds per sample, nothing fixed but the layout.
    planning::LayoutRequest rq;
    rq.buffers = engine::batch_buffers;
    rq.ranks = ranks;
    rq.global_batch = replica_batch;
    rq.batch_per_replica = true;
    rq.fixed.stages = k.stages;
    rq.fixed.microbatches = k.microbatches;
    rq.allreduce_bytes_per_s = kBandwidth;
    for (size_t i = 0; i < compute.forward_s.size(); ++i)
      rq.node_cost.push_back((compute.forward_s[i] + compute.backward_s[i]) /
                             static_cast<double>(replica_batch));
    rq.cost_per_second = 1.0;
    auto cands = planning::layout_candidates(graph, rq);
    ASSERT_TRUE(cands.ok()) << cands.error().message();
    ASSERT_EQ(cands->size(), 1u);
    const planning::LayoutCandidate& c = cands->front();
    // The predictor: the same compute, the same allreduce at that bandwidth.
    planning::PipelineOptions o;
    o.stages = k.stages;
    o.micro_batches = k.microbatches;
    o.ranks = ranks;
    o.per_node = ranks;
    o.replica_batch = static_cast<double>(replica_batch);
    auto p = planning::pipeline_step(
        *model, compute,
        [](double bytes, int replicas) {
          return planning::CommTime{"ring", 2.0 * bytes * (replicas - 1) / replicas / kBandwidth};
        },
        [](double, bool) { return 0.0; }, o);
    ASSERT_TRUE(p.ok()) << p.error().message();
    std::vector<std::string> cut_names;
    for (int i : p->cuts) cut_names.push_back(graph.nodes[static_cast<size_t>(i)].name);
    ASSERT_EQ(c.layout.partition.size(), static_cast<size_t>(k.stages));
    EXPECT_EQ(std::vector<std::string>(c.layout.partition.begin() + 1, c.layout.partition.end()),
              cut_names);
    EXPECT_NEAR(c.predicted_step_s, p->step_s, 1e-12 * p->step_s);
    EXPECT_GT(p->step_s, 0);
  }
}

}  // namespace
}  // namespace dltune
