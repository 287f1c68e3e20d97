// planning/model_costs.h, buckets.h, step_time.h and predict/compute.h, predict.h on the
// built-in models: the bucket order, the compute sources, the overlap of buckets with backward,
// the pipeline model's bubble, and the scaling predictions' invariants.
#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "planning/buckets.h"
#include "planning/model_costs.h"
#include "planning/step_time.h"
#include "recipes/model/builtins.h"
#include "recipes/model/partition.h"

#include "predict/compute.h"
#include "predict/devices.h"
#include "predict/predict.h"
#include "predict/tests/builtin_costs.h"

namespace dltune::predict {
namespace {

using planning::AllreduceCost;
using planning::gradient_buckets;

ModelCosts costs(const std::string& name) { return test_models::builtin_costs(name); }

// A prediction's compute as sharing cores slows it, without what communication beside it took
// (planning/overlap.h), and the rest of its step: every cost of communicating.
double own_compute(const Prediction& p) { return p.compute_s - p.compute_slowed_s; }
double comm_cost(const Prediction& p) { return p.step_s - own_compute(p); }

TEST(ModelCosts, PerNodeFlopsAndParametersAddUp) {
  const ModelCosts m = costs("resnet50");
  EXPECT_EQ(m.parameters, 25557032);
  double flops = 0;
  int64_t params = 0;
  for (int i = 0; i < m.nodes(); ++i)
    flops += m.flops[static_cast<size_t>(i)], params += m.param_floats[static_cast<size_t>(i)];
  EXPECT_NEAR(flops, m.flops_per_sample, 1e-6 * flops);
  EXPECT_EQ(params, m.parameters);
  // ResNet-50 is about 4.1 G multiply-adds per 224x224 image.
  EXPECT_NEAR(m.flops_per_sample / 2, 4.1e9, 0.15e9);
}

TEST(ModelCosts, BucketsCoverTheGradientInBackwardOrder) {
  const ModelCosts m = costs("resnet20");
  for (uint64_t bytes : {uint64_t{1}, uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{1} << 40}) {
    const auto b = gradient_buckets(m.info, bytes);
    ASSERT_FALSE(b.empty());
    int64_t floats = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      floats += b[i].floats();
      if (i > 0) {
        EXPECT_LE(b[i].ready_after, b[i - 1].ready_after);  // backward runs in reverse
      }
    }
    EXPECT_EQ(floats, m.parameters) << bytes;
    if (bytes >= (uint64_t{1} << 40)) {
      EXPECT_EQ(b.size(), 1u);
    }
  }
  // Smaller buckets, more of them.
  EXPECT_GT(gradient_buckets(m.info, 16 << 10).size(), gradient_buckets(m.info, 1 << 20).size());
}

TEST(Compute, ThroughputSourceTakesBatchOverSps) {
  const ModelCosts m = costs("resnet50");
  const ComputeProfile p = profile_from_throughput(m, 32, 200, 0.01, "test");
  EXPECT_NEAR(p.step_s(), 32.0 / 200, 1e-9);
  EXPECT_NEAR(p.backward_total(), 2 * p.forward_total(), 1e-9);
  EXPECT_NEAR(single_device_sps(p), 200, 1e-6);
  const ComputeProfile q = at_batch(p, 64);
  EXPECT_NEAR(q.forward_total(), 2 * p.forward_total(), 1e-12);
  EXPECT_EQ(q.optimizer_s, p.optimizer_s);
}

TEST(Compute, DeviceRateAndUnknownDevices) {
  auto d = find_device("h100");
  ASSERT_TRUE(d.ok());
  const ModelCosts m = costs("resnet50");
  const ComputeProfile p = profile_from_rate(m, 32, d->effective_flops(false), 0, "h100");
  EXPECT_NEAR(p.forward_total() + p.backward_total(),
              3 * m.flops_per_sample * 32 / d->effective_flops(false), 1e-9);
  auto bad = find_device("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().exit_code(), 2);
  EXPECT_NE(bad.error().message().find("h200"), std::string::npos);
}

TEST(Compute, ProfileJsonIsChecked) {
  const ModelCosts m = costs("lenet");
  nlohmann::json j = {{"batch", 8},
                      {"forward_s", std::vector<double>(m.flops.size(), 1e-3)},
                      {"backward_s", std::vector<double>(m.flops.size(), 2e-3)},
                      {"optimizer_s", 1e-3},
                      {"step_s", 0.05}};
  auto p = profile_from_json(j, m, "measured");
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->step_s(), 0.05, 1e-12);
  j["forward_s"] = std::vector<double>(2, 0.0);
  EXPECT_FALSE(profile_from_json(j, m, "measured").ok());
}

// An allreduce costing `s` seconds whatever its size (and nothing for the loss scalar).
AllreduceCost constant(double s) {
  return [s](double bytes) { return CommTime{"ring", bytes > 64 ? s : 0}; };
}

TEST(Step, OverlapHidesWhatFitsUnderBackward) {
  const ModelCosts m = costs("resnet20");
  const ComputeProfile c = profile_from_throughput(m, 64, 640, 0, "test");  // 100 ms a step
  DataParallelOptions o;
  o.bucket_bytes = 16 << 10;
  const int buckets = static_cast<int>(gradient_buckets(m.info, o.bucket_bytes).size());
  // Tiny buckets: everything but the last one hides; the last waits after backward.
  const StepPrediction fast = planning::data_parallel_step(m, c, constant(1e-5), o);
  EXPECT_EQ(fast.buckets, buckets);
  EXPECT_NEAR(fast.exposed_comm_s, 1e-5, 1e-9);
  EXPECT_NEAR(fast.comm_s, buckets * 1e-5, 1e-12);
  // Without overlap every bucket is exposed; when communication time-shares the compute's core,
  // the step is the same serial sum, part of it as compute slowed.
  o.overlap = false;
  const StepPrediction serial = planning::data_parallel_step(m, c, constant(1e-3), o);
  EXPECT_NEAR(serial.exposed_comm_s, buckets * 1e-3, 1e-9);
  o.overlap = true;
  o.interference = planning::Interference::constant(1, 1, "communication time-shares the core");
  const StepPrediction shared = planning::data_parallel_step(m, c, constant(1e-3), o);
  EXPECT_NEAR(shared.step_s, serial.step_s, 1e-12);
  EXPECT_GT(shared.compute_slowed_s, 0);
  EXPECT_NEAR(shared.compute_slowed_s + shared.exposed_comm_s, buckets * 1e-3, 1e-9);
  // Communication longer than backward is exposed by the difference at least.
  o.interference = {};
  const StepPrediction slow = planning::data_parallel_step(m, c, constant(1), o);
  EXPECT_GT(slow.exposed_comm_s, buckets * 1.0 - c.backward_total());
  EXPECT_NEAR(slow.step_s, slow.compute_s + slow.exposed_comm_s, 1e-12);
}

TEST(Step, PipelineBubbleIsGpipes) {
  const ModelCosts m = costs("resnet20");
  const ComputeProfile c = profile_from_throughput(m, 32, 320, 0, "test");
  PipelineOptions o;
  o.stages = 4;
  o.micro_batches = 16;
  o.ranks = 4;
  o.per_node = 4;
  auto step = planning::pipeline_step(
      m, c,
      [](double, int) {
        return CommTime{"ring", 0};
      },
      [](double, bool) { return 0.0; }, o);
  ASSERT_TRUE(step.ok()) << step.error().message();
  const StepPrediction& s = *step;
  EXPECT_NEAR(s.bubble, 3.0 / 19.0, 1e-12);
  // Four stages with no communication: at best a quarter of the replica's work per stage.
  const double replica_work = c.forward_total() * 4 + c.backward_total() * 4;
  EXPECT_GE(s.step_s, replica_work / 4 * 19.0 / 16.0 * 0.999);
  EXPECT_NE(s.layout.find("4 stages x 1 replica,"), std::string::npos);
}

// Without a plan's cuts, the stages are cut where the engine can cut them (one tensor crossing:
// between ResNet blocks, never inside one), balanced on compute; a stage count beyond the
// model's cut points is an error, and predict_scaling() leaves it out.
TEST(Step, PipelineCutsOnlyWhereOneTensorCrosses) {
  const ModelCosts m = costs("resnet20");
  const ComputeProfile c = profile_from_throughput(m, 32, 320, 0, "test");
  const std::vector<int> allowed = recipes::cut_points(m.info);
  ASSERT_GE(allowed.size(), 3u);
  auto no_comm = [](double, int) { return CommTime{"ring", 0}; };
  auto no_send = [](double, bool) { return 0.0; };
  PipelineOptions o;
  o.stages = 4;
  o.micro_batches = 16;
  o.ranks = 4;
  o.per_node = 4;
  auto s = planning::pipeline_step(m, c, no_comm, no_send, o);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(s->cuts.size(), 3u);
  for (int k : s->cuts)
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), k), allowed.end()) << m.node_names[k];
  // A slot is the slowest stage's micro-batch (8 of the profile's 32 samples): at least a
  // quarter of the work, and, the nine blocks being nearly equal, at most three of them.
  double work = 0;
  for (size_t i = 0; i < c.forward_s.size(); ++i) work += c.forward_s[i] + c.backward_s[i];
  const double slot = (s->compute_s - (c.optimizer_s + c.other_s) / 4) / 19.0;
  EXPECT_GE(slot, work * 8 / 32 / 4 * 0.999);
  EXPECT_LE(slot, work * 8 / 32 / 3 * 1.1);
  o.stages = o.ranks = static_cast<int>(allowed.size()) + 2;  // more stages than cut points
  o.per_node = o.ranks;
  auto too_many = planning::pipeline_step(m, c, no_comm, no_send, o);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.error().message().find("where one tensor crosses"), std::string::npos)
      << too_many.error().message();
  // The scaling prediction's pipeline names its cuts, all of them allowed ones.
  PredictRequest r;
  r.model = m;
  r.compute = c;
  r.per_node = 4;
  r.nodes = {1};
  r.parallel = Parallel::kPipeline;
  auto p = predict_scaling(r);
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ((*p)[0].partition.size(), 3u) << (*p)[0].layout;
  for (const std::string& name : (*p)[0].partition) {
    const auto it = std::find(m.node_names.begin(), m.node_names.end(), name);
    ASSERT_NE(it, m.node_names.end()) << name;
    const int k = static_cast<int>(it - m.node_names.begin());
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), k), allowed.end()) << name;
  }
  EXPECT_EQ(predictions_to_json(*p)["predictions"][0]["partition"].size(), 3u);
}

