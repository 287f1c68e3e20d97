// The Slurm SPANK plugin: `srun --dltune[=PROFILE]` applies dltune's plan for this node and
// step shape to every task (binding, GPU, NIC, collective settings, DLTUNE_PLAN).
//
// A dispatcher only (the pyxis shape): decisions live in policy.cc and step_plan.cc. It runs
// inside srun and slurmstepd, so every callback catches everything, logs at most one line,
// and returns 0: a dltune problem never fails a job or takes slurmstepd down. It is built
// against the installed headers and not linked with libslurm (srun/slurmstepd provide the
// spank_* and slurm_* symbols); its linker script exports only the plugin symbols.
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include <sched.h>
#include <unistd.h>

#include "plugins/slurm/policy.h"
#include "plugins/slurm/step_plan.h"

// spank.h has no extern "C" guard of its own.
// clang-format off
extern "C" {
#include <slurm/spank.h>
}
// clang-format on

// The entry points Slurm looks up; everything else in this library is hidden.
#pragma GCC visibility push(default)
extern "C" {
// Declared extern first: a const definition alone would get internal linkage in C++.
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(dltune, 1);
}
#pragma GCC visibility pop

namespace {

using namespace dltune::plugins::slurm;  // NOLINT: this file is the plugin's dispatcher

std::optional<UserRequest> g_user;  // what --dltune said, if given
SiteConfig g_site;
StepFiles g_files;  // set in user_init, read in the forked tasks
dltune::topology::Topology g_topo;
bool g_active = false;

int option_cb(int /*val*/, const char* optarg, int /*remote*/) {
  try {
    auto r = parse_user_option(optarg);
    if (!r) {
      slurm_error("dltune: %s; the job runs untouched", r.error().message().c_str());
      g_user = UserRequest{};  // disabled
    } else {
      g_user = *r;
    }
  } catch (...) {
    g_user = UserRequest{};
  }
  return 0;  // never reject the command line because of dltune
}

struct spank_option g_options[] = {
    {const_cast<char*>("dltune"), const_cast<char*>("[PROFILE|off]"),
     const_cast<char*>("Apply dltune's tuned plan (binding, GPU/NIC selection, collective "
                       "settings) to every task; 'off' disables it for this job"),
     2, 0, option_cb},
    SPANK_OPTIONS_TABLE_END};

std::string job_env(spank_t sp, const char* name) {
  char buf[4096];
  if (spank_getenv(sp, name, buf, sizeof buf) != ESPANK_SUCCESS) return "";
  return buf;
}

int user_init(spank_t sp) {
  if (!applies(g_user, g_site)) return 0;
  uint32_t nodes = 1, local_tasks = 1, job = 0, step = 0;
  if (spank_get_item(sp, S_JOB_NNODES, &nodes) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local_tasks) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) {
    slurm_error("dltune: cannot read the step's shape from Slurm; the job runs untouched");
    return 0;
  }
  // Runs as the job's user: the topology override and databases the user names are read with
  // the user's rights only.
  const std::string xml = job_env(sp, "DLTUNE_TOPO_XML");
  auto topo = xml.empty() ? dltune::topology::discover() : dltune::topology::load_xml(xml);
  if (!topo) {
    slurm_error("dltune: %s; the job runs untouched", topo.error().message().c_str());
    return 0;
  }
  StepInputs in;
  in.nodes = static_cast<int>(nodes);
  in.local_tasks = static_cast<int>(local_tasks);
  in.user_db = job_env(sp, "DLTUNE_DB");
  if (in.user_db.empty()) {
    const std::string data = job_env(sp, "XDG_DATA_HOME");
    const std::string home = job_env(sp, "HOME");
    if (!data.empty() && data[0] == '/')
      in.user_db = data + "/dltune/dltune.db";
    else if (!home.empty() && home[0] == '/')
      in.user_db = home + "/.local/share/dltune/dltune.db";
  }
  in.site_dbs = g_site.site_db;
  const std::string more_sites = job_env(sp, "DLTUNE_SITE_DB");
  if (!more_sites.empty()) in.site_dbs += (in.site_dbs.empty() ? "" : ":") + more_sites;
  const std::string tmp = job_env(sp, "TMPDIR");
  in.step_dir = (tmp.empty() || tmp[0] != '/' ? std::string("/tmp") : tmp) + "/dltune-" +
                std::to_string(::getuid()) + "-" + std::to_string(job) + "." + std::to_string(step);
  auto files = prepare_step(*topo, in);
  if (!files) {
    slurm_error("dltune: %s; the job runs untouched", files.error().message().c_str());
    return 0;
  }
  g_files = *files;
  if (g_files.plan_path.empty()) {
    slurm_info("dltune: %s", g_files.description.c_str());
    return 0;
  }
  g_topo = std::move(*topo);
  g_active = true;
  slurm_verbose("dltune: plan from %s", g_files.description.c_str());
  return 0;
}

