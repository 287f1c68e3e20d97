// `srun --dltune-tune` (and `--dltune=tuned`): running `dltune tune --collectives -n <local
// tasks>` for the step inside the allocation when the databases have no plan for this node and
// step shape, before the tasks start.
//
// Where it runs: slurm_spank_user_init in slurmstepd (remote context), once per node and step,
// before any task is forked. slurmstepd has only lowered its effective uid there, so the child
// drops real, effective and saved uid/gid to the job's user before exec and checks that root
// cannot be regained; it gets a closed set of file descriptors, a fixed environment (below) and
// its own process group, and is killed (the whole group) after the site's timeout. The program
// is never looked up on the user's PATH: it is the plugstack's `dltune=/abs/path`, else
// bin/dltune next to the plugin's lib/ directory, and it must pass trusted_binary().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <sys/types.h>

#include "common/result.h"

namespace dltune::plugins::slurm {

struct TuneRequest {
  std::string dltune_bin;  // absolute, checked by trusted_binary()
  int local_tasks = 1;     // -n
  uint64_t max_bytes = 0;  // --max-bytes; 0 = dltune's default
  std::string user_db;     // --db (the job's user database); "" = dltune's own default
  std::string site_dbs;    // DLTUNE_SITE_DB for the child, colon-separated
  std::string topo_xml;    // DLTUNE_TOPO_XML for the child ("" = discover this node)
  std::string home;        // HOME for the child (only when absolute)
  std::string tmpdir;      // TMPDIR for the child (only when absolute)
};

struct TuneCommand {
  std::vector<std::string> argv;  // argv[0] is the absolute program path
  std::vector<std::string> env;   // NAME=value, nothing else
};

// The command line and the whole environment of the tuning run: PATH is fixed
// (/usr/local/bin:/usr/bin:/bin, for mpirun), LANG=C, and only DLTUNE_SITE_DB,
// DLTUNE_TOPO_XML, HOME and TMPDIR from the request (relative paths are dropped).
TuneCommand tune_command(const TuneRequest& req);

// Ok when `path` is absolute and resolves to a regular, executable file owned by root and not
// writable by group or others, and every directory from its own up to / is owned by root and
// not writable by group or others unless sticky (as /tmp); returns the resolved path. Errors
// say which check failed.
Result<std::string> trusted_binary(const std::string& path);

// bin/dltune next to the directory this plugin was loaded from ("" when unknown).
std::string default_dltune_bin();

// Runs `cmd` as uid/gid (see the header comment), waits at most `timeout_s` seconds, and
// returns its exit status (128 + signal when killed). Errors: fork failed, or the timeout
// (the group was killed).
Result<int> run_as_user(const TuneCommand& cmd, uid_t uid, gid_t gid, int timeout_s);

}  // namespace dltune::plugins::slurm
