// report.html: a self-contained page (inline CSS and SVG, no scripts, no network) that a
// person opens from the run directory: the summary, loss and accuracy curves, throughput,
// the collective tuning curves per algorithm with the chosen one marked, and the step time
// breakdown.
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

struct ReportData {
  std::string title;                                         // e.g. the recipe name
  std::vector<std::pair<std::string, std::string>> summary;  // rows of the summary table
  std::vector<StepMetric> steps;
  std::vector<EvalMetric> evals;
  std::vector<TuningCurve> tuning;
  std::vector<std::pair<uint64_t, std::string>> chosen;        // size -> chosen algorithm
  std::vector<std::pair<std::string, double>> step_breakdown;  // part -> seconds per step
  // The models' scaling curve of this job's per-rank work (scaling_section.cc).
  std::vector<ScalingPoint> predicted_scaling;
  std::string scaling_note;  // where the curve's numbers come from
};

// The "Predicted scaling" section: efficiency and throughput against nodes (its own file so
// that the page's layout and this plot change independently).
std::string scaling_section(const ReportData& data);

// Renders the whole page. Sections without data say so instead of showing empty plots.
std::string render_report_html(const ReportData& data);

}  // namespace dltune::report
