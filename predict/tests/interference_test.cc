// The overlap's interference in `dltune predict` (predict/predict.h): which one a prediction
// assumes by kind, what it costs the step, and its interval, checked against the step model's
// own arithmetic (compute is slowed only while both run: by overlapped x c / (1 + c)).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "predict/compute.h"
#include "predict/predict.h"
#include "predict/tests/builtin_costs.h"

namespace dltune::predict {
namespace {

// 8 devices of one node computing resnet50 at 100 samples/s, 5 GB/s links: the buckets hide
// under backward, so the overlap is all there is to the interference.
PredictRequest devices() {
  PredictRequest r;
  r.model = test_models::builtin_costs("resnet50");
  r.compute = profile_from_throughput(r.model, 32, 100, 0, "test");
  r.per_node = 8;
  r.nodes = {1};
  r.comm.fabric.intra = {1e-6, 1 / 5e9, 0};
  return r;
}

Prediction one(const PredictRequest& r) {
  auto p = predict_scaling(r);
  EXPECT_TRUE(p.ok()) << p.error().message();
  return p->front();
}

TEST(Interference, DevicesAssumeThePublishedComputeSlowdown) {
  PredictRequest r = devices();
  const Prediction gpu = one(r);
  EXPECT_NE(gpu.interference.find("arXiv:2507.03114"), std::string::npos) << gpu.interference;
  EXPECT_NE(gpu.interference.find("+18.9 %"), std::string::npos) << gpu.interference;
  ASSERT_GT(gpu.overlapped_s, 0);
  EXPECT_NEAR(gpu.compute_slowed_s, gpu.overlapped_s * 0.189 / 1.189, 1e-12);
  // Perfect overlap, given: the same step less what compute lost.
  r.interference = Interference::constant(0, 0, "given");
  const Prediction free = one(r);
  EXPECT_EQ(free.compute_slowed_s, 0);
  EXPECT_NEAR(gpu.compute_s - free.compute_s, gpu.compute_slowed_s, 1e-12);
  EXPECT_GT(gpu.step_s, free.step_s);
  EXPECT_LT(gpu.scaling_efficiency, free.scaling_efficiency);
}

// Throughput as given and links as given have no spread: the interval is the interference's
// alone, from none (the efficiency's top) to the published 40 % maximum (its bottom).
TEST(Interference, TheIntervalRunsFromNoneToThePublishedMaximum) {
  PredictRequest r = devices();
  const Prediction gpu = one(r);
  r.interference = Interference::constant(0, 0, "none");
  const Prediction none = one(r);
  r.interference = Interference::constant(0.40, 0, "the maximum");
  const Prediction worst = one(r);
  EXPECT_NEAR(gpu.efficiency_range.hi, none.scaling_efficiency, 1e-12);
  EXPECT_NEAR(gpu.efficiency_range.lo, worst.scaling_efficiency, 1e-12);
  EXPECT_NEAR(gpu.step_range.hi, worst.step_s, 1e-12);
  EXPECT_LT(gpu.efficiency_range.lo, gpu.scaling_efficiency);
  // A given interference is taken as exact.
  EXPECT_EQ(none.efficiency_range.lo, none.efficiency_range.hi);
}

TEST(Interference, HostRanksShareWhatTheirCoresLeave) {
  PredictRequest r = devices();
  r.per_node = 2;
  r.cores_per_node = 4;  // a core each for the communication threads
  const Prediction roomy = one(r);
  EXPECT_EQ(roomy.compute_slowed_s, 0);
  EXPECT_NE(roomy.interference.find("not measured"), std::string::npos) << roomy.interference;
  r.cores_per_node = 2;  // none: compute and communication time-share the cores
  const Prediction shared = one(r);
  EXPECT_NE(shared.interference.find("+100 %"), std::string::npos) << shared.interference;
  // Time-sharing takes the serial sum: the same step as reducing every bucket after backward.
  r.overlap = false;
  const Prediction serial = one(r);
  r.overlap = true;
  EXPECT_NEAR(shared.step_s, serial.step_s, 1e-9 * serial.step_s);
  EXPECT_GT(shared.overlapped_s, 0);
  // A measurement (or a given figure) replaces the assumption, and is said.
  r.interference = Interference::constant(0.3, 0.5, "measured here (test)");
  const Prediction measured = one(r);
  EXPECT_NE(measured.interference.find("measured here (test)"), std::string::npos);
  EXPECT_NE(interference_note({measured}).find("+30.0 %"), std::string::npos);
  const auto j = predictions_to_json({measured});
  EXPECT_EQ(j["predictions"][0]["overlap"]["interference"], measured.interference);
}

}  // namespace
}  // namespace dltune::predict
