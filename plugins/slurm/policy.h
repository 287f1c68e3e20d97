// The SPANK plugin's decisions, free of Slurm so that they are unit-tested without daemons:
// what the user asked for (--dltune[=PROFILE]), what the site configured (plugstack
// arguments), and what each task gets (environment variables from a fixed allow-list, CPU
// binding). The plugin (spank.cc) only gathers inputs from Slurm and applies the outputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "topology/topology.h"

namespace dltune::plugins::slurm {

// What a profile (`--dltune=PROFILE`) applies to each task:
//   default           placement (CPU binding, CUDA_VISIBLE_DEVICES, closest NIC variables,
//                     DLTUNE_LOCAL_*/DLTUNE_CPUS) and collective settings (DLTUNE_PLAN, the
//                     Open MPI rules file), only when the databases have a plan for the step.
//   bind-only         placement only; no database look-up, so it applies with or without a plan.
//   collectives-only  collective settings only (DLTUNE_PLAN, Open MPI rules, DLTUNE_LOCAL_*); no
//                     binding, no device or NIC variables. Needs a plan.
//   tuned             default, plus `dltune tune --collectives` first when the databases have
//                     no plan for this node and step shape (as `--dltune-tune` does).
enum class Profile { kDefault, kBindOnly, kCollectivesOnly, kTuned };
const char* profile_name(Profile p);
struct ProfileEffects {
  bool placement = false;    // binding + device/NIC variables
  bool collectives = false;  // needs the plan: DLTUNE_PLAN + Open MPI rules
  bool tune = false;         // tune when the plan is missing
};
ProfileEffects effects(Profile p);

// --dltune[=PROFILE]: no value means the profile "default"; "off" disables dltune for the
// job. Anything but "off" and the four profile names above (unknown names, very long values,
// shell metacharacters, path separators) is an invalid-input error and the job runs untouched.
struct UserRequest {
  bool enabled = false;
  Profile profile = Profile::kDefault;
};
Result<UserRequest> parse_user_option(const char* optarg);

// Plugstack arguments, e.g. `optional /usr/lib/dltune/spank_dltune.so site_db=/etc/dltune/site.db
// default=on`: site_db (a root-owned, read-only database), default (on | off: whether jobs
// that did not pass --dltune get it), dltune=/absolute/path (the dltune binary `--dltune-tune`
// runs; default: bin/dltune next to the plugin's lib/ directory), tune_timeout=SECONDS (1-3600,
// default 300: the tuning run is killed after it), tune_max_bytes=N (largest message size
// tuned; default dltune's own).
struct SiteConfig {
  std::string site_db;
  bool default_on = false;
  std::string dltune_bin;
  int tune_timeout_s = 300;
  uint64_t tune_max_bytes = 0;
  // Arguments that were not understood, each as "'ARG'": they are ignored and every other
  // setting on the line still applies (the plugin logs them on one line).
  std::vector<std::string> ignored;
};
// Never fails: an unknown or malformed argument goes to `ignored` and leaves its setting at the
// default; the valid arguments before and after it apply.
SiteConfig parse_plugstack_args(int argc, char** argv);
// The one log line for `site.ignored` ("" when nothing was ignored).
std::string ignored_arguments_line(const SiteConfig& site);

// Whether dltune applies to this job: --dltune=off always wins, then --dltune, then the
// site default.
bool applies(const std::optional<UserRequest>& user, const SiteConfig& site);

// The job's request from both options: --dltune=off wins over everything; --dltune-tune
// (`tune_flag`) alone means --dltune with the default profile plus tuning; the tuned profile
// implies tuning.
struct JobRequest {
  bool enabled = false;
  Profile profile = Profile::kDefault;
  bool tune = false;
};
JobRequest resolve(const std::optional<UserRequest>& user, bool tune_flag, const SiteConfig& site);

// The only variables the plugin ever sets.
bool is_allowed_variable(const std::string& name);

struct TaskContext {
  int nodes = 1;
  int local_tasks = 1;
  int local_task_id = 0;
};

struct TaskSettings {
  std::vector<std::pair<std::string, std::string>> env;  // every name passes is_allowed_variable
  std::vector<int> cpus;                                 // bind to these PUs; empty = leave
};

// What task `ctx.local_task_id` gets under `profile`: when its effects include placement, its
// placement on this node (topology::place with the step's local task count: cores, GPU,
// closest NIC and their variables); when they include collectives, DLTUNE_PLAN when a plan
// file was written and the Open MPI dynamic-rules variables when a rules file was; always
// DLTUNE_LOCAL_RANK / DLTUNE_LOCAL_SIZE. Errors: a local task id outside [0, local_tasks).
Result<TaskSettings> settings_for_task(const topology::Topology& topo, const TaskContext& ctx,
                                       const std::string& plan_path,
                                       const std::string& ompi_rules_path,
                                       Profile profile = Profile::kDefault);

}  // namespace dltune::plugins::slurm