// A plan's own pipeline: its cuts and its replica batch, not the model's balanced choice. Two
// stages cut after the first node (the stem alone on stage 0): stage 1 holds the rest of the
// work, so the step is (M + 1) slots of nearly the whole model's micro-batch time.
TEST(Predict, APlansOwnPipelineKeepsItsCutsAndBatch) {
  PredictRequest r;
  r.model = costs("resnet20");
  r.compute = profile_from_throughput(r.model, 8, 320, 0, "test");  // at the micro-batch
  r.per_node = 4;
  PipelineLayout l;
  l.stages = 2;
  l.microbatches = 8;
  l.replica_batch = 64;  // micro-batches of 8: the profile's batch
  l.cuts = {1};
  auto p = predict_pipeline_layout(r, 1, l);
  ASSERT_TRUE(p.ok()) << p.error().message();
  double rest = 0;
  for (size_t i = 1; i < r.compute.forward_s.size(); ++i)
    rest += r.compute.forward_s[i] + r.compute.backward_s[i];
  EXPECT_GE(p->compute_s, 9 * rest * 0.999);
  EXPECT_NEAR(p->throughput_sps, 64.0 * 2 / p->step_s, 1e-9);  // 2 replicas of 64
  EXPECT_NE(p->layout.find("2 stages x 2 replicas, 8 micro-batches"), std::string::npos)
      << p->layout;
  l.cuts.clear();  // balanced: faster than the stem-only cut
  auto balanced = predict_pipeline_layout(r, 1, l);
  ASSERT_TRUE(balanced.ok());
  EXPECT_LT(balanced->step_s, p->step_s * 0.7);
  l.stages = 3;  // 3 does not divide 4 ranks
  EXPECT_FALSE(predict_pipeline_layout(r, 1, l).ok());
}

