// Supervisor: starts the processes of a launch, forwards their output line by line, reaps
// them, and stops all of them on the first failure or on a signal to the launcher.
//
// Used by both backends: the local backend spawns one child per rank, the slurm backend one
// child (srun). Each child runs in its own process group, so signals reach the processes a
// rank started too; when a child exits, what is left in its group gets SIGKILL, so nothing
// outlives the launch, and when it did not exit with code 0 its node-shared memory segments
// (/dev/shm/dltune-<pid>-*, common/shm_name.h) are removed.
//
//   Supervisor sup(opts);
//   DLTUNE_TRY(sup.install_signal_handling());   // before any thread is created
//   for (...) DLTUNE_TRY(sup.spawn(child));
//   LaunchOutcome out = sup.run();
//
// Policy (DESIGN.md "Failure behaviour"): the first child whose exit the ExitJudge calls a
// failure (default: a non-zero code or a signal; a death by signal within 150 ms of a failed
// exit counts as first, since peers of a killed rank often exit before it is reaped) makes every
// other group get SIGTERM, then SIGKILL after Options::kill_grace_ms; run() returns, as mpirun
// does, that child's exit code (128 + the signal when it was killed; 1 when the judge failed an
// exit with code 0, or the job timed out) and one sentence naming the child, its host and its
// exit code or signal. SIGINT / SIGTERM to the launcher are forwarded to every group (SIGKILL
// follows after the grace period; a second SIGINT sends it at once) and run() returns 130 / 143.
//
// Standard input: the one child spawned with ChildSpec::stdin_from_launcher reads the
// launcher's standard input through a pipe the supervisor feeds (mpirun's default: rank 0 gets
// it); every other child reads /dev/null, or its ChildSpec::stdin_prefix and then the end. The
// child is in a process group of its own, so it could not read a terminal itself. The launcher
// ignores SIGTTIN: in a background job, reading the terminal ends the forwarding (EIO, seen as end
// of input) instead of stopping the job.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <signal.h>
#include <sys/types.h>

#include "common/result.h"
#include "launcher/backend/death_order.h"
#include "launcher/backend/launch_spec.h"

namespace dltune::launcher {

struct ChildSpec {
  std::string path;                  // executable to run (already resolved)
  std::vector<std::string> argv;     // argv[0] included
  char** envp = nullptr;             // NULL-terminated; must stay valid during spawn()
  std::vector<int> cpus;             // CPUs to bind to; empty = inherit
  std::string name;                  // "rank 3", used in messages and by the judge
  std::string host;                  // where it runs, for messages
  bool stdin_from_launcher = false;  // see "Standard input" above (one child at most)
  // Written to the child's standard input before anything else (a secret that must not show
  // in its command line, where every user of the machine can read it); then the launcher's
  // input (stdin_from_launcher) or the end of input.
  std::string stdin_prefix = {};
};

// A verdict: one sentence, and the exit code the launch ends with.
struct Failure {
  std::string why;  // "" = no failure
  int exit_code = 1;
};

class Supervisor {
 public:
  struct Options {
    bool tag_output = false;   // prefix each line with "[index] "
    int kill_grace_ms = 2000;  // SIGTERM -> SIGKILL
    double timeout_s = 0;      // > 0: fail the job when it runs longer
    // What the children get when the launcher receives SIGINT (srun wants SIGTERM: a
    // single SIGINT only makes it print the tasks' status).
    int interrupt_signal = SIGINT;
  };
  // Maps one complete output line (without its newline) of child `index` to what is printed;
  // nullopt drops it. The default prints it, prefixed "[index] " with tag_output.
  using LineFilter =
      std::function<std::optional<std::string>(int index, bool is_stderr, std::string_view line)>;
  // Judges a child's exit (`wait_status` as from waitpid): "" for success, else one sentence
  // describing the failure. The default is default_exit_judgement().
  using ExitJudge = std::function<std::string(int index, int wait_status)>;
  // Called when a watched fd becomes readable: no failure (empty why), or the failure and the
  // exit code the launch should end with.
  using EventCheck = std::function<Failure()>;
  // What an outside observer (the PMIx server) saw of how children left: the index of the first
  // whose connection dropped before it finalized, and of the first that finalized; -1 for none.
  struct CauseHints {
    int lost = -1;
    int finalized = -1;
  };
  using CauseHint = std::function<CauseHints()>;

  explicit Supervisor(Options options);
  // Any child still running gets SIGKILL (its whole group) and is reaped; the signal mask
  // and dispositions are restored.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Blocks SIGCHLD, SIGINT, SIGTERM and SIGHUP in the calling thread and reads them from a
  // signalfd instead; ignores SIGPIPE. Call it before any thread is created so every thread
  // inherits the mask. Failure: kIo.
  Status install_signal_handling();

  // Forks and execs one child with stdin from /dev/null (or the launcher's, see above) and
  // stdout/stderr on pipes, in its own process group, bound to spec.cpus, killed if the
  // launcher dies. Returns its index (0, 1, ... in spawn order). Failure: kIo (pipe or fork
  // failed); nothing is started.
  Result<int> spawn(const ChildSpec& spec);

