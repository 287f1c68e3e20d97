#include "launcher/flow/restarts.h"

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "engine/io/checkpoint.h"
#include "launcher/flow/text_format.h"

namespace dltune::launcher {

std::string restart_refusal(const LaunchOutcome& o, int done, int allowed) {
  if (o.interrupted) return "interrupted";
  if (allowed <= 0) return "launch.restarts is 0";
  if (done >= allowed) {
    return "the " + std::to_string(allowed) + " restart" + (allowed == 1 ? "" : "s") +
           " of launch.restarts " + (allowed == 1 ? "is" : "are") + " used up";
  }
  return "";
}

int64_t checkpoint_step(const std::string& path) {
  if (!paths::exists(path)) return 0;
  auto info = engine::read_checkpoint_info(path);
  return info ? info->meta.step : 0;
}

nlohmann::json restarts_json(const std::vector<Restart>& restarts) {
  nlohmann::json a = nlohmann::json::array();
  for (const Restart& r : restarts) {
    a.push_back({{"at_s", r.at_s},
                 {"exit_code", r.exit_code},
                 {"why", r.why},
                 {"from_step", r.from_step},
                 {"lost_s", r.lost_s >= 0 ? nlohmann::json(r.lost_s) : nlohmann::json()},
                 {"ranks", r.ranks},
                 {"fewer", r.fewer}});
    if (!r.lost_node.empty()) {
      a.back()["lost_node"] = r.lost_node;
      a.back()["nodes"] = r.nodes;
      if (!r.spare_node.empty()) a.back()["spare_node"] = r.spare_node;
    }
  }
  return a;
}

std::string restart_text(const nlohmann::json& r) {
  using text::fixed;
  using text::num;
  if (!r.is_object()) return "";
  const auto why_it = r.find("why");
  std::string why = why_it != r.end() && why_it->is_string() ? why_it->get<std::string>() : "";
  if (why.empty()) {
    why =
        "the ranks failed with exit code " + std::to_string(static_cast<int>(num(r, "exit_code")));
  }
  const auto step = static_cast<int64_t>(num(r, "from_step"));
  std::string s = "at " + fixed(num(r, "at_s"), 1) + " s: " + why + "; continued from " +
                  (step > 0 ? "the checkpoint at step " + std::to_string(step)
                            : std::string("the start (no checkpoint yet)"));
  const auto lost = r.find("lost_node");
  if (lost != r.end() && lost->is_string()) {
    s += ", without node " + lost->get<std::string>() + " (it no longer answered)";
    const auto spare = r.find("spare_node");
    if (spare != r.end() && spare->is_string()) {
      s += ", on spare node " + spare->get<std::string>() + " in its place";
    }
  }
  if (text::flag(r, "fewer")) {
    const auto n = static_cast<int>(num(r, "ranks"));
    s += ", on " + std::to_string(n) + (n == 1 ? " rank" : " ranks");
    if (lost != r.end()) {
      const auto m = static_cast<int>(num(r, "nodes"));
      s += " on " + std::to_string(m) + (m == 1 ? " node" : " nodes");
    }
    s += ", planned again";
  }
  if (num(r, "lost_s", -1) >= 0) {
    s += ", training again " + fixed(num(r, "lost_s"), 1) + " s after the failure";
  }
  return s;
}

}  // namespace dltune::launcher