TEST(Predict, EfficiencyIsOneAloneAndFallsWithTheNetwork) {
  PredictRequest r;
  r.model = costs("resnet50");
  r.compute = profile_from_throughput(r.model, 32, 1000, 0, "test");
  r.per_node = 8;
  r.nodes = {1, 8, 64, 1024};
  r.comm.fabric.intra = {1e-6, 1 / 300e9, 0};
  r.comm.fabric.inter = {10e-6, 1 / 5e9, 0};
  r.comm.algorithms = nccl_algorithms();
  auto p = predict_scaling(r);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 4u);
  for (size_t i = 0; i < p->size(); ++i) {
    const Prediction& x = (*p)[i];
    EXPECT_EQ(x.ranks, x.nodes * 8);
    EXPECT_LE(x.scaling_efficiency, 1.0 + 1e-9);
    EXPECT_NEAR(x.throughput_sps, 32.0 * x.ranks / x.step_s, 1e-6 * x.throughput_sps);
    if (i > 0) {
      EXPECT_LE(x.scaling_efficiency, (*p)[i - 1].scaling_efficiency + 1e-9);
    }
  }
  r.per_node = 1;
  r.nodes = {1};
  auto one = predict_scaling(r);
  ASSERT_TRUE(one.ok());
  EXPECT_NEAR((*one)[0].scaling_efficiency, 1.0, 1e-9);
  EXPECT_EQ((*one)[0].algorithm, "none");
  const nlohmann::json j = predictions_to_json(*p);
  for (const char* k : {"nodes", "ranks", "step_ms", "compute_ms", "exposed_comm_ms",
                        "throughput_sps", "scaling_efficiency", "algorithm"}) {
    EXPECT_TRUE(j["predictions"][0].contains(k)) << k;
  }
}

