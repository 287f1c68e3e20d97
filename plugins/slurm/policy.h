// The SPANK plugin's decisions, free of Slurm so that they are unit-tested without daemons:
// what the user asked for (--dltune[=PROFILE]), what the site configured (plugstack
// arguments), and what each task gets (environment variables from a fixed allow-list, CPU
// binding). The plugin (spank.cc) only gathers inputs from Slurm and applies the outputs.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "topology/topology.h"

namespace dltune::plugins::slurm {

// --dltune[=PROFILE]: no value means the profile "default"; "off" disables dltune for the
// job. Profiles are 1-64 characters of [A-Za-z0-9._-]. Anything else (very long values, shell
// metacharacters, path separators) is an invalid-input error and the job runs untouched.
struct UserRequest {
  bool enabled = false;
  std::string profile;
};
Result<UserRequest> parse_user_option(const char* optarg);

// Plugstack arguments, e.g. `optional /usr/lib/dltune/spank_dltune.so site_db=/etc/dltune/site.db
// default=on`: site_db (a root-owned, read-only database), default (on | off: whether jobs
// that did not pass --dltune get it). Unknown or malformed arguments are errors.
struct SiteConfig {
  std::string site_db;
  bool default_on = false;
};
Result<SiteConfig> parse_plugstack_args(int argc, char** argv);

// Whether dltune applies to this job: --dltune=off always wins, then --dltune, then the
// site default.
bool applies(const std::optional<UserRequest>& user, const SiteConfig& site);

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

// What task `ctx.local_task_id` gets: its placement on this node (topology::place with the
// step's local task count: cores, GPU, closest NIC and their variables), DLTUNE_PLAN when a
// plan file was written, and the Open MPI dynamic-rules variables when a rules file was.
// Errors: a local task id outside [0, local_tasks).
Result<TaskSettings> settings_for_task(const topology::Topology& topo, const TaskContext& ctx,
                                       const std::string& plan_path,
                                       const std::string& ompi_rules_path);

}  // namespace dltune::plugins::slurm
