#include "launcher/backend/plan_env.h"

#include <climits>

#include <unistd.h>

#include "common/paths.h"
#include "tuner/db/ompi_rules.h"

namespace dltune::launcher {
namespace {

std::string shape(int64_t nodes, int64_t ranks_per_node) {
  return std::to_string(nodes) + "x" + std::to_string(ranks_per_node);
}

// The plan's placement as topology placements; empty (with a note) when it does not describe
// `ranks_per_node` local ranks.
std::vector<topology::RankPlacement> placement_of(const recipes::Plan& plan, int ranks_per_node,
                                                  std::vector<std::string>* notes) {
  std::vector<topology::RankPlacement> out;
  if (plan.placement.empty()) return out;
  if (static_cast<int>(plan.placement.size()) != ranks_per_node) {
    notes->push_back("the plan places " + std::to_string(plan.placement.size()) +
                     " rank(s) per node, the job has " + std::to_string(ranks_per_node) +
                     ": its placement is not used");
    return out;
  }
  for (const recipes::RankPlacement& p : plan.placement) {
    topology::RankPlacement rp;
    rp.local_rank = p.local_rank;
    rp.cpus = p.cpus;
    rp.cpuset = topology::cpu_list(p.cpus);
    rp.gpu = p.gpu;
    rp.nic = p.nic;
    out.push_back(std::move(rp));
  }
  return out;
}

}  // namespace

Result<PlanFile> read_plan_file(const std::string& path) {
  auto text = paths::read_file(path);
  if (!text) return invalid_input("--plan " + path + ": " + text.error().message());
  auto plan = recipes::parse_plan(*text);
  if (!plan) {
    return invalid_input("--plan " + path + " is not a dltune plan (" + plan.error().message() +
                         "); give a plan.json of a run directory, or one `dltune db lookup -o` "
                         "wrote");
  }
  return PlanFile{std::move(*plan), std::move(*text)};
}

PlanEnv plan_env_for(const recipes::Plan& plan, int nranks, int ranks_per_node) {
  PlanEnv pe;
  const recipes::JobShape& j = plan.job;
  const int nodes = ranks_per_node > 0 ? std::max(1, nranks / ranks_per_node) : 1;
  if (int64_t{j.nodes} * j.ranks_per_node != nranks || j.nodes != nodes) {
    pe.notes.push_back("the plan was tuned for a " + shape(j.nodes, j.ranks_per_node) +
                       " job (nodes x ranks per node), this one is " +
                       shape(nodes, ranks_per_node) +
                       ": its collective rules are applied by message size as they are, and "
                       "may not be this job's best (tune this shape: dltune tune "
                       "--collectives -n " +
                       std::to_string(nranks) + ")");
  }
  std::vector<std::string> rule_notes;
  auto rules = tuner::db::rules_from_plan(tuner::db::plan_collectives(plan), nranks, &rule_notes);
  if (rules) {
    pe.ompi_rules = tuner::db::format_ompi_rules(*rules);
    // What Open MPI runs where it lacks the plan's algorithm, as `db rules` says it.
    for (const std::string& n : rule_notes) pe.mpi_notes.push_back("Open MPI: " + n);
  } else if (!plan.collectives.empty()) {
    pe.notes.push_back("no Open MPI rules: " + rules.error().message());
  }
  pe.placement = placement_of(plan, ranks_per_node, &pe.notes);
  const int stages = plan.parallel.stages;
  if (stages > 1 && stages <= nranks && nranks % stages == 0) pe.stages = stages;
  return pe;
}

std::vector<std::string> notes_for(const PlanEnv& pe, const std::vector<std::string>& argv) {
  std::vector<std::string> out = pe.notes;
  const std::string program = argv.empty() ? "" : argv[0].substr(argv[0].rfind('/') + 1);
  if (program != "dltune-worker") out.insert(out.end(), pe.mpi_notes.begin(), pe.mpi_notes.end());
  return out;
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
                                 const std::string& recipe_yaml, const std::string& dir) {
  EnvList env;
  if (!recipe_yaml.empty()) {
    const std::string recipe_path = dir + "/recipe.yaml";
    DLTUNE_TRY_CTX(paths::write_file_atomic(recipe_path, recipe_yaml), "writing the recipe");
    env.emplace_back("DLTUNE_RECIPE", recipe_path);
  }
  if (plan_json.empty()) return env;
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
