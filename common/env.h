// Every DLTUNE_* environment variable, declared once with its default and a one-line doc.
//
// Add a variable here (and to kAll in env.cc) before reading it anywhere; `dltune --help-env`
// prints this table. Read values with env::get(), never with getenv() directly.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace dltune {

struct EnvVar {
  std::string_view name;
  std::string_view default_value;  // "" = unset / none
  std::string_view doc;
};

namespace env {

inline constexpr EnvVar kDebug{"DLTUNE_DEBUG", "WARN",
                               "log level: NONE, ERROR, WARN, INFO, DEBUG or TRACE"};
inline constexpr EnvVar kDebugSubsys{
    "DLTUNE_DEBUG_SUBSYS", "ALL",
    "comma-separated subsystems to log (topo,launch,pmix,comm,engine,tuner,db,recipe,plugin,cli); "
    "ALL for every one; a leading ^ excludes the listed ones"};
inline constexpr EnvVar kDb{"DLTUNE_DB", "",
                            "user tuning database (default: $XDG_DATA_HOME/dltune/dltune.db)"};
inline constexpr EnvVar kSiteDb{"DLTUNE_SITE_DB", "",
                                "colon-separated site tuning databases, read-only"};
inline constexpr EnvVar kTrustedKeys{
    "DLTUNE_TRUSTED_KEYS", "",
    "file of trusted public keys (NAME BASE64 per line) that `dltune db import` and `db merge` "
    "check bundle signatures against"};
inline constexpr EnvVar kPlan{"DLTUNE_PLAN", "",
                              "path of the plan (JSON) a rank executes when not given by PMIx"};
inline constexpr EnvVar kRecipe{"DLTUNE_RECIPE", "",
                                "path of the recipe as run (YAML) a dltune rank trains when not "
                                "given by PMIx"};
inline constexpr EnvVar kRunsDir{"DLTUNE_RUNS_DIR", "runs",
                                 "where `dltune launch` creates run directories"};
inline constexpr EnvVar kTopoXml{"DLTUNE_TOPO_XML", "",
                                 "hwloc XML file to use instead of discovering this machine"};
inline constexpr EnvVar kTopoCache{"DLTUNE_TOPO_CACHE", "1",
                                   "0 to discover this machine every time instead of loading "
                                   "this boot's saved hwloc discovery (in $XDG_RUNTIME_DIR/dltune "
                                   "or /tmp/dltune-UID)"};
inline constexpr EnvVar kBind{"DLTUNE_BIND", "auto",
                              "default rank binding: none, core, numa, auto"};
inline constexpr EnvVar kBackend{"DLTUNE_BACKEND", "",
                                 "default launch backend: local or slurm (default: slurm inside "
                                 "an allocation, else local)"};
inline constexpr EnvVar kKillGrace{"DLTUNE_KILL_GRACE_MS", "2000",
                                   "ms between SIGTERM and SIGKILL when stopping ranks"};
inline constexpr EnvVar kNoColor{"DLTUNE_NO_PROGRESS", "",
                                 "set to 1 to print plain log lines instead of a progress display"};
inline constexpr EnvVar kCommTimeout{"DLTUNE_COMM_TIMEOUT_MS", "300000",
                                     "ms a collective or point-to-point operation may take "
                                     "before it fails with a timeout (a dead or mismatched peer)"};
inline constexpr EnvVar kNodeAnswer{
    "DLTUNE_NODE_ANSWER_MS", "10000",
    "ms a node is given to run a one-task step when a launch under Slurm asks which node of a "
    "failed job is lost (one that does not answer is asked again, for twice as long)"};
inline constexpr EnvVar kCommCma{
    "DLTUNE_COMM_CMA", "auto",
    "cross-memory attach for the 'cma' allreduce: auto (use it where the kernel allows "
    "process_vm_readv/writev between a node's ranks) or off (never; 'cma' then stages through "
    "node-shared memory as 'shm' does)"};
inline constexpr EnvVar kFaultTrialStep{
    "DLTUNE_FAULT_TRIAL_STEP", "",
    "fault injection for tests: RANK:N (or *:N for every rank) makes the Nth training step of "
    "a recipe-tuning trial on that rank fail as an out-of-memory step would"};
inline constexpr EnvVar kFaultCheckpointStall{
    "DLTUNE_FAULT_CHECKPOINT_STALL_MS", "",
    "fault injection for tests: MS (every checkpoint write) or STEP:MS (only step STEP's) "
    "makes a write wait that many ms before its rename, so that a test can fail the job while "
    "it is being written"};
inline constexpr EnvVar kLoaderThreads{
    "DLTUNE_LOADER_THREADS", "2",
    "threads per rank that read, decode and augment the samples of datasets read on demand "
    "(imagefolder, tokens) ahead of the training step"};
inline constexpr EnvVar kLoaderPrefetch{
    "DLTUNE_LOADER_PREFETCH", "2",
    "batches those loader threads keep ready ahead of the training step (each a batch of memory)"};
inline constexpr EnvVar kUpdateGolden{"DLTUNE_UPDATE_GOLDEN", "",
                                      "tests: set to 1 to rewrite golden output files instead of "
                                      "comparing against them"};

inline constexpr EnvVar kCpuMask{
    "DLTUNE_CPU_MASK", "",
    "comma-separated CPU features the engine must act as if the CPU lacked (avx512, bf16, amx, "
    "avx2): tests simulate a CPU without bf16 instructions with DLTUNE_CPU_MASK=bf16,amx"};
inline constexpr EnvVar kKernels{
    "DLTUNE_KERNELS", "",
    "generic: run the engine's hand-written kernels in their baseline x86-64 build instead of "
    "the AVX2 / AVX-512 one this CPU supports (tests check both)"};

// Every variable above, in the order `dltune --help-env` prints them.
std::span<const EnvVar> all();

// The variable's value when set and non-empty, else its default ("" when it has none).
std::string get(const EnvVar& var);
// The variable's value only when set and non-empty.
std::optional<std::string> get_if_set(const EnvVar& var);
// A readable table of all variables: name, default, doc.
std::string describe_all();

}  // namespace env
}  // namespace dltune
