// The Slurm SPANK plugin: `srun --dltune[=PROFILE]` applies dltune's plan for this node and
// step shape to every task (binding, GPU, NIC, collective settings, DLTUNE_PLAN); profiles are
// described in policy.h. `srun --dltune-tune` (or `--dltune=tuned`) first runs `dltune tune
// --collectives` as the job's user when the databases have no plan for this node and step
// shape (tune.h says where and how), then applies the plan it stored.
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

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/slurm/policy.h"
#include "plugins/slurm/step_plan.h"
#include "plugins/slurm/tune.h"
#include "topology/isolated_load.h"

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
bool g_tune_flag = false;           // --dltune-tune given
Profile g_profile = Profile::kDefault;
SiteConfig g_site;
StepFiles g_files;  // set in user_init, read in the forked tasks
dltune::topology::Topology g_topo;
bool g_active = false;
uid_t g_step_uid = 0;  // owner of the step directory (the job's user)

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

int tune_option_cb(int /*val*/, const char* /*optarg*/, int /*remote*/) {
  g_tune_flag = true;
  return 0;
}

struct spank_option g_options[] = {
    {const_cast<char*>("dltune"), const_cast<char*>("[PROFILE|off]"),
     const_cast<char*>("Apply dltune's tuned plan to every task. PROFILE: default (binding, "
                       "GPU/NIC selection, collective settings), bind-only, collectives-only, "
                       "tuned (default, tuning first when there is no plan); 'off' disables it"),
     2, 0, option_cb},
    {const_cast<char*>("dltune-tune"), nullptr,
     const_cast<char*>("When the dltune databases have no plan for this node and step shape, "
                       "run 'dltune tune --collectives' first (implies --dltune)"),
     0, 0, tune_option_cb},
    SPANK_OPTIONS_TABLE_END};

std::string job_env(spank_t sp, const char* name) {
  char buf[4096];
  if (spank_getenv(sp, name, buf, sizeof buf) != ESPANK_SUCCESS) return "";
  return buf;
}

// Tunes for this step as the job's user; logs one line either way. True when it succeeded.
bool tune_for_step(spank_t sp, const StepInputs& in, const std::string& topo_xml) {
  uid_t uid = 0;
  gid_t gid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
    slurm_error("dltune: cannot read the job's user; not tuning");
    return false;
  }
  const std::string wanted = g_site.dltune_bin.empty() ? default_dltune_bin() : g_site.dltune_bin;
  auto bin = trusted_binary(wanted);
  if (!bin) {
    slurm_error("dltune: not tuning: %s", bin.error().message().c_str());
    return false;
  }
  TuneRequest req;
  req.dltune_bin = *bin;
  req.local_tasks = in.local_tasks;
  req.max_bytes = g_site.tune_max_bytes;
  req.user_db = in.user_db;
  req.site_dbs = in.site_dbs;
  req.topo_xml = topo_xml;
  req.home = job_env(sp, "HOME");
  req.tmpdir = job_env(sp, "TMPDIR");
  auto rc = run_as_user(tune_command(req), uid, gid, g_site.tune_timeout_s);
  if (!rc) {
    slurm_error("dltune: tuning failed: %s", rc.error().message().c_str());
    return false;
  }
  if (*rc != 0) {
    slurm_error("dltune: '%s tune --collectives -n %d' as uid %u exited with status %d",
                req.dltune_bin.c_str(), req.local_tasks, static_cast<unsigned>(uid), *rc);
    return false;
  }
  slurm_info("dltune: tuned collectives for %d local task(s) as uid %u into %s", req.local_tasks,
             static_cast<unsigned>(uid),
             req.user_db.empty() ? "the default database" : req.user_db.c_str());
  return true;
}

// This node's topology, loaded by dltune-topo-probe as the job's user: hwloc never runs inside
// slurmstepd, where a hostile export (DLTUNE_TOPO_XML, or the user's own saved discovery) could
// crash a root process. The helper is bin/dltune-topo-probe beside the plugin's lib/ and must
// pass trusted_binary().
dltune::Result<dltune::topology::Topology> load_topology(spank_t sp, const std::string& xml) {
  uid_t uid = 0;
  gid_t gid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
    return dltune::internal_error("cannot read the job's user from Slurm");
  }
  auto helper = trusted_binary(dltune::topology::sibling_bin("dltune-topo-probe"));
  if (!helper) return std::move(helper).error().wrap("not reading the topology");
  dltune::topology::IsolatedLoad req;
  req.helper = *helper;
  req.xml_path = xml;
  req.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C", "HWLOC_HIDE_ERRORS=2"};
  for (const char* name : {"XDG_RUNTIME_DIR", "TMPDIR", "HOME"}) {
    const std::string v = job_env(sp, name);
    if (!v.empty() && v[0] == '/') req.env.push_back(std::string(name) + "=" + v);
  }
  if (job_env(sp, "DLTUNE_TOPO_CACHE") == "0") req.env.push_back("DLTUNE_TOPO_CACHE=0");
  if (::getuid() == 0) req.run_as = std::make_pair(uid, gid);
  return dltune::topology::load_isolated(req);
}

int user_init(spank_t sp) {
  const JobRequest req = resolve(g_user, g_tune_flag, g_site);
  if (!req.enabled) return 0;
  g_profile = req.profile;
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
  auto topo = load_topology(sp, xml);
  if (!topo) {
    slurm_error("dltune: %s; the job runs untouched", topo.error().message().c_str());
    return 0;
  }
  if (!effects(g_profile).collectives) {  // bind-only: no database involved
    g_topo = std::move(*topo);
    g_active = true;
    slurm_verbose("dltune: profile %s", profile_name(g_profile));
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
                std::to_string(::geteuid()) + "-" + std::to_string(job) + "." +
                std::to_string(step);
  g_step_uid = ::geteuid();
  auto files = prepare_step(*topo, in);
  bool tune_failed = false;
  if (files && !files->matches_step && req.tune) {
    tune_failed = !tune_for_step(sp, in, xml);
    files = prepare_step(*topo, in);
  }
  if (!files) {
    slurm_error("dltune: %s; the job runs untouched", files.error().message().c_str());
    return 0;
  }
  g_files = *files;
  if (g_files.plan_path.empty()) {
    if (!tune_failed) slurm_info("dltune: %s", g_files.description.c_str());  // else logged
    return 0;
  }
  g_topo = std::move(*topo);
  g_active = true;
  slurm_verbose("dltune: profile %s, plan from %s", profile_name(g_profile),
                g_files.description.c_str());
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
      g_files.plan_path, g_files.ompi_rules_path, g_profile);
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
  // slurm_spank_exit runs as root, in a directory the user owns inside a shared /tmp: open it
  // without following a symbolic link, check it is still the user's, and remove only the
  // files this plugin names, relative to that descriptor.
  if (g_files.plan_path.empty()) return;
  const std::string dir = g_files.plan_path.substr(0, g_files.plan_path.rfind('/'));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_uid == g_step_uid) {
    ::unlinkat(fd, "plan.json", 0);
    if (!g_files.ompi_rules_path.empty()) ::unlinkat(fd, "ompi_rules.conf", 0);
  }
  ::close(fd);
  ::rmdir(dir.c_str());  // only succeeds when empty
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  try {
    g_site = parse_plugstack_args(ac, av);
    const spank_context_t ctx = spank_context();
    // Said once per step, where the job's log is: by slurmstepd (remote context).
    if (!g_site.ignored.empty() && ctx == S_CTX_REMOTE) {
      slurm_error("dltune: %s", ignored_arguments_line(g_site).c_str());
    }
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
