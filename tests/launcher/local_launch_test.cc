// `dltune run` with the local backend, end to end: real PMIx server, real ranks.
// Every test also checks that nothing is left behind: no process carrying the test's marker,
// no temporary directory in the test's private TMPDIR, no new /dev/shm entry of ours.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <unistd.h>

#include "run_helper.h"

namespace dltune::testing {
namespace {

std::string host() {
  char buf[HOST_NAME_MAX + 1] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

class LocalLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dltune-launch-test-XXXXXX";
    tmpdir_ = mkdtemp(tmpl);
    marker_ = unique_marker();
    const auto shm = entries_with_prefix("/dev/shm", "");
    shm_before_ = std::set<std::string>(shm.begin(), shm.end());
  }
  void TearDown() override {
    EXPECT_TRUE(processes_with(marker_).empty()) << "a rank survived the launch";
    EXPECT_TRUE(entries_with_prefix(tmpdir_, "").empty()) << "temporary files left in TMPDIR";
    for (const auto& e : entries_with_prefix("/dev/shm", "")) {
      if (shm_before_.count(e) == 0 && (e.rfind("dltune-", 0) == 0 || e.find("vader") != e.npos)) {
        ADD_FAILURE() << "left in /dev/shm: " << e;
      }
    }
    rmdir(tmpdir_.c_str());
  }
  // dltune run <args> -- <program args> --marker <marker>
  RunResult dltune(std::vector<std::string> run_args, std::vector<std::string> program,
                   RunOptions opts = {}) {
    std::vector<std::string> argv = {binary("dltune"), "run"};
    argv.insert(argv.end(), run_args.begin(), run_args.end());
    argv.push_back("--");
    argv.insert(argv.end(), program.begin(), program.end());
    argv.push_back("--marker");
    argv.push_back(marker_);
    opts.env.emplace_back("TMPDIR", tmpdir_);
    opts.env.emplace_back("DLTUNE_KILL_GRACE_MS", "1000");
    opts.env.emplace_back("DLTUNE_BACKEND", "local");
    return run(argv, opts);
  }

  std::string tmpdir_;
  std::string marker_;
  std::set<std::string> shm_before_;
};

void expect_probe_lines(const RunResult& r, int n, const std::string& plan) {
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < n; ++rank) {
    const std::string want = "probe rank=" + std::to_string(rank) + " size=" + std::to_string(n) +
                             " local_rank=" + std::to_string(rank) +
                             " local_size=" + std::to_string(n) + " node=0/1 host=" + host() +
                             " peers=ok plan=" + plan + "\n";
    EXPECT_NE(r.out.find(want), std::string::npos) << "missing: " << want << "in:\n" << r.out;
  }
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), n) << r.out;
}

TEST_F(LocalLaunchTest, ProbesSeeTheirIdentityAndEveryPeer) {
  for (int n : {1, 2, 3, 8}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto r = dltune({"-n", std::to_string(n)}, {binary("pmix_probe")});
    expect_probe_lines(r, n, "");
    EXPECT_LT(r.seconds, 10.0);
  }
}

// A whole plan for a 1 x `ranks` job, ring allreduce everywhere, with `extra` JSON members.
std::string one_node_plan(int ranks, const std::string& extra = "") {
  return R"({"version":1,"collectives":{"allreduce":[{"min_bytes":0,)"
         R"("max_bytes":18446744073709551615,"algo":"ring","segment_bytes":0}]},)"
         R"("training":{"per_rank_batch":16,"global_batch":)" +
         std::to_string(16 * ranks) + R"(,"scaling":"weak"},)" + extra +
         R"("job":{"nodes":1,"ranks_per_node":)" + std::to_string(ranks) + "}}";
}

