#include "predict/compute.h"

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/stats.h"

namespace dltune::predict {

ComputeProfile profile_from_rate(const ModelCosts& model, int batch, double flops_per_s,
                                 double optimizer_s, std::string source) {
  ComputeProfile p;
  p.source = std::move(source);
  p.batch = batch;
  p.optimizer_s = optimizer_s;
  p.spread = kAssumedFractionSpread;
  p.spread_basis = "the assumed fraction of peak";
  for (double f : model.flops) {
    const double fwd = flops_per_s > 0 ? f * batch / flops_per_s : 0;
    p.forward_s.push_back(fwd);
    p.backward_s.push_back(2 * fwd);
  }
  return p;
}

ComputeProfile profile_from_throughput(const ModelCosts& model, int batch, double sps,
                                       double optimizer_s, std::string source) {
  // The rate at which the FLOP split takes batch / sps seconds, optimizer included.
  const double compute_s = std::max(1e-12, batch / sps - optimizer_s);
  const double flops = 3 * model.flops_per_sample * batch;
  ComputeProfile p =
      profile_from_rate(model, batch, flops / compute_s, optimizer_s, std::move(source));
  if (flops <= 0) {  // a model with no FLOPs: all the time in the update
    p.optimizer_s = batch / sps;
  }
  p.spread = 0;
  p.spread_basis = "a throughput as given";
  return p;
}

double optimizer_seconds(int64_t parameters, double memory_gbps, const std::string& optimizer) {
  if (memory_gbps <= 0) return 0;
  const double bytes_per_param = optimizer == "adamw" ? 28 : 20;
  return static_cast<double>(parameters) * bytes_per_param / (memory_gbps * 1e9);
}

Result<ComputeProfile> profile_from_json(const nlohmann::json& j, const ModelCosts& model,
                                         std::string source) {
  auto bad = [](const std::string& m) { return invalid_input("compute profile: " + m); };
  if (!j.is_object()) return bad("expected a JSON object");
  for (const char* k : {"forward_s", "backward_s"}) {
    if (!j.contains(k) || !j[k].is_array()) return bad(std::string("missing array '") + k + "'");
    if (j[k].size() != model.flops.size()) {
      return bad(std::string("'") + k + "' has " + std::to_string(j[k].size()) +
                 " nodes, the model " + std::to_string(model.flops.size()));
    }
  }
  if (!j.contains("batch") || !j["batch"].is_number_integer() || j["batch"].get<int>() < 1) {
    return bad("missing a positive integer 'batch'");
  }
  ComputeProfile p;
  p.source = std::move(source);
  p.batch = j["batch"].get<int>();
  for (const auto& v : j["forward_s"]) p.forward_s.push_back(v.is_number() ? v.get<double>() : 0);
  for (const auto& v : j["backward_s"]) p.backward_s.push_back(v.is_number() ? v.get<double>() : 0);
  p.optimizer_s = j.value("optimizer_s", 0.0);
  const double step = j.value("step_s", 0.0);
  p.other_s = std::max(0.0, step - p.forward_total() - p.backward_total() - p.optimizer_s);
  std::vector<double> steps;
  if (j.contains("step_samples_s") && j["step_samples_s"].is_array()) {
    for (const auto& v : j["step_samples_s"])
      if (v.is_number() && v.get<double>() > 0) steps.push_back(v.get<double>());
  }
  if (steps.size() >= 2) {
    const auto [lo, hi] = std::minmax_element(steps.begin(), steps.end());
    p.spread = (*hi - *lo) / 2 / stats::median(steps);
    p.spread_basis = "the range of " + std::to_string(steps.size()) + " timed steps";
  } else {
    p.spread_basis = "one timed step: no spread known";
  }
  return p;
}

ComputeProfile at_batch(const ComputeProfile& p, int batch) {
  ComputeProfile q = p;
  const double k = static_cast<double>(batch) / std::max(1, p.batch);
  q.batch = batch;
  for (double& t : q.forward_s) t *= k;
  for (double& t : q.backward_s) t *= k;
  q.other_s *= k;
  return q;
}

}  // namespace dltune::predict
