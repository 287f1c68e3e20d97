// predict/predict.h's intervals: the spreads of the inputs (a profile's timed steps, a sweep's
// percentiles, a fit's error, a device table's assumption) and the step re-predicted at their
// ends, checked against the step model's own arithmetic done here by hand.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "planning/model_costs.h"
#include "recipes/model/builtins.h"

#include "predict/compute.h"
#include "predict/devices.h"
#include "predict/machine_comm.h"
#include "predict/predict.h"
#include "predict/tests/builtin_costs.h"

namespace dltune::predict {
namespace {

ModelCosts costs(const std::string& name) { return test_models::builtin_costs(name); }

nlohmann::json profile_json(const ModelCosts& m, const std::vector<double>& samples) {
  const size_t n = m.flops.size();
  return {{"batch", 16},
          {"forward_s", std::vector<double>(n, 1e-3)},
          {"backward_s", std::vector<double>(n, 2e-3)},
          {"optimizer_s", 0.0},
          {"step_s", 3e-3 * static_cast<double>(n)},
          {"step_samples_s", samples}};
}

TEST(Interval, AProfilesSpreadIsHalfItsTimedStepsRangeOverTheirMedian) {
  const ModelCosts m = costs("mlp");
  auto p = profile_from_json(profile_json(m, {0.13, 0.10, 0.12, 0.11}), m, "test");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_NEAR(p->spread, (0.13 - 0.10) / 2 / 0.115, 1e-12);
  EXPECT_NE(p->spread_basis.find("4 timed steps"), std::string::npos) << p->spread_basis;
  // One step, or none (a profile from before step_samples_s): no spread, and said so.
  auto one = profile_from_json(profile_json(m, {0.1}), m, "test");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->spread, 0);
  EXPECT_NE(one->spread_basis.find("no spread"), std::string::npos);
  // A device's rate is an assumption with its stated spread; a throughput as given is exact.
  auto dev = find_device("v100");
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ(profile_from_rate(m, 16, dev->effective_flops(false), 0, "v100").spread,
            kAssumedFractionSpread);
  EXPECT_EQ(profile_from_throughput(m, 16, 1000, 0, "given").spread, 0);
}

// One rank: no communication, so throughput's ends are batch over the compute at either end.
TEST(Interval, OneRanksThroughputSpansItsComputesSpread) {
  PredictRequest r;
  r.model = costs("resnet20");
  r.compute = profile_from_throughput(r.model, 32, 1000, 0, "test");
  r.compute.spread = 0.1;
  r.per_node = 1;
  r.nodes = {1};
  auto p = predict_scaling(r);
  ASSERT_TRUE(p.ok());
  const Prediction& x = p->front();
  const double t = 32.0 / 1000;
  EXPECT_NEAR(x.step_range.lo, 0.9 * t, 1e-9);
  EXPECT_NEAR(x.step_range.hi, 1.1 * t, 1e-9);
  EXPECT_NEAR(x.throughput_range.lo, 32 / (1.1 * t), 1e-6);
  EXPECT_NEAR(x.throughput_range.hi, 32 / (0.9 * t), 1e-6);
  EXPECT_NEAR(x.efficiency_range.lo, 1.0, 1e-9);  // alone, whatever the compute
  EXPECT_NEAR(x.efficiency_range.hi, 1.0, 1e-9);
  EXPECT_EQ(x.comm_spread, 0);
}

// Without overlap the step is compute plus every allreduce: each end moves the communication
// by its spread, and the efficiency's ends are mixed (fast compute with slow communication is
// the worst).
TEST(Interval, WithoutOverlapTheCommunicationsSpreadAddsToTheStep) {
  PredictRequest r;
  r.model = costs("resnet20");
  r.compute = profile_from_throughput(r.model, 32, 2000, 0, "test");
  r.per_node = 4;
  r.nodes = {1};
  r.overlap = false;
  r.comm.fabric.intra = {5e-6, 1 / 2e9, 0};
  r.comm.algorithms = {AllreduceAlgo::kRing};
  auto exact = predict_scaling(r);
  ASSERT_TRUE(exact.ok());
  const Prediction& e = exact->front();
  EXPECT_EQ(e.step_range.lo, e.step_s);  // no spread: a point
  EXPECT_EQ(e.throughput_range.hi, e.throughput_sps);
  const double compute = 32.0 / 2000;
  const double comm = e.step_s - compute;
  ASSERT_GT(comm, 0);

  r.comm.model_spread = 0.2;
  r.comm.model_spread_basis = "a test's";
  r.compute.spread = 0.05;
  auto p = predict_scaling(r);
  ASSERT_TRUE(p.ok());
  const Prediction& x = p->front();
  EXPECT_NEAR(x.step_s, e.step_s, 1e-12);  // the value itself does not move
  EXPECT_NEAR(x.step_range.lo, 0.95 * compute + 0.8 * comm, 1e-9);
  EXPECT_NEAR(x.step_range.hi, 1.05 * compute + 1.2 * comm, 1e-9);
  // Efficiency = compute alone / step, lowest with fast compute and slow communication.
  EXPECT_NEAR(x.efficiency_range.lo, 0.95 * compute / (0.95 * compute + 1.2 * comm), 1e-9);
  EXPECT_NEAR(x.efficiency_range.hi, 1.05 * compute / (1.05 * compute + 0.8 * comm), 1e-9);
  EXPECT_EQ(x.comm_spread_basis, "a test's");

  const nlohmann::json j = predictions_to_json(*p)["predictions"][0];
  EXPECT_NEAR(j["throughput_sps_range"][0].get<double>(), x.throughput_range.lo, 1e-9);
  EXPECT_NEAR(j["step_ms_range"][1].get<double>(), x.step_range.hi * 1e3, 1e-9);
  EXPECT_EQ(j["comm_spread"].get<double>(), 0.2);
  const std::string note = interval_note(r, *p);
  EXPECT_NE(note.find("compute +-5.0 %"), std::string::npos) << note;
  EXPECT_NE(note.find("communication +-20 % (a test's)"), std::string::npos) << note;
  const std::string table = format_predictions(*p);
  EXPECT_NE(table.find(std::to_string(static_cast<int>(std::round(x.throughput_range.lo)))),
            std::string::npos)
      << table;
}

tuner::db::Measurement row(int nodes, uint64_t bytes, double median, double p10, double p90) {
  tuner::db::Measurement m;
  m.key.shape = {nodes, 2};
  m.collective = "allreduce";
  m.algorithm = "ring";
  m.bytes = bytes;
  m.median_us = median;
  m.p10_us = p10;
  m.p90_us = p90;
  return m;
}

// A measured shape's spread is its sweep's (sizes of 1 MiB and more: the gradient buckets),
// every other shape the fits' error.
TEST(Interval, ASweepsSpreadAtItsShapeAndTheFitsErrorElsewhere) {
  std::vector<tuner::db::Measurement> rows = {
      row(1, 1024, 10, 5, 40),  // a small message's jitter: not a bucket's
      row(1, 1 << 20, 100, 90, 130), row(1, 4 << 20, 400, 380, 420),
      row(1, 16 << 20, 1600, 1500, 1700)};
  LevelFit fit;
  fit.level = "intra";
  fit.nodes = 1;
  fit.ranks_per_node = 2;
  fit.link = {1e-6, 1e-9, 0};
  fit.rel_rms = 0.07;
  MachineComm mc = machine_comm(rows, {fit}, 2);
  // Spreads 0.2, 0.05, 0.0625: the median is 0.0625.
  EXPECT_NEAR(mc.source.spread(1, 2), 0.0625, 1e-12);
  EXPECT_NE(mc.source.spread_basis(1, 2).find("p10-p90"), std::string::npos);
  EXPECT_NEAR(mc.source.spread(1, 4), 2 * 0.07, 1e-12);
  EXPECT_EQ(mc.source.spread_basis(1, 4), "twice the intra fit's RMS error");
}

}  // namespace
}  // namespace dltune::predict