TEST(Predict, BadNodeCountsAreRefused) {
  PredictRequest r;
  r.model = costs("lenet");
  r.compute = profile_from_throughput(r.model, 8, 100, 0, "test");
  r.nodes = {2, 0};
  auto p = predict_scaling(r);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().exit_code(), 2);
  EXPECT_FALSE(parse_parallel("model").ok());
}

// Two namespace "nodes" of 2 ranks on one 2-core machine: 4 ranks share 2 cores, so compute
// takes twice what it takes when each node has its own 2 cores.
TEST(Predict, NodesOnOneMachineShareItsCores) {
  PredictRequest r;
  r.model = costs("resnet50");
  r.compute = profile_from_throughput(r.model, 8, 100, 0, "test");
  r.per_node = 2;
  r.nodes = {1, 2};
  r.cores_per_node = 2;
  r.comm.fabric.intra = {1e-6, 1 / 5e9, 0};
  r.comm.fabric.inter = {20e-6, 1 / 1.25e9, 0};
  auto separate = predict_scaling(r);
  r.nodes_per_machine = 2;
  auto shared = predict_scaling(r);
  ASSERT_TRUE(separate.ok() && shared.ok());
  // One node is alone on its machine whatever nodes_per_machine says.
  EXPECT_DOUBLE_EQ((*shared)[0].step_s, (*separate)[0].step_s);
  EXPECT_NEAR(own_compute((*shared)[1]), 2 * own_compute((*separate)[1]),
              1e-12 * (*separate)[1].compute_s);
  // 2 ranks on 2 cores already left no core for overlap: the communication costs the same.
  EXPECT_NEAR(comm_cost((*shared)[1]), comm_cost((*separate)[1]), 1e-12);

  // With 4 cores, one node's 2 ranks leave 2 cores for their communication threads; two nodes
  // on the machine leave none, so nothing is hidden under backward (compute is not slowed).
  r.cores_per_node = 4;
  r.overlap = true;
  r.nodes = {2};
  r.nodes_per_machine = 1;
  auto roomy = predict_scaling(r);
  r.nodes_per_machine = 2;
  auto crowded = predict_scaling(r);
  ASSERT_TRUE(roomy.ok() && crowded.ok());
  EXPECT_DOUBLE_EQ(own_compute((*crowded)[0]), own_compute((*roomy)[0]));
  EXPECT_GE(comm_cost((*crowded)[0]), (*crowded)[0].comm_s - 1e-12);  // every bucket's time
  EXPECT_LT(comm_cost((*roomy)[0]), comm_cost((*crowded)[0]));

  r.nodes_per_machine = 0;
  auto bad = predict_scaling(r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().exit_code(), 2);
}

