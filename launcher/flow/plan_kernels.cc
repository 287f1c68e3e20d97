#include "launcher/flow/plan_kernels.h"

#include <algorithm>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/flow/launch_layout.h"
#include "launcher/flow/text_format.h"

namespace dltune::launcher {

namespace {

// "onednn for 9 nodes, blas for 3": each kernel's node count, most first.
std::string counts(const std::map<std::string, std::string>& kernels) {
  std::map<std::string, int> count;
  for (const auto& [node, kernel] : kernels) ++count[kernel];
  std::vector<std::pair<std::string, int>> by(count.begin(), count.end());
  std::stable_sort(by.begin(), by.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s;
  for (size_t i = 0; i < by.size(); ++i) {
    s += (i == 0 ? "" : ", ") + by[i].first + " for " + std::to_string(by[i].second) +
         (i == 0 ? (by[i].second == 1 ? " node" : " nodes") : "");
  }
  return s;
}

}  // namespace

std::string kernels_text(const std::map<std::string, std::string>& kernels) {
  return kernels.empty() ? "" : counts(kernels) + " (chosen by measurement)";
}

std::string choose_plan_kernels(const std::string& worker, const std::string& recipe_path,
                                recipes::Plan* plan, double seconds) {
  const bool gpu = std::any_of(plan->placement.begin(), plan->placement.end(),
                               [](const recipes::RankPlacement& p) { return p.gpu >= 0; });
  if (gpu || plan->parallel.pipelined()) return "";
  const recipes::TrainingPlan& t = plan->training;
  auto j = ask_worker(worker, {"--kernels", "--recipe", recipe_path, "--batch",
                               std::to_string(std::max<int64_t>(1, t.per_rank_batch)), "--threads",
                               std::to_string(std::max(1, plan->job.threads_per_rank)),
                               "--precision", t.precision, "--seconds", text::fixed(seconds, 1)});
  if (!j) {
    return "kernels: the engine's defaults (measuring them failed: " + j.error().message() + ")";
  }
  std::map<std::string, std::string> chosen;
  if (j->contains("choices") && (*j)["choices"].is_object()) {
    for (const auto& [node, kernel] : (*j)["choices"].items()) {
      if (kernel.is_string()) chosen[node] = kernel.get<std::string>();
    }
  }
  if (chosen.empty()) return "kernels: the engine's defaults (no node has a choice of kernel)";
  plan->training.kernels = chosen;
  return "kernels chosen by measurement in " + text::fixed(j->value("seconds", 0.0), 1) +
         " s: " + counts(chosen) + " (`dltune model show " + recipe_path +
         " --kernels` times them again)";
}

}  // namespace dltune::launcher
