// What a user sees while a job runs: a one-line display redrawn in place on a terminal
// (phase, step / total, loss, samples/s, ETA), plain log lines when the output is not a
// terminal, or JSON events (one object per line) for scripts.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

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

  // kJson when json is set; kTerminal when `out` is a terminal and DLTUNE_NO_PROGRESS is not
  // set; else kPlain.
  static Mode detect(bool json, FILE* out);
  // Renders the one-line display, no trailing newline, at most `width` columns: for tests and
  // for the terminal mode. `eta_s` < 0 when unknown.
  static std::string render_line(const std::string& phase, const ProgressState& s, double eta_s,
                                 int width);

  Progress(Mode mode, FILE* out);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts a phase ("tuning collectives", "training"); the ETA restarts with it.
  void phase(const std::string& name);
  // Reports progress; redraws at most 10 times a second (terminal) or prints a line every
  // 10 % of the total or 10 s (plain); JSON mode prints every update.
  void update(const ProgressState& state);
  // A permanent line: printed above the display (terminal), as is (plain), or as a
  // {"event":"message"} object (JSON).
  void message(const std::string& line);
  // Clears the display line (terminal) so that what follows starts on a clean line.
  void finish();

 private:
  void clear_line();
  double eta_seconds(const ProgressState& s) const;

  Mode mode_;
  FILE* out_;
  std::string phase_;
  std::chrono::steady_clock::time_point phase_start_;
  std::chrono::steady_clock::time_point last_draw_{};
  long last_plain_step_ = -1;
  bool drawn_ = false;
};

// Escapes a string for inclusion in a JSON string literal (quotes not included).
std::string json_escape(const std::string& s);

}  // namespace dltune
