#include "launcher/report/report.h"

#include <sstream>

#include "launcher/report/svg_chart.h"

namespace dltune::report {
namespace {

constexpr const char* kStyle = R"(body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}table{border-collapse:collapse}
td,th{padding:3px 12px 3px 0;text-align:left;vertical-align:top}th{color:#555;font-weight:600}
.chart .title{font-weight:600;font-size:13px}.chart .tick,.chart .legend{font-size:11px}
.chart .label{font-size:12px;fill:#444}.empty{color:#888;font-style:italic})";

std::string section(const std::string& title, const std::string& body) {
  return "<section><h2>" + xml_escape(title) + "</h2>\n" + body + "</section>\n";
}

std::string empty(const std::string& what) {
  return "<p class=\"empty\">" + xml_escape(what) + "</p>\n";
}

std::string training_charts(const ReportData& d) {
  if (d.steps.empty()) return empty("No training steps were recorded.");
  Series loss{"loss", {}, {}}, sps{"samples/s", {}, {}};
  for (const StepMetric& m : d.steps) {
    loss.points.push_back({static_cast<double>(m.step), m.loss});
    sps.points.push_back({static_cast<double>(m.step), m.samples_per_s});
  }
  std::string out =
      render_svg({"Training loss", "step", "loss", AxisScale::kLinear, AxisScale::kLinear, {loss}});
  if (!d.evals.empty()) {
    Series acc{"held-out accuracy", {}, {}};
    for (const EvalMetric& e : d.evals)
      acc.points.push_back({static_cast<double>(e.step), 100 * e.accuracy});
    out += render_svg({"Held-out accuracy",
                       "step",
                       "accuracy (%)",
                       AxisScale::kLinear,
                       AxisScale::kLinear,
                       {acc}});
  }
  out += render_svg(
      {"Throughput", "step", "samples/s", AxisScale::kLinear, AxisScale::kLinear, {sps}});
  return out;
}

std::string tuning_chart(const ReportData& d) {
  if (d.tuning.empty())
    return empty("No collective measurements (the plan came from the cache or tuning was off).");
  std::vector<Series> series;
  for (const TuningCurve& c : d.tuning) {
    Series s{c.algo, c.bytes_us, {}};
    for (const auto& [bytes, algo] : d.chosen) {
      if (algo == c.algo) s.chosen_x.push_back(static_cast<double>(bytes));
    }
    series.push_back(std::move(s));
  }
  return render_svg({"Allreduce latency per algorithm (filled markers: chosen)", "message size",
                     "median latency (us)", AxisScale::kLog2Bytes, AxisScale::kLog10,
                     std::move(series), 820, 420});
}

}  // namespace

std::string render_report_html(const ReportData& d) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>dltune report: "
    << xml_escape(d.title) << "</title>\n<style>" << kStyle
    << "</style></head>\n<body>\n<h1>dltune report: " << xml_escape(d.title) << "</h1>\n";
  std::ostringstream table;
  if (d.summary.empty()) {
    table << empty("No summary was recorded.");
  } else {
    table << "<table>\n";
    for (const auto& [k, v] : d.summary) {
      table << "<tr><th>" << xml_escape(k) << "</th><td>" << xml_escape(v) << "</td></tr>\n";
    }
    table << "</table>\n";
  }
  o << section("Summary", table.str());
  o << section("Training", training_charts(d));
  o << section("Collective tuning", tuning_chart(d));
  o << section("Step time breakdown",
               d.step_breakdown.empty()
                   ? empty("No step timing was recorded.")
                   : render_stacked_bar("Mean time per step", d.step_breakdown, "s"));
  o << scaling_section(d);
  o << "</body></html>\n";
  return o.str();
}

}  // namespace dltune::report
