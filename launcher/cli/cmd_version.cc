// `dltune version`: the version, the git revision, and which optional dependencies this
// build has.
#include <cstdio>
#include <string>

#include <sqlite3.h>

#include "launcher/cli/commands.h"

#include "dltune/config.h"

namespace dltune::cli {

namespace {

const char* yes_no(int have) { return have ? "yes" : "no"; }

int run_version(bool json) {
  const std::string hwloc = DLTUNE_HWLOC_VERSION;
  if (json) {
    std::printf(
        "{\"version\":\"%s\",\"git_revision\":\"%s\",\"hwloc\":\"%s\",\"sqlite\":\"%s\","
        "\"features\":{\"pmix\":%s,\"mpi\":%s,\"slurm\":%s,\"cuda\":%s,\"nccl\":%s}}\n",
        DLTUNE_VERSION, DLTUNE_GIT_REVISION, hwloc.c_str(), sqlite3_libversion(),
        DLTUNE_HAVE_PMIX ? "true" : "false", DLTUNE_HAVE_MPI ? "true" : "false",
        DLTUNE_HAVE_SLURM ? "true" : "false", DLTUNE_HAVE_CUDA ? "true" : "false",
        DLTUNE_HAVE_NCCL ? "true" : "false");
    return 0;
  }
  std::printf("dltune %s (git %s)\n", DLTUNE_VERSION, DLTUNE_GIT_REVISION);
  std::printf("  hwloc %s, SQLite %s\n", hwloc.c_str(), sqlite3_libversion());
  std::printf("  built with: PMIx %s, MPI %s, Slurm %s, CUDA %s, NCCL %s\n",
              yes_no(DLTUNE_HAVE_PMIX), yes_no(DLTUNE_HAVE_MPI), yes_no(DLTUNE_HAVE_SLURM),
              yes_no(DLTUNE_HAVE_CUDA), yes_no(DLTUNE_HAVE_NCCL));
  return 0;
}

}  // namespace

void setup_version(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("version", "Print the version, git revision and build features");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print as JSON");
  cmd->callback([exit_code, json] { *exit_code = run_version(*json); });
}

}  // namespace dltune::cli
