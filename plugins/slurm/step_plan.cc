#include "plugins/slurm/step_plan.h"

#include <cerrno>

#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/paths.h"
#include "common/strings.h"
#include "tuner/db/key.h"
#include "tuner/db/lookup.h"
#include "tuner/db/ompi_rules.h"

namespace dltune::plugins::slurm {

Result<StepFiles> prepare_step(const topology::Topology& topo, const StepInputs& in) {
  tuner::db::Layers layers;
  layers.user_db = in.user_db;
  for (const std::string& s : strings::split(in.site_dbs, ':')) {
    if (!s.empty()) layers.site_dbs.push_back(s);
  }
  const tuner::db::Key key = tuner::db::make_key(
      topo, tuner::db::JobShape{in.nodes, in.local_tasks}, "", /*with_nccl=*/!topo.gpus.empty());
  auto hit = tuner::db::lookup_plan(layers, key);
  if (!hit) return std::move(hit).error().wrap("looking up the plan");
  for (const std::string& w : hit->warnings) DLTUNE_LOG(kWarn, "db") << w;
  StepFiles out;
  out.matches_step = hit->kind != tuner::db::HitKind::kMiss &&
                     hit->plan.key.fingerprint == key.fingerprint &&
                     hit->plan.key.shape == key.shape;
  if (hit->kind == tuner::db::HitKind::kMiss) {
    out.description = "no plan for this node (fingerprint " + key.fingerprint.substr(0, 12) +
                      ") and step shape " + std::to_string(in.nodes) + "x" +
                      std::to_string(in.local_tasks) + "; the job runs untouched";
    return out;
  }
  if (::mkdir(in.step_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_error("cannot create '" + in.step_dir + "'");
  }
  // A directory someone else prepared (or a symbolic link) in a shared /tmp is not ours.
  struct stat st {};
  if (::lstat(in.step_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0) {
    return invalid_input("'" + in.step_dir + "' is not a private directory of the job's user");
  }
  out.plan_path = in.step_dir + "/plan.json";
  DLTUNE_TRY_CTX(paths::write_file_atomic(out.plan_path, hit->plan.plan_json), "writing the plan");
  out.description = std::string(tuner::db::hit_kind_name(hit->kind)) + " hit in " + hit->db_path +
                    (hit->site.empty() ? "" : " (site " + hit->site + ")");
  auto collectives = tuner::db::parse_plan_collectives(hit->plan.plan_json);
  if (collectives) {
    std::vector<std::string> notes;
    auto rules = tuner::db::rules_from_plan(*collectives, in.nodes * in.local_tasks, &notes);
    if (rules && !rules->collectives.empty()) {
      out.ompi_rules_path = in.step_dir + "/ompi_rules.conf";
      DLTUNE_TRY_CTX(
          paths::write_file_atomic(out.ompi_rules_path, tuner::db::format_ompi_rules(*rules)),
          "writing the Open MPI rules");
    }
  }
  return out;
}

}  // namespace dltune::plugins::slurm
