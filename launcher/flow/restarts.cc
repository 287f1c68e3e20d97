#include "launcher/flow/restarts.h"

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "common/run_layout.h"
#include "common/strings.h"
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

std::string failure_why(const std::string& outcome_message, const std::string& run_dir) {
  const std::string dir = run_layout::in(run_dir, run_layout::kFailures);
  std::error_code ec;
  int best = -1;
  std::string note;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    int rank = -1;
    char tail = 0;
    if (std::sscanf(name.c_str(), "rank-%d.tx%c", &rank, &tail) != 2 || tail != 't' || rank < 0)
      continue;
    if (best >= 0 && rank > best) continue;
    auto text = paths::read_file(e.path().string());
    if (!text || text->empty()) continue;
    best = rank;
    note = strings::printable(strings::trim(text->substr(0, 1000)), "");
  }
  if (best < 0) return outcome_message;
  return outcome_message + "; rank " + std::to_string(best) + " had timed out: " + note;
}

void clear_failure_notes(const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::remove_all(run_layout::in(run_dir, run_layout::kFailures), ec);
}

void remove_partial_checkpoints(const std::string& run_dir) {
  const std::string file = run_layout::in(run_dir, run_layout::kCheckpoint);
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  const std::string prefix = std::filesystem::path(file).filename().string() + ".tmp.";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) std::filesystem::remove(e.path(), ec);
  }
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
      if (r.grown) a.back()["grown"] = true;
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
      s += text::flag(r, "grown")
               ? ", on node " + spare->get<std::string>() +
                     " (the allocation grew by it) in its place"
               : ", on spare node " + spare->get<std::string>() + " in its place";
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
