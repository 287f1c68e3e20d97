// The slurm launch backend: `srun --mpi=pmix --kill-on-bad-exit` inside an allocation, so
// that Slurm's PMIx plugin is every rank's server and the ranks span the allocation's nodes.
// Every task runs dltune-rank-env first, which gives it the rank variables the local backend
// sets (launcher/rank_env.h) before it execs the program; MASTER_ADDR is rank 0's node.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "launcher/backend/launch_spec.h"
#include "launcher/backend/plan_env.h"

namespace dltune::launcher {

// The srun command line for `spec` (srun resolved to `srun_path`; every task runs
// `rank_env_path PROGRAM ARGS...`), without the environment. Standard input goes to task 0
// only (--input=0), as under mpirun.
std::vector<std::string> srun_command(const std::string& srun_path,
                                      const std::string& rank_env_path, const LaunchSpec& spec);

// True inside a Slurm allocation (SLURM_JOB_ID is set).
bool in_slurm_allocation();
// The allocation's node count (SLURM_JOB_NUM_NODES, else SLURM_NNODES), 0 when unknown.
int allocation_nodes();
// How many distinct machines answered in `output`: srun's standard output of one task per
// node that printed /proc/sys/kernel/random/boot_id. boot_id is the running kernel's, and no
// namespace has its own, so Slurm nodes that are network namespaces of one host (as on
// tests/slurm/netns_cluster.sh's cluster) print the same id and separate computers different
// ones. Counts the distinct ids among the non-empty lines (blanks around a line ignored).
// Errors (invalid_input): a line that is not a boot id (a UUID: 8-4-4-4-12 hexadecimal
// digits), or not exactly `nodes` lines.
Result<int> count_boot_ids(std::string_view output, int nodes);

// The most count_node_machines() waits for its srun step.
inline constexpr int kNodeMachinesTimeoutMs = 10000;
// How many distinct machines the first `nodes` nodes of the current allocation are (the nodes
// a job step of that many nodes gets): one task per node (`srun --nodes=NODES --ntasks=NODES
// --ntasks-per-node=1 --quiet cat /proc/sys/kernel/random/boot_id`) prints its boot id, which
// count_boot_ids() counts. 1, running nothing, when nodes <= 1. srun is stopped (SIGTERM, then
// SIGKILL) after `timeout_ms`, e.g. when another step holds the allocation's CPUs. No launch
// needs the answer: callers take an error as "unknown" (every node a machine of its own).
// Errors: kUnsupported outside an allocation or without srun; kTimeout; kIo when srun fails;
// kInvalidInput when its output is not one boot id per node.
Result<int> count_node_machines(int nodes, int timeout_ms = kNodeMachinesTimeoutMs);

// The first `nodes` nodes of the current allocation that are not in `exclude`, in the
// allocation's order: the nodes a step of that many nodes with srun --exclude runs on. Errors:
// kUnsupported outside an allocation; scontrol's (it expands the allocation's host list).
Result<std::vector<std::string>> job_nodes(int nodes, const std::vector<std::string>& exclude);

// Whether `node` of the current allocation still runs a task: a one-task step on it
// (`srun --nodelist=NODE ... cat /proc/sys/kernel/random/boot_id`) that prints a boot id
// within `timeout_ms` (stopped then: a node whose slurmd is gone may hold srun until Slurm's
// own timeouts). False when the step fails or times out. Errors: kUnsupported outside an
// allocation or without srun.
Result<bool> node_answers(const std::string& node, int timeout_ms);

// Grows the current allocation by one node that is not already its own, by Slurm's job
// expansion: `salloc --nodes=1 --immediate=S --dependency=expand:JOBID --exclude=<its nodes> --
// scontrol update JobId=$SLURM_JOB_ID NumNodes=0` (the new job hands its node to this one; the
// site must permit it: SchedulerParameters=permit_job_expansion). Then points this process's
// SLURM_JOB_NODELIST, SLURM_NODELIST, SLURM_JOB_NUM_NODES and SLURM_NNODES at the grown
// allocation, as the resize script scontrol writes would, so that allocation_nodes(),
// job_nodes() and later srun steps see it. Waits about `timeout_ms` for a node (salloc's
// --immediate). Returns the new node's name. Errors: kUnsupported outside an allocation or
// without salloc / scontrol; kIo with salloc's last line when Slurm grants no node (none free,
// or expansion not permitted: then grow_refusal_hint()'s words too); kTimeout.
Result<std::string> grow_allocation(int timeout_ms);

// Replaces this process by `salloc --quiet [--no-kill] [--nodes=NODES] --ntasks=NTASKS --
// <this command line>`, so that the command runs again inside an allocation of that shape
// (salloc exits with its status). `keep_on_node_failure`: --no-kill, so that the allocation
// outlives a failed node (a job that restarts on the nodes left needs it). `nodes_max` >
// `nodes` asks for a range instead, `--nodes=NODES-NODES_MAX`: with NTASKS the tasks of
// nodes_max nodes, Slurm gives as many nodes as it has free up to nodes_max (with
// --ntasks-per-node it would give the least). Returns only on failure:
// kUnsupported when salloc is not installed, kIo when the command line cannot be read or exec
// fails.
Status rerun_in_allocation(int nodes, int ntasks, bool keep_on_node_failure = false,
                           int nodes_max = 0);

// One task-status line srun prints when a task ends badly, e.g.
//   "srun: error: n1: task 2: Exited with exit code 3"
//   "srun: error: n2: tasks 0,2-3: Killed"
struct SrunTaskFailure {
  std::string host;
  int rank = -1;       // the first task named on the line
  int exit_code = -1;  // when "Exited with exit code C"
  std::string signal;  // "Killed", "Terminated", ... otherwise
  // "rank 2 on n1 exited with code 3" / "rank 0 on n2 was killed by signal 9 (Killed)"; with
  // the job's PlanEnv, a pipeline's rank is named with its stage ("rank 3 (stage 1 of replica
  // 1) on n2 ...", rank_label()).
  std::string describe(const PlanEnv* plan_env = nullptr) const;
  // The exit code mpirun would give: exit_code, else 128 + the signal's number (1 when the
  // signal's name is not one strsignal() gives).
  int exit_status() const;
};
// Parses such a line; nullopt for any other line.
std::optional<SrunTaskFailure> parse_srun_failure(std::string_view line);

// The task that failed first, from all of srun's task-status lines of a run: srun's own
// --kill-on-bad-exit kill shows as "Terminated", so a task killed by another signal
// ("Killed", "Segmentation fault") is the cause; else the first task that exited with a
// non-zero code; else the first line. A task killed by a signal is reported late (after
// its peers saw it vanish and exited), which is why order alone is not enough.
std::optional<SrunTaskFailure> first_failure(const std::vector<SrunTaskFailure>& lines);

// What to add to salloc's refusal of a job expansion (`salloc_error`: grow_allocation()'s
// error text): where Slurm says the operation is not supported, that the site's slurm.conf
// needs SchedulerParameters=permit_job_expansion; "" for any other refusal (no node free).
std::string grow_refusal_hint(std::string_view salloc_error);

// Slurm's KillWait in seconds from `scontrol show config`'s output (its line "KillWait = 30
// sec"); nullopt when no such line gives a whole number of seconds.
std::optional<int> parse_kill_wait(std::string_view scontrol_config);

// How long srun may take to end after it reported a failed task, beyond Slurm's KillWait and
// its own 2 s: a loaded node's step daemons still answer within it.
inline constexpr int kSrunEndSlackS = 10;

// Runs spec.nranks ranks with srun inside the current allocation (see launcher/supervisor.h
// for the policy; srun gets SIGTERM for the launcher's SIGINT). The plan blob, when given, is
// written to a private file named in DLTUNE_PLAN for the ranks, with what external programs
// need of it (launcher/plan_env.h; the directory must be visible on every node: it is $TMPDIR,
// so on a real cluster point TMPDIR at a shared file system). MASTER_ADDR is the address of
// the allocation's first node (its NodeAddr), MASTER_PORT a port free there (the user's values
// win). With --nodes, the plan's placement binds each local rank's CPUs (srun
// --cpu-bind=mask_cpu, which needs the site's task/affinity plugin) unless --bind was given.
// srun, once it reported a failed task, gets KillWait + 2 s + kSrunEndSlackS to end (it stops
// the step first) and is stopped then: srun waits for every node's step daemon, and one on a
// node that is gone holds it until Slurm's own timeouts (minutes), the job's restart with it.
// Success: the outcome; a failed task is named from srun's task-status line, with its exit code (or
// 128 + signal, or MPI_Abort's error code) as the outcome's. Failure: kInvalidInput / kNotFound for
// a bad spec, kUnsupported when srun is not installed, kNotFound when dltune-rank-env is missing,
// kIo when no rendezvous port can be found.
Result<LaunchOutcome> run_slurm(const LaunchSpec& spec);

}  // namespace dltune::launcher
