// What a user sees while a job runs: a one-line display redrawn in place on a terminal
// (phase, what it is doing now, step / total, loss, samples/s, elapsed time or ETA), plain log
// lines when the output is not a terminal, or JSON events (one object per line, each with "t":
// seconds since the display was created) for scripts.
//
// Nothing is silent for long: on a terminal the line is redrawn every second (its clock moves
// even when the phase reports nothing new), and JSON mode emits a {"event":"heartbeat"} when
// nothing else was printed for a second, while a phase is under way. Plain mode prints a line
// when the phase or its status changes (at most every kPlainStatusS) and every
// kPlainQuietS otherwise. Every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace dltune {

struct ProgressState {
  long step = 0;
  long total = 0;    // 0 when unknown
  double loss = -1;  // < 0 when unknown
  double samples_per_s = 0;
  double accuracy = -1;  // held-out accuracy in [0, 1], < 0 when unknown
};

class Progress {
 public:
  enum class Mode { kTerminal, kPlain, kJson, kQuiet };

  static constexpr double kPlainStatusS = 2;  // plain mode: status lines at most this often
  static constexpr double kPlainQuietS = 10;  // plain mode: a line at least this often
  static constexpr double kHeartbeatS = 1;    // terminal redraw / JSON heartbeat period

  // kJson when json is set; kTerminal when `out` is a terminal and DLTUNE_NO_PROGRESS is not
  // set; else kPlain.
  static Mode detect(bool json, FILE* out);
  // Renders the one-line display of a step, no trailing newline, at most `width` columns: for
  // tests and for the terminal mode. `eta_s` < 0 when unknown.
  static std::string render_line(const std::string& phase, const ProgressState& s, double eta_s,
                                 int width);
  // Renders the one-line display of a status: "phase: status  01:05" (the phase's time), with
  // "(launch 02:10)" after it when `total_s` (the time since the Progress began: the clock does
  // not restart for the person watching) is a second or more beyond it; at most `width`
  // columns. A status too long loses its middle ("..."), not its end, where the tuner's
  // leader so far is; the phase and the clocks are kept.
  static std::string render_status(const std::string& phase, const std::string& status,
                                   double elapsed_s, int width, double total_s = -1);
  // Seconds left to step `total`, from the pace since the phase's first reported step
  // (`first_step` at `first_s`, now `step` at `now_s`, seconds on any one clock), so that the
  // start-up before the first step (data, the model, the untimed first step) does not count
  // as steps; -1 (unknown) until a later step than the first is reported.
  static double eta_from(long first_step, double first_s, long step, double now_s, long total);

  // `heartbeat` false: no background redraws or heartbeat events (tests of exact output).
  Progress(Mode mode, FILE* out, bool heartbeat = true);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts a phase ("tuning collectives", "training"); the clock and the ETA restart with it.
  void phase(const std::string& name);
  // What the phase is doing now ("size 3 of 8 (1 MiB): ring, rd"): terminal: shown on the line
  // with the phase's clock (until the next update()); plain: "dltune: PHASE: STATUS" (rate
  // limited as above); JSON: {"event":"status","t":T,"phase":P,"text":STATUS, ...`fields`}.
  void status(const std::string& text, const nlohmann::json& fields = nlohmann::json::object());
  // Reports step progress; redraws at most 10 times a second (terminal), prints a line every
  // 10 % of the total or kPlainQuietS (plain); JSON mode prints every update whose step
  // differs from the last one printed (loss, accuracy and ETA null when unknown).
  void update(const ProgressState& state);
  // A permanent line: printed above the display (terminal), as is (plain), or as a
  // {"event":"message"} object (JSON).
  void message(const std::string& line);
  // An event for scripts: JSON mode prints {"event":NAME,"t":T, ...`fields`}; other modes print
  // nothing.
  void event(const std::string& name, const nlohmann::json& fields);
  // Ends the phase and clears the display line (terminal), so that what follows starts on a
  // clean line; heartbeats stop until the next phase().
  void finish();
  // Seconds since this display was created (the "t" of its JSON events).
  double elapsed_s() const;

  // Async-signal-safe: when a terminal display line is drawn, ends it with a newline and stops
  // further drawing, so that what is printed after a signal (Ctrl-C) starts on its own line.
  static void break_line_from_signal();

 private:
  void clear_line_locked();
  void draw_locked(bool force);
  void print_json_locked(const std::string& event, nlohmann::json fields);
  double eta_seconds(const ProgressState& s) const;
  double phase_elapsed_s() const;
  void heartbeat_loop();

  Mode mode_;
  FILE* out_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread beat_;
  bool stop_ = false;
  bool active_ = false;  // a phase is under way (heartbeats)
  std::string phase_;
  std::string status_;
  bool showing_state_ = false;  // the line shows state_ (else status_)
  ProgressState state_;
  double state_s_ = 0;  // elapsed_s() when state_ was reported
  std::chrono::steady_clock::time_point start_, phase_start_;
  std::chrono::steady_clock::time_point last_draw_{}, last_print_{};
  long last_plain_step_ = -1;
  long last_json_step_ = -1;
  long first_step_ = -1;  // the phase's first reported step, at first_step_s_ (elapsed_s())
  double first_step_s_ = 0;
  std::string last_plain_status_;
  bool drawn_ = false;
};

// Escapes a string for inclusion in a JSON string literal (quotes not included).
std::string json_escape(const std::string& s);

}  // namespace dltune