// Threads per rank count as cores taken (issue 38): 2 ranks x 2 threads on 4 cores leave no
// core for the communication threads, as 4 ranks x 1 would not slow compute either; on 2 cores
// the same ranks share them and compute takes twice as long.
TEST(Predict, ThreadsPerRankTakeCoresFromCommunicationAndShareThem) {
  PredictRequest r;
  r.model = costs("resnet50");
  r.compute = profile_from_throughput(r.model, 8, 100, 0, "test");
  r.per_node = 2;
  r.nodes = {1};
  r.cores_per_node = 4;
  r.overlap = true;
  r.comm.fabric.intra = {1e-6, 1 / 5e9, 0};
  auto one = predict_scaling(r);
  r.threads_per_rank = 2;
  auto two = predict_scaling(r);
  r.cores_per_node = 2;
  auto shared = predict_scaling(r);
  ASSERT_TRUE(one.ok() && two.ok() && shared.ok());
  EXPECT_DOUBLE_EQ(own_compute((*two)[0]), own_compute((*one)[0]));
  EXPECT_LT(comm_cost((*one)[0]), comm_cost((*two)[0]));
  EXPECT_GE(comm_cost((*two)[0]), (*two)[0].comm_s - 1e-12);  // nothing hidden
  EXPECT_NEAR(own_compute((*shared)[0]), 2 * own_compute((*two)[0]), 1e-12 * (*two)[0].compute_s);
}

TEST(Predict, AutoLayoutIsNeverSlowerThanDataParallel) {
  PredictRequest r;
  r.model = costs("vgg16");
  r.compute = profile_from_throughput(r.model, 16, 150, 0, "test");
  r.per_node = 4;
  r.nodes = {4, 32};
  r.comm.fabric.intra = {2e-6, 1 / 10e9, 0};
  r.comm.fabric.inter = {10e-6, 1 / 0.5e9, 0};
  auto data = predict_scaling(r);
  r.parallel = Parallel::kAuto;
  auto any = predict_scaling(r);
  ASSERT_TRUE(data.ok() && any.ok());
  for (size_t i = 0; i < data->size(); ++i) EXPECT_LE((*any)[i].step_s, (*data)[i].step_s + 1e-12);
  r.parallel = Parallel::kHybrid;
  auto hybrid = predict_scaling(r);
  ASSERT_TRUE(hybrid.ok());
  EXPECT_NE((*hybrid)[0].layout.find("pipeline"), std::string::npos);
}

}  // namespace
}  // namespace dltune::predict