int task_init(spank_t sp) {
  if (!g_active) return 0;
  int task = 0;
  uint32_t local_tasks = 1, nodes = 1;
  if (spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local_tasks) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_NNODES, &nodes) != ESPANK_SUCCESS) {
    return 0;
  }
  auto s = settings_for_task(
      g_topo, TaskContext{static_cast<int>(nodes), static_cast<int>(local_tasks), task},
      g_files.plan_path, g_files.ompi_rules_path);
  if (!s) {
    slurm_error("dltune: %s; task %d runs untouched", s.error().message().c_str(), task);
    return 0;
  }
  for (const auto& [name, value] : s->env) {
    spank_setenv(sp, name.c_str(), value.c_str(), 1);
  }
  if (!s->cpus.empty()) {
    auto bound = dltune::topology::set_affinity(0, s->cpus);
    if (!bound) slurm_error("dltune: task %d not bound: %s", task, bound.error().message().c_str());
  }
  return 0;
}

void remove_step_dir() {
  // Only files this plugin names; unlink does not follow symbolic links.
  if (!g_files.plan_path.empty()) ::unlink(g_files.plan_path.c_str());
  if (!g_files.ompi_rules_path.empty()) ::unlink(g_files.ompi_rules_path.c_str());
  if (!g_files.plan_path.empty()) {
    const std::string dir = g_files.plan_path.substr(0, g_files.plan_path.rfind('/'));
    ::rmdir(dir.c_str());
  }
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  try {
    auto site = parse_plugstack_args(ac, av);
    if (!site) {
      slurm_error("dltune: %s; dltune stays off", site.error().message().c_str());
      g_site = SiteConfig{};
    } else {
      g_site = *site;
    }
    const spank_context_t ctx = spank_context();
    if (ctx == S_CTX_LOCAL || ctx == S_CTX_REMOTE || ctx == S_CTX_ALLOCATOR) {
      for (struct spank_option* o = g_options; o->name != nullptr; ++o)
        spank_option_register(sp, o);
    }
  } catch (...) {
  }
  return 0;
}

int slurm_spank_user_init(spank_t sp, int /*ac*/, char** /*av*/) {
  try {
    return user_init(sp);
  } catch (const std::exception& e) {
    slurm_error("dltune: %s; the job runs untouched", e.what());
  } catch (...) {
  }
  g_active = false;
  return 0;
}

int slurm_spank_task_init(spank_t sp, int /*ac*/, char** /*av*/) {
  try {
    return task_init(sp);
  } catch (...) {
  }
  return 0;
}

int slurm_spank_exit(spank_t /*sp*/, int /*ac*/, char** /*av*/) {
  try {
    if (spank_context() == S_CTX_REMOTE) remove_step_dir();
  } catch (...) {
  }
  return 0;
}

}  // extern "C"
#pragma GCC visibility pop
