#include "launcher/plan_env.h"

#include <climits>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/json_input.h"
#include "common/paths.h"
#include "tuner/db/ompi_rules.h"

namespace dltune::launcher {
namespace {

// The plan's "placement" entries as topology placements; empty (with a note) when they do not
// describe `ranks_per_node` local ranks 0..n-1.
std::vector<topology::RankPlacement> placement_of(const nlohmann::json& plan, int ranks_per_node,
                                                  std::vector<std::string>* notes) {
  std::vector<topology::RankPlacement> out;
  const auto it = plan.find("placement");
  if (it == plan.end() || !it->is_array() || it->empty()) return out;
  if (static_cast<int>(it->size()) != ranks_per_node) {
    notes->push_back("the plan places " + std::to_string(it->size()) +
                     " rank(s) per node, the job has " + std::to_string(ranks_per_node) +
                     ": its placement is not used");
    return out;
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const nlohmann::json& e = (*it)[i];
    topology::RankPlacement rp;
    rp.local_rank = static_cast<int>(i);
    bool ok = e.is_object() && e.value("local_rank", -1) == static_cast<int>(i);
    if (ok && e.contains("cpus")) {
      ok = e["cpus"].is_array();
      for (const auto& c : ok ? e["cpus"] : nlohmann::json::array()) {
        if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() >= CPU_SETSIZE) {
          ok = false;
          break;
        }
        rp.cpus.push_back(c.get<int>());
      }
    }
    if (ok && e.contains("gpu")) {
      ok = e["gpu"].is_number_integer();
      if (ok) rp.gpu = e["gpu"].get<int>();
    }
    if (ok && e.contains("nic")) {
      ok = e["nic"].is_string();
      if (ok) rp.nic = e["nic"].get<std::string>();
    }
    if (!ok) {
      notes->push_back("the plan's placement[" + std::to_string(i) +
                       "] is malformed: its placement is not used");
      return {};
    }
    rp.cpuset = topology::cpu_list(rp.cpus);
    out.push_back(std::move(rp));
  }
  return out;
}

}  // namespace

PlanEnv plan_env_for(const std::string& plan_json, int nranks, int ranks_per_node) {
  PlanEnv pe;
  const auto plan = parse_json_bounded(plan_json).value_or(nlohmann::json());
  if (!plan.is_object()) {
    pe.notes.push_back(
        "the plan is not a JSON object: it is handed to the ranks as it is, and no Open MPI "
        "rules, NCCL settings or placement are derived from it");
    return pe;
  }
  auto coll = tuner::db::parse_plan_collectives(plan_json);
  if (!coll) {
    pe.notes.push_back("no Open MPI rules: " + coll.error().message());
  } else if (!coll->empty()) {
    std::vector<std::string> rule_notes;
    auto rules = tuner::db::rules_from_plan(*coll, nranks, &rule_notes);
    if (rules) {
      pe.ompi_rules = tuner::db::format_ompi_rules(*rules);
    } else {
      pe.notes.push_back("no Open MPI rules: " + rules.error().message());
    }
  }
  pe.placement = placement_of(plan, ranks_per_node, &pe.notes);
  const nlohmann::json* st = nullptr;
  if (plan.contains("stages"))
    st = &plan["stages"];
  else if (plan.contains("parallel") && plan["parallel"].is_object() &&
           plan["parallel"].contains("stages"))
    st = &plan["parallel"]["stages"];
  if (st && st->is_number_integer() && st->get<int64_t>() > 1 && st->get<int64_t>() <= nranks &&
      nranks % st->get<int64_t>() == 0)
    pe.stages = st->get<int>();
  return pe;
}

std::string rank_label(const PlanEnv& pe, int rank) {
  std::string s = "rank " + std::to_string(rank);
  if (pe.stages > 1)
    s += " (stage " + std::to_string(rank % pe.stages) + " of replica " +
         std::to_string(rank / pe.stages) + ")";
  return s;
}

std::string nccl_tuner_plugin_path() {
  char buf[PATH_MAX + 1] = {};
  const ssize_t n = readlink("/proc/self/exe", buf, PATH_MAX);
  if (n <= 0) return "";
  std::string exe(buf, static_cast<size_t>(n));
  const std::string bindir = exe.substr(0, exe.rfind('/'));
  const std::string path = bindir + "/../lib/libnccl-tuner-dltune.so";
  return access(path.c_str(), R_OK) == 0 ? path : "";
}

Result<EnvList> write_plan_files(const PlanEnv& pe, const std::string& plan_json,
                                 const std::string& dir) {
  EnvList env;
  const std::string plan_path = dir + "/plan.json";
  DLTUNE_TRY_CTX(paths::write_file_atomic(plan_path, plan_json), "writing the plan");
  env.emplace_back("DLTUNE_PLAN", plan_path);
  if (!pe.ompi_rules.empty()) {
    const std::string rules_path = dir + "/ompi_rules.conf";
    DLTUNE_TRY_CTX(paths::write_file_atomic(rules_path, pe.ompi_rules),
                   "writing the Open MPI rules");
    env.emplace_back("OMPI_MCA_coll_tuned_use_dynamic_rules", "1");
    env.emplace_back("OMPI_MCA_coll_tuned_dynamic_rules_filename", rules_path);
  }
  if (const std::string so = nccl_tuner_plugin_path(); !so.empty()) {
    env.emplace_back("NCCL_TUNER_PLUGIN", so);
  }
  return env;
}

}  // namespace dltune::launcher
