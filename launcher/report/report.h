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

struct ReportData {
  std::string title;                                         // e.g. the recipe name
  std::vector<std::pair<std::string, std::string>> summary;  // rows of the summary table
  std::vector<StepMetric> steps;
  std::vector<EvalMetric> evals;
  std::vector<TuningCurve> tuning;
  std::vector<std::pair<uint64_t, std::string>> chosen;        // size -> chosen algorithm
  std::vector<std::pair<std::string, double>> step_breakdown;  // part -> seconds per step
};

// Renders the whole page. Sections without data say so instead of showing empty plots.
std::string render_report_html(const ReportData& data);

}  // namespace dltune::report