  void set_line_filter(LineFilter filter) { filter_ = std::move(filter); }
  void set_exit_judge(ExitJudge judge) { judge_ = std::move(judge); }
  // When the first failure reaped is not a hinted child's, the verdict waits (at most
  // kCauseWait) for the hinted child to be reaped and names it if its exit is a failure: under
  // load, a killed rank's peers may be reaped seconds before it is, and a rank that failed
  // after PMIx_Finalize may exit after the peers it stranded in a fence (see decide()). A
  // hinted child that exits 0 names nothing.
  void set_cause_hint(CauseHint hint) { cause_hint_ = std::move(hint); }
  static constexpr std::chrono::milliseconds kCauseWait{3000};
  // Watches `fd` (not owned) for readability and calls `check` when it is readable.
  void watch(int fd, EventCheck check);
  // A child said that the job failed and that it will end by itself (srun's task-status line:
  // srun then stops the step and ends within Slurm's KillWait): when children still run
  // `grace` from now, the launch fails with `failure` and they are stopped (SIGTERM, then
  // SIGKILL after kill_grace_ms), so that a child that does not keep its word (srun waiting for
  // a node that is gone) cannot hold the launch until Slurm's own timeouts. Call it from a
  // LineFilter or EventCheck while run() supervises; the first call's deadline stays.
  void stop_unless_ended(std::chrono::milliseconds grace, Failure failure);
  // Called once, the moment the launch starts to stop its children: with the failure, or for a
  // signal to the launcher with {"interrupted by SIGINT", 130} (SIGTERM 143, SIGHUP 129). The
  // ssh backend tells the other nodes from here.
  void set_on_stop(std::function<void(const Failure&)> hook) { on_stop_ = std::move(hook); }

  // Supervises until every child has exited and its output is drained; see the policy above.
  LaunchOutcome run();

  // "rank 3 on vm exited with code 2" / "... was killed by signal 9 (Killed)"; "" for code 0.
  static std::string default_exit_judgement(const std::string& name, const std::string& host,
                                            int wait_status);
  // The launch's exit code for a child that failed with `wait_status`: its exit code, or
  // 128 + the signal that killed it; 1 for an exit with code 0 (a judge called it a failure).
  static int exit_code_for(int wait_status);

 private:
  struct Stream {
    int fd = -1;
    std::string pending;  // an incomplete line
  };
  struct Child {
    pid_t pid = -1;
    std::string name;
    std::string host;
    bool running = true;
    Failure verdict;  // the judgement of its exit (why "" while running or after success)
    Stream out;
    Stream err;
  };
  using Clock = std::chrono::steady_clock;

  void reap();
  void decide();
  bool decide_by_hint(int hint);
  void handle_signals();
  void read_stream(int index, Stream& s, bool is_stderr);
  void emit(int index, bool is_stderr, std::string_view line);
  void fail(const Failure& failure);
  void forward_stdin(short in_events, short out_events);
  void close_stdin_pipe();
  void stop_all(int sig);
  void signal_groups(int sig);
  bool any_running() const;
  bool any_stream_open() const;
  int poll_timeout_ms() const;
  void check_deadlines();

  Options options_;
  LineFilter filter_;
  ExitJudge judge_;
  CauseHint cause_hint_;
  std::function<void(const Failure&)> on_stop_;
  bool on_stop_called_ = false;
  void tell_stop(const Failure& f);
  std::vector<std::pair<int, EventCheck>> watches_;
  std::vector<Child> children_;
  std::optional<DeathOrder> death_order_;  // while run() supervises
  int signal_fd_ = -1;
  int dev_null_ = -1;
  static constexpr size_t kExecStackBytes = 64 * 1024;
  std::unique_ptr<char[]> exec_stack_;  // the child's stack from clone() to execve
  bool signals_installed_ = false;
  sigset_t old_mask_{};

  Failure failure_;      // first failure, why "" while none
  int signal_exit_ = 0;  // 130 / 143 / 129 once the launcher got a signal
  int sigint_count_ = 0;
  bool stopping_ = false;
  bool final_kill_done_ = false;
  std::optional<Clock::time_point> job_deadline_;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> drain_until_;
  // Failures are decided kSettle after the first failed exit is seen: a rank killed by a
  // signal can become a zombie after its peers have already seen its connection drop and
  // exited with an error themselves, so a death by signal seen within kSettle wins.
  static constexpr std::chrono::milliseconds kSettle{150};
  std::optional<Clock::time_point> decide_at_;
  // stop_unless_ended()'s deadline and failure
  std::optional<Clock::time_point> overstay_at_;
  Failure overstay_;
  std::optional<Clock::time_point> cause_wait_until_;  // set with the first failure
  Failure by_signal_;                                  // first failure by signal
  Failure by_exit_;                                    // first failure by exit code

  // Standard input forwarding (see above).
  int stdin_child_ = -1;   // index of the child that reads it
  int stdin_write_ = -1;   // the write end of its pipe, -1 once closed
  std::string stdin_buf_;  // read from the launcher's stdin, not yet written
  bool stdin_eof_ = false;
  bool sigttin_ignored_ = false;
  struct sigaction old_sigttin_ {};
};

}  // namespace dltune::launcher