TEST_F(LocalLaunchTest, PlanReachesEveryRankAndOutputIsTagged) {
  const std::string plan_path = tmpdir_ + "-plan.json";
  const std::string plan = one_node_plan(3);
  std::ofstream(plan_path) << plan;
  auto r = dltune({"-n", "3", "--plan", plan_path, "--tag-output", "--bind", "core"},
                  {binary("pmix_probe")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string want =
        "[" + std::to_string(rank) + "] probe rank=" + std::to_string(rank) + " size=3";
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("plan=" + plan), std::string::npos) << r.out;  // the very file

  // What is not a plan is refused with exit 2 before any rank starts (a program that would
  // print shows nothing), and a missing file too.
  for (const char* text : {R"({"hello":1})", R"({"model":"mlp","steps":7})", "not json"}) {
    std::ofstream(plan_path) << text;
    auto bad = dltune({"-n", "2", "--plan", plan_path}, {"/bin/sh", "-c", "echo started"});
    EXPECT_EQ(bad.exit_code, 2) << text << ": " << bad.err;
    EXPECT_EQ(bad.out.find("started"), std::string::npos) << bad.out;
    EXPECT_NE(bad.err.find("is not a dltune plan"), std::string::npos) << bad.err;
  }
  unlink(plan_path.c_str());
  auto missing = dltune({"-n", "2", "--plan", plan_path}, {"/bin/true"});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  // A plan tuned for another shape is applied with a warning naming both shapes.
  std::ofstream(plan_path) << one_node_plan(2);
  auto other = dltune({"-n", "3", "--plan", plan_path}, {"/bin/true"});
  EXPECT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(other.err.find("tuned for a 1x2 job (nodes x ranks per node), this one is 1x3"),
            std::string::npos)
      << other.err;
  unlink(plan_path.c_str());
}

// The training rank program takes its plan and recipe from the job (PMIx job data) when it is
// given neither --plan nor --recipe: the model, the step count and the batch below are the
// recipe's and the plan's.
TEST_F(LocalLaunchTest, WorkerTrainsWithTheJobsPlan) {
  if (access(binary("dltune-worker").c_str(), X_OK) != 0) GTEST_SKIP() << "no dltune-worker";
  const std::string plan_path = tmpdir_ + "-train.json";
  const std::string recipe_path = tmpdir_ + "-train.yaml";
  std::ofstream(plan_path) << one_node_plan(2);
  std::ofstream(recipe_path) << "model: mlp\ndata: {kind: synthetic-digits, samples: 512, "
                                "heldout: 0}\ntraining: {steps: 7, batch: {per_rank: 16}, "
                                "seed: 3}\n";
  // Through sh: the worker takes no extra arguments, and the harness appends its marker.
  auto r = dltune({"-n", "2", "--bind", "none", "--plan", plan_path, "--recipe", recipe_path},
                  {"/bin/sh", "-c", "exec \"$0\" train", binary("dltune-worker")});
  unlink(plan_path.c_str());
  unlink(recipe_path.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out.substr(r.out.find('{')), nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << r.out;
  EXPECT_EQ(summary.value("model", ""), "mlp") << r.out;
  EXPECT_EQ(summary.value("steps", 0), 7) << r.out;
  EXPECT_EQ(summary.value("ranks", 0), 2) << r.out;
  EXPECT_EQ(summary.value("global_batch", 0), 32) << r.out;
}

TEST_F(LocalLaunchTest, OpenMpiProgramGetsTheWholeWorld) {
  if (access(binary("mpi_probe").c_str(), X_OK) != 0) GTEST_SKIP() << "built without Open MPI";
  auto r = dltune({"-n", "4"}, {binary("mpi_probe"), "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mpi rank=0 size=4 sum=10"), std::string::npos) << r.out << r.err;
}

TEST_F(LocalLaunchTest, PlainProgramsRunToo) {
  auto r = dltune({"-n", "2", "--tag-output"}, {"/bin/sh", "-c", "echo hi $RANK/$WORLD_SIZE"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[0] hi 0/2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] hi 1/2"), std::string::npos) << r.out;
}

// More ranks than CPUs: Open MPI is told to yield while it waits (as mpirun --oversubscribe
// does); otherwise it is left to spin.
TEST_F(LocalLaunchTest, OversubscribedRanksAreToldToYield) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int cpus = CPU_COUNT(&set);
  for (int n : {1, cpus + 1}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto r = dltune({"-n", std::to_string(n), "--bind", "none"},
                    {"/bin/sh", "-c", "echo \"yield=${OMPI_MCA_mpi_yield_when_idle:-unset}\""});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string want = n > cpus ? "yield=1\n" : "yield=unset\n";
    size_t found = 0;
    for (size_t at = r.out.find(want); at != std::string::npos; at = r.out.find(want, at + 1)) {
      ++found;
    }
    EXPECT_EQ(found, static_cast<size_t>(n)) << r.out;
  }
}

struct Fault {
  const char* mode;
  const char* expect;  // in stderr
  std::vector<std::string> extra_run_args;
  int exit_code;  // as mpirun gives it: the rank's code, 128 + its signal, else 1
};

TEST_F(LocalLaunchTest, AFailingRankStopsTheJobAndIsNamed) {
  const std::vector<Fault> faults = {
      {"exit3", "rank 1 on HOST exited with code 3", {}, 3},
      {"kill-in-fence", "rank 2 on HOST was killed by signal 9", {}, 128 + 9},
      {"no-finalize", "rank 1 on HOST exited with code 0 without calling PMIx_Finalize", {}, 1},
      {"hang", "rank 1 on HOST was still running", {"--timeout", "2"}, 1},
  };
  for (const Fault& f : faults) {
    SCOPED_TRACE(f.mode);
    const std::string fault_rank = std::string(f.mode) == "kill-in-fence" ? "2" : "1";
    std::vector<std::string> args = {"-n", "4"};
    args.insert(args.end(), f.extra_run_args.begin(), f.extra_run_args.end());
    auto r = dltune(args, {binary("pmix_probe"), "--fault", f.mode, "--fault-rank", fault_rank});
    EXPECT_EQ(r.exit_code, f.exit_code) << r.err;
    EXPECT_LT(r.seconds, 10.0);
    std::string want = f.expect;
    want.replace(want.find("HOST"), 4, host());
    EXPECT_NE(r.err.find("dltune run: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    EXPECT_TRUE(processes_with(marker_).empty()) << "a rank survived " << f.mode;
  }
}

// A batch script can tell MPI_Abort(7) from a segfault, as under mpirun: the exit status is the
// error code, or 128 + the signal; the message names the rank, its host and the cause, without
// Open MPI's "N/A" placeholder message.
TEST_F(LocalLaunchTest, ExitStatusTellsAbortFromCrash) {
  if (access(binary("mpi_probe").c_str(), X_OK) != 0) GTEST_SKIP() << "built without Open MPI";
  auto abort = dltune({"-n", "2"}, {binary("mpi_probe"), "2", "abort"});
  EXPECT_EQ(abort.exit_code, 7) << abort.err;
  EXPECT_NE(abort.err.find("dltune run: rank 1 on " + host() +
                           " called MPI_Abort / PMIx_Abort with error code 7"),
            std::string::npos)
      << abort.err;
  EXPECT_EQ(abort.err.find("N/A"), std::string::npos) << abort.err;
  auto segv = dltune({"-n", "3"}, {"/bin/sh", "-c", "[ $RANK = 2 ] && kill -SEGV $$; sleep 20"});
  EXPECT_EQ(segv.exit_code, 128 + 11) << segv.err;
  EXPECT_NE(segv.err.find("rank 2 on " + host() + " was killed by signal 11"), std::string::npos)
      << segv.err;
  EXPECT_LT(segv.seconds, 10.0);
}

// What torchrun and mpirun give every rank: PyTorch's env:// rendezvous (one port for the job)
// and OMPI_COMM_WORLD_* for wrapper scripts that run before MPI_Init.
TEST_F(LocalLaunchTest, RanksGetTorchAndOpenMpiVariables) {
  auto r = dltune({"-n", "3"},
                  {"/bin/sh", "-c",
                   "echo \"rank=$RANK/$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE "
                   "group=$GROUP_RANK/$GROUP_WORLD_SIZE ompi=$OMPI_COMM_WORLD_RANK/"
                   "$OMPI_COMM_WORLD_SIZE/$OMPI_COMM_WORLD_LOCAL_RANK/$OMPI_COMM_WORLD_LOCAL_SIZE "
                   "master=$MASTER_ADDR:$MASTER_PORT\""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> masters;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string k = std::to_string(rank);
    const std::string want = "rank=" + k + "/3 local=" + k + "/3 group=0/1 ompi=" + k + "/3/" + k +
                             "/3 master=127.0.0.1:";
    const size_t at = r.out.find(want);
    ASSERT_NE(at, std::string::npos) << want << " in\n" << r.out;
    masters.insert(r.out.substr(at + want.size(), r.out.find('\n', at) - at - want.size()));
  }
  ASSERT_EQ(masters.size(), 1u) << "one MASTER_PORT per job:\n" << r.out;
  const int port = std::atoi(masters.begin()->c_str());
  EXPECT_GT(port, 0) << r.out;
  EXPECT_LT(port, 65536) << r.out;
  // The user's own choice wins.
  RunOptions mine;
  mine.env = {{"MASTER_PORT", "29511"}};
  auto m = dltune({"-n", "2"}, {"/bin/sh", "-c", "echo port=$MASTER_PORT"}, mine);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(m.out, "port=29511\nport=29511\n");
}

// What torchrun sets (issue 39): each rank's OpenMP and BLAS libraries start as many threads
// as the rank has CPUs when bound, else its share of the node's; a variable the user set wins.
TEST_F(LocalLaunchTest, RanksGetTheThreadCountsOfTheirCpus) {
  for (const char* v : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}) {
    if (std::getenv(v) != nullptr) GTEST_SKIP() << v << " is set in this test's environment";
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int cpus = CPU_COUNT(&set);
  const std::vector<std::string> show = {
      "/bin/sh", "-c",
      "echo \"t=$OMP_NUM_THREADS/$OPENBLAS_NUM_THREADS/$MKL_NUM_THREADS "
      "cpus=$(env -u OMP_NUM_THREADS nproc)\""};  // nproc heeds OMP_NUM_THREADS
  // Bound (the node's cores split among the ranks): as many threads as the CPUs its binding
  // gives it (its affinity). On 2 cores that is also the node's share; thread_env()'s unit test
  // tells the two apart.
  auto bound = dltune({"-n", "2", "--bind", "core"}, show);
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  int lines = 0;
  std::istringstream out(bound.out);
  for (std::string line; std::getline(out, line);) {
    const std::string n = line.substr(line.find("cpus=") + 5);
    EXPECT_EQ(line, "t=" + n + "/" + n + "/" + n + " cpus=" + n) << bound.out;
    ++lines;
  }
  EXPECT_EQ(lines, 2) << bound.out;
  // Unbound: the node's CPUs shared among its ranks.
  auto unbound = dltune({"-n", "2", "--bind", "none"}, show);
  ASSERT_EQ(unbound.exit_code, 0) << unbound.err;
  const std::string t = std::to_string(std::max(1, cpus / 2));
  const std::string want = "t=" + t + "/" + t + "/" + t + " cpus=" + std::to_string(cpus) + "\n";
  EXPECT_EQ(unbound.out, want + want) << unbound.out;
  // The user's own setting wins, variable by variable.
  RunOptions mine;
  mine.env = {{"OMP_NUM_THREADS", "3"}};
  auto m = dltune({"-n", "2", "--bind", "none"}, show, mine);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const std::string w = "t=3/" + t + "/" + t + " cpus=" + std::to_string(cpus) + "\n";
  EXPECT_EQ(m.out, w + w) << m.out;
}

// What mpirun users type (issue 39): `-np N`, `-x NAME=VALUE` and `-x NAME` (this command's
// value); a -x that names nothing to export is refused before any rank starts.
TEST_F(LocalLaunchTest, SpeaksMpirunsOptions) {
  RunOptions mine;
  mine.env = {{"DLTUNE_TEST_EXPORTED", "from-here"}};
  auto r = dltune({"-np", "2", "-x", "FOO=bar baz", "-x", "DLTUNE_TEST_EXPORTED"},
                  {"/bin/sh", "-c", "echo \"$FOO|$DLTUNE_TEST_EXPORTED|$WORLD_SIZE\""}, mine);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "bar baz|from-here|2\nbar baz|from-here|2\n");
  auto unset = dltune({"-n", "1", "-x", "DLTUNE_TEST_NEVER_SET"}, {"/bin/true"});
  EXPECT_EQ(unset.exit_code, 2) << unset.err;
  EXPECT_NE(unset.err.find("-x DLTUNE_TEST_NEVER_SET: DLTUNE_TEST_NEVER_SET is not set here"),
            std::string::npos)
      << unset.err;
  auto bad = dltune({"-n", "1", "-x", "1X=2"}, {"/bin/true"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("-x 1X=2: expected NAME=VALUE or NAME"), std::string::npos) << bad.err;
}

// mpirun's --output-filename (each rank's lines in DIR/1/rank.N/stdout and stderr, printed too
// unless DIR:nocopy), --timestamp-output and --bind-to (issue 39).
TEST_F(LocalLaunchTest, WritesEachRanksOutputToItsFiles) {
  char tmpl[] = "/tmp/dltune-output-test-XXXXXX";  // not TMPDIR: TearDown wants that one empty
  const std::string base = mkdtemp(tmpl);
  const std::string dir = base + "/logs";
  const std::vector<std::string> prog = {"/bin/sh", "-c", "echo out $RANK; echo err $RANK >&2"};
  auto r = dltune({"-n", "2", "--output-filename", dir, "--tag-output"}, prog);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string rank : {"0", "1"}) {
    std::ifstream out(dir + "/1/rank." + rank + "/stdout"),
        err(dir + "/1/rank." + rank + "/stderr");
    std::string o((std::istreambuf_iterator<char>(out)), {}),
        e((std::istreambuf_iterator<char>(err)), {});
    EXPECT_EQ(o, "out " + rank + "\n");
    EXPECT_EQ(e, "err " + rank + "\n");
    EXPECT_NE(r.out.find("[" + rank + "] out " + rank + "\n"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("[" + rank + "] err " + rank + "\n"), std::string::npos) << r.err;
  }
  // :nocopy: the files only; with --timestamp-output, every line starts with its time.
  const std::string quiet = base + "/quiet";
  auto q = dltune({"-n", "1", "--output-filename", quiet + ":nocopy", "--timestamp-output"}, prog);
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out, "");
  std::ifstream in(quiet + "/1/rank.0/stdout");
  const std::string line((std::istreambuf_iterator<char>(in)), {});
  EXPECT_TRUE(
      std::regex_match(line, std::regex(R"(\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] out 0\n)")))
      << line;
  // --bind-to in mpirun's words; what dltune cannot honour is refused before any rank starts.
  auto bound = dltune({"-n", "1", "--bind-to", "none"}, {"/bin/sh", "-c", "echo ran"});
  EXPECT_EQ(bound.exit_code, 0) << bound.err;
  EXPECT_EQ(bound.out, "ran\n");
  for (const char* v : {"socket", "hwthread", "board"}) {
    auto bad = dltune({"-n", "1", "--bind-to", v}, {"/bin/sh", "-c", "echo ran"});
    EXPECT_EQ(bad.exit_code, 2) << v << ": " << bad.err;
    EXPECT_EQ(bad.out, "") << v;
    EXPECT_NE(bad.err.find(std::string("--bind-to ") + v), std::string::npos) << bad.err;
  }
  // --map-by in mpirun's words (the placement itself: topology's placement_test). The ranks'
  // affinity shows where they went: on this machine's one NUMA domain every mapping puts 2
  // ranks on disjoint cores.
  auto mapped = dltune({"-n", "2", "--bind-to", "core", "--map-by", "numa"},
                       {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"});
  EXPECT_EQ(mapped.exit_code, 0) << mapped.err;
  EXPECT_EQ(std::count(mapped.out.begin(), mapped.out.end(), '\n'), 2) << mapped.out;
  for (const char* v : {"node", "ppr:1:socket", "hwthread"}) {
    auto bad = dltune({"-n", "1", "--map-by", v}, {"/bin/sh", "-c", "echo ran"});
    EXPECT_EQ(bad.exit_code, 2) << v << ": " << bad.err;
    EXPECT_EQ(bad.out, "") << v;
    EXPECT_NE(bad.err.find(std::string("unknown mapping '") + v), std::string::npos) << bad.err;
  }
  auto both = dltune({"-n", "1", "--bind", "core", "--bind-to", "core"}, {"/bin/true"});
  EXPECT_EQ(both.exit_code, 2) << both.err;
  auto file = dltune({"-n", "1", "--output-filename", dir + "/1/rank.0/stdout"}, {"/bin/true"});
  EXPECT_EQ(file.exit_code, 2) << file.err;
  EXPECT_NE(file.err.find("--output-filename"), std::string::npos) << file.err;
  std::filesystem::remove_all(base);
}

// Standard input reaches rank 0 (mpirun's default); the other ranks read an empty input.
TEST_F(LocalLaunchTest, StandardInputGoesToRankZero) {
  RunOptions opts;
  opts.stdin_data = "first line\nsecond line\n";
  auto r = dltune({"-n", "2", "--tag-output"},
                  {"/bin/sh", "-c",
                   "n=0; while read l; do n=$((n+1)); echo \"got [$l]\"; done; "
                   "echo lines=$n"},
                  opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[0] got [first line]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0] got [second line]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0] lines=2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] lines=0\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[1] got"), std::string::npos) << r.out;
}

// More ranks than cores with --bind core: mpirun refuses without --oversubscribe; dltune runs
// them and says that they share cores.
TEST_F(LocalLaunchTest, MoreRanksThanCoresWithBindCoreWarns) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int n = CPU_COUNT(&set) + 1;  // more than the PUs, so more than the cores
  auto r = dltune({"-n", std::to_string(n), "--bind", "core"}, {"/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("dltune run: warning: " + std::to_string(n) + " ranks on "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("cores with --bind core: ranks share cores"), std::string::npos) << r.err;
  auto fits = dltune({"-n", "1", "--bind", "core"}, {"/bin/true"});
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.err.find("warning"), std::string::npos) << fits.err;
}

// --plan is applied to programs that are not dltune's: Open MPI gets coll/tuned rules made from
// the plan's collectives, NCCL dltune's tuner plugin, and each rank the plan's CPU binding.
TEST_F(LocalLaunchTest, PlanIsAppliedToExternalPrograms) {
  const std::string plan_path = tmpdir_ + "-ext-plan.json";
  std::ofstream(plan_path) << one_node_plan(
      2, R"("placement":[{"local_rank":0,"cpus":[0],"gpu":-1,"nic":""},)"
         R"({"local_rank":1,"cpus":[0],"gpu":-1,"nic":""}],)");
  const std::string show =
      "echo \"rank=$RANK dyn=$OMPI_MCA_coll_tuned_use_dynamic_rules "
      "cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2) "
      "nccl=${NCCL_TUNER_PLUGIN:-none}\"; grep -c allreduce \"$DLTUNE_PLAN\"; "
      "grep '# comm size' \"$OMPI_MCA_coll_tuned_dynamic_rules_filename\"";
  auto r = dltune({"-n", "2", "--plan", plan_path}, {"/bin/sh", "-c", show});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank=0 dyn=1 cpus=0 nccl=/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank=1 dyn=1 cpus=0 nccl=/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 # comm size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libnccl-tuner-dltune.so"), std::string::npos) << r.out;
  // --bind given: the user's binding, not the plan's.
  auto mine = dltune({"-n", "2", "--plan", plan_path, "--bind", "none"},
                     {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"});
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_EQ(mine.out.find("Cpus_allowed_list:\t0\n"), std::string::npos) << mine.out;

  // Open MPI itself runs the plan's algorithm: ring halves each rank's reduction at 2 ranks
  // (tests/tuner/allreduce_probe.c), where its own choice, recursive doubling, does not.
  if (access(binary("allreduce_probe").c_str(), X_OK) == 0) {
    auto ring = dltune({"-n", "2", "--plan", plan_path}, {binary("allreduce_probe"), "1024"});
    ASSERT_EQ(ring.exit_code, 0) << ring.err;
    EXPECT_NE(ring.out.find("rank 0 calls 1 elems 512 ok"), std::string::npos) << ring.out;
    auto plain = dltune({"-n", "2"}, {binary("allreduce_probe"), "1024"});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_NE(plain.out.find("rank 0 calls 1 elems 1024 ok"), std::string::npos) << plain.out;
  }
  unlink(plan_path.c_str());
}

TEST_F(LocalLaunchTest, SigintStopsEveryRank) {
  RunOptions opts;
  opts.sigint_after_ms = 1000;
  auto r = dltune({"-n", "3"}, {"/bin/sh", "-c", "sleep 30"}, opts);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_LT(r.seconds, 6.0);
  EXPECT_NE(r.err.find("SIGINT"), std::string::npos) << r.err;
}

TEST_F(LocalLaunchTest, SecondSigintKillsRanksThatIgnoreTheFirst) {
  RunOptions opts;
  opts.sigint_after_ms = 800;
  opts.sigint_count = 2;
  auto r = dltune({"-n", "2"}, {"/bin/sh", "-c", "trap '' INT; sleep 30"}, opts);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_LT(r.seconds, 1.0 + 0.9);  // well before the 1 s grace would have expired
}

TEST_F(LocalLaunchTest, BadUsageExitsTwoWithOneSentence) {
  struct Case {
    std::vector<std::string> argv;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {{binary("dltune"), "run", "-n", "2"}, "no program given"},
      {{binary("dltune"), "run", "-n", "0", "--", "true"}, "at least 1"},
      {{binary("dltune"), "run", "-n", "2", "--frobnicate", "--", "true"}, "frobnicate"},
      {{binary("dltune"), "run", "-n", "2", "--", "no-such-program-xyz"}, "not found in PATH"},
      {{binary("dltune"), "run", "-n", "2", "--bind", "socket", "--", "true"}, "socket"},
      {{binary("dltune"), "run", "-n", "2", "--backend", "mpirun", "--", "true"}, "mpirun"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expect);
    RunOptions opts;
    opts.env.emplace_back("TMPDIR", tmpdir_);
    auto r = run(c.argv, opts);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// `dltune bench` end to end: two ranks through `dltune run`, DESIGN.md's JSON on stdout.
TEST_F(LocalLaunchTest, BenchPrintsEveryAlgorithmAndBoundAsJson) {
  RunOptions opts;
  opts.env.emplace_back("TMPDIR", tmpdir_);
  opts.env.emplace_back("DLTUNE_BACKEND", "local");
  auto r = run({binary("dltune"), "bench", "-n", "2", "--algo", "rd,shm,ring", "--max-bytes",
                "1KiB", "--json"},
               opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("ranks"), 2);
  EXPECT_EQ(j.at("nodes"), 1);
  ASSERT_EQ(j.at("results").size(), 9u * 3u);  // 4 B .. 1 KiB
  std::set<std::string> algos;
  for (const auto& e : j.at("results")) {
    algos.insert(e.at("algo").get<std::string>());
    EXPECT_GT(e.at("median_us").get<double>(), 0) << e;
  }
  EXPECT_EQ(algos, (std::set<std::string>{"rd", "shm", "ring"}));
  ASSERT_EQ(j.at("bounds").size(), 9u);
  for (const auto& b : j.at("bounds")) {
    EXPECT_GT(b.at("alpha_beta_us").get<double>(), 0) << b;
    EXPECT_GT(b.at("exchange_us").get<double>(), 0) << b;  // 2 ranks on one node
  }

  // Bad input: exit 2, one sentence on stderr, nothing on stdout.
  for (const auto& [arg, value, expect] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--algo", "bogus", "unknown algorithm 'bogus'"},
           {"--max-bytes", "2", "--min-bytes <= --max-bytes"}}) {
    auto bad = run({binary("dltune"), "bench", "-n", "2", arg, value}, opts);
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find(expect), std::string::npos) << bad.err;
    EXPECT_EQ(bad.out, "");
  }
}

}  // namespace
}  // namespace dltune::testing
