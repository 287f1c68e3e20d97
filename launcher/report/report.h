// report.html: a self-contained page (inline CSS and SVG, no scripts, no network) that a
// person opens from the run directory, its charts as wide as the page allows:
// - the summary table;
// - training: the loss (smoothed, the raw line faint beneath), held-out accuracy (markers, a
//   range around the values, never drawn on the frame), throughput (rolling median, raw faint);
// - scaling: 1 rank, N x 1 rank (ideal), N ranks measured and the trials' prediction, with the
//   scaling efficiency;
// - the tuner's confidence: the winner against each candidate as throughput ratios with their
//   ~95 % intervals, the estimated regret and what the budget cut;
// - collective tuning over the job's own bucket sizes: each algorithm's measured latency
//   (sizes in KiB / MiB, times in µs / ms), the sizes the job allreduces marked, the chosen
//   algorithm and its estimated time at each;
// - the step time split in milliseconds, as the summary prints it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dltune::report {

struct StepMetric {
  long step = 0;
  double loss = 0;
  double samples_per_s = 0;
};

struct EvalMetric {
  long step = 0;
  double accuracy = 0;  // in [0, 1]
};

struct TuningCurve {
  std::string algo;
  std::vector<std::pair<double, double>> bytes_us;  // message size -> median latency (us)
};

// One point of the predicted scaling curve (launcher/launch_prediction.h).
struct ScalingPoint {
  int nodes = 1, ranks = 1;
  double throughput_sps = 0;
  double efficiency = 0;  // in [0, 1]
};

// One message size the job allreduces every step.
struct JobSize {
  uint64_t bytes = 0;
  double per_step = 1;  // how many such messages a step has
  std::string algo;     // the plan's choice at this size (a TuningCurve's algo)
  double est_us = -1;   // its estimated time from the sweep (< 0 unknown)
};

// A candidate the winner was compared with: winner / it, with the ~95 % interval (hi <= lo:
// none) over `rounds` paired rounds.
struct Rival {
  std::string label;
  double ratio = 0, lo = 0, hi = 0;
  int rounds = 0;
  std::string note;  // "failed: ...", "not measured (budget)"
};

struct ReportData {
  std::string title;                                         // e.g. the recipe name
  std::vector<std::pair<std::string, std::string>> summary;  // rows of the summary table
  std::vector<StepMetric> steps;
  std::vector<EvalMetric> evals;
  std::vector<TuningCurve> tuning;
  std::vector<JobSize> job_sizes;
  std::vector<std::pair<std::string, double>> step_breakdown;  // part -> milliseconds per step
  // Scaling.
  int ranks = 1;
  double throughput_sps = 0, baseline_sps = 0, predicted_sps = 0;
  bool baseline_reused = false;    // the 1-rank baseline came from the database (an earlier launch)
  double scaling_efficiency = -1;  // < 0 not measured
  // The tuner's confidence.
  std::string winner;     // the trials' winner ("" when no trials ran)
  double winner_sps = 0;  // its throughput in the trials (0 unknown)
  std::vector<Rival> rivals;
  double regret = -1, collective_regret = -1;  // < 0 unknown
  std::string budget_note;
  // The models' scaling curve of this job's per-rank work (report.cc's "Predicted scaling").
  std::vector<ScalingPoint> predicted_scaling;
  std::string scaling_note;  // where the curve's numbers come from, or why there is none
};

// Renders the whole page. Sections without data say so instead of showing empty plots.
std::string render_report_html(const ReportData& data);

// Helpers the charts use (for tests): the centred rolling mean and rolling median of `v` over
// `window` values (shorter at the ends), and the window a series of `n` values is smoothed
// over (about n / 25, at least 3 and odd, at most 51).
std::vector<double> rolling_mean(const std::vector<double>& v, size_t window);
std::vector<double> rolling_median(const std::vector<double>& v, size_t window);
size_t smoothing_window(size_t n);

}  // namespace dltune::report
