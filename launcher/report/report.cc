#include "launcher/report/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "launcher/report/svg_chart.h"

namespace dltune::report {
namespace {

constexpr const char* kStyle =
    R"(body{font:14px/1.45 system-ui,sans-serif;margin:24px 32px;color:#222}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:32px 0 8px}
table{border-collapse:collapse}td,th{padding:3px 14px 3px 0;text-align:left;vertical-align:top}
th{color:#555;font-weight:600;white-space:nowrap}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,620px),1fr));gap:20px}
.chart{width:100%;height:auto;display:block;background:#fff}
.chart .title{font-weight:600;font-size:14px}.chart .tick,.chart .legend,.chart .marklabel{font-size:11px}
.chart .label,.chart .value{font-size:12px;fill:#444}.chart .empty{fill:#888;font-style:italic}
.empty{color:#888;font-style:italic}.note{color:#555;margin:6px 0 0;max-width:1300px}
.wide{max-width:1300px}
table.sizes td,table.sizes th{padding:2px 16px 2px 0})";

std::string section(const std::string& title, const std::string& body) {
  return "<section><h2>" + xml_escape(title) + "</h2>\n" + body + "</section>\n";
}

std::string empty(const std::string& what) {
  return "<p class=\"empty\">" + xml_escape(what) + "</p>\n";
}

std::string note(const std::string& what) {
  return "<p class=\"note\">" + xml_escape(what) + "</p>\n";
}

// Charts side by side where the page is wide enough (two ~640 px columns on a desktop),
// stacked otherwise; each drawn at its viewBox's width or wider, so text stays readable.
constexpr int kNarrow = 640;  // a chart in a column
constexpr int kWide = 1300;   // a chart across the page

std::string grid(const std::vector<std::string>& charts) {
  std::string o = "<div class=\"charts\">\n";
  for (const std::string& c : charts) o += "<div>" + c + "</div>\n";
  return o + "</div>\n";
}

std::string wide(const std::string& chart) { return "<div class=\"wide\">" + chart + "</div>\n"; }

LineChart chart(const std::string& id, const std::string& title, const std::string& x,
                const std::string& y) {
  LineChart c;
  c.id = id;
  c.title = title;
  c.x.label = x;
  c.y.label = y;
  c.width = kNarrow;
  c.height = 320;
  return c;
}

std::string training_charts(const ReportData& d) {
  if (d.steps.empty()) return empty("No training steps were recorded.");
  std::vector<double> loss, sps;
  std::vector<double> xs;
  for (const StepMetric& m : d.steps) {
    xs.push_back(static_cast<double>(m.step + 1));
    loss.push_back(m.loss);
    sps.push_back(m.samples_per_s);
  }
  const size_t w = smoothing_window(xs.size());
  const std::vector<double> loss_s = rolling_mean(loss, w), sps_s = rolling_median(sps, w);
  auto series = [&](const std::string& name, const std::vector<double>& ys, Style style,
                    const std::string& color, bool legend) {
    Series s{name, {}, style, color, {}, legend};
    for (size_t i = 0; i < xs.size(); ++i) s.points.emplace_back(xs[i], ys[i]);
    return s;
  };
  // The step axis of all three charts: 0 to a little past the last step, so that no point sits
  // on the frame.
  const double last = xs.back() * 1.02;
  std::vector<std::string> charts;
  LineChart lc = chart("loss", "Training loss", "step", "loss");
  lc.x.lo = 0;
  lc.x.hi = last;
  lc.y.zero = true;
  lc.series.push_back(series("loss per step", loss, Style::kFaint, "#1f77b4", true));
  lc.series.push_back(series("smoothed (mean of " + std::to_string(w) + " steps)", loss_s,
                             Style::kLine, "#1f77b4", true));
  charts.push_back(render_svg(lc));
  if (!d.evals.empty()) {
    // One evaluation is a dot, not a curve: the title says so (issue 42).
    const std::string title = d.evals.size() == 1 ? "Held-out accuracy (one evaluation, step " +
                                                        std::to_string(d.evals.front().step) + ")"
                                                  : std::string("Held-out accuracy");
    LineChart ac = chart("accuracy", title, "step", "accuracy (%)");
    ac.x.lo = 0;
    ac.x.hi = std::max(last, 1.02 * static_cast<double>(d.evals.back().step));
    double lo = 100, hi = 0;
    Series s{"held-out accuracy", {}, Style::kLineMarkers, "#2ca02c", {}, true};
    for (const EvalMetric& e : d.evals) {
      const double pct = 100 * e.accuracy;
      s.points.emplace_back(static_cast<double>(e.step), pct);
      char tip[96];
      std::snprintf(tip, sizeof tip, "step %ld: %.2f %%", e.step, pct);
      s.tips.push_back(tip);
      lo = std::min(lo, pct);
      hi = std::max(hi, pct);
    }
    // A range around the values (at least 10 points), within 0-100.
    const double span = std::max(10.0, hi - lo);
    ac.y.lo = std::max(0.0, lo - 0.15 * span);
    ac.y.max_tick = 100;
    if (hi + 0.15 * span < 100) ac.y.hi = hi + 0.15 * span;
    ac.series.push_back(std::move(s));
    charts.push_back(render_svg(ac));
  }
  LineChart tc = chart("throughput", "Throughput", "step", "samples/s");
  tc.x.lo = 0;
  tc.x.hi = last;
  tc.y.zero = true;
  tc.series.push_back(series("per step", sps, Style::kFaint, "#ff7f0e", true));
  tc.series.push_back(series("rolling median of " + std::to_string(w) + " steps", sps_s,
                             Style::kLine, "#ff7f0e", true));
  charts.push_back(render_svg(tc));
  return grid(charts);
}

std::string scaling_section(const ReportData& d) {
  if (d.throughput_sps <= 0) return empty("No throughput was recorded.");
  std::vector<Bar> bars;
  const std::string n = std::to_string(d.ranks);
  if (d.baseline_sps > 0) {
    bars.push_back({d.baseline_reused ? "1 rank, an earlier launch's" : "1 rank, measured",
                    d.baseline_sps, 0, 0, "#7f7f7f", ""});
    if (d.ranks > 1) {
      bars.push_back({n + " x 1 rank (ideal)", d.ranks * d.baseline_sps, 0, 0, "#c7c7c7", ""});
    }
  }
  bars.push_back({n + " rank(s), measured", d.throughput_sps, 0, 0, "#1f77b4", ""});
  if (d.predicted_sps > 0) {
    bars.push_back({"predicted by the models", d.predicted_sps, 0, 0, "#9467bd", ""});
  }
  std::string title = "Throughput";
  if (d.scaling_efficiency >= 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": %d ranks at %.0f %% of %d x 1 rank", d.ranks,
                  100 * d.scaling_efficiency, d.ranks);
    title += buf;
  }
  std::string body = grid({render_bars("scaling", title, bars, "samples/s", kNarrow)});
  if (d.scaling_efficiency < 0 && d.ranks > 1) {
    body += note("The 1-rank baseline was not measured, so there is no scaling efficiency.");
  }
  return body;
}

// The models' scaling efficiency and throughput of this job's per-rank work from 1 node to
// thousands (launcher/launch_prediction.h computes the curve).
std::string predicted_scaling_section(const ReportData& d) {
  if (d.predicted_scaling.empty()) {
    // Issue 42: a pipelined run had a prediction (in the summary) but no curve, and the page
    // said there was no prediction.
    if (d.predicted_sps <= 0) {
      return empty("No prediction was made for this run." +
                   (d.scaling_note.empty() ? std::string() : " " + d.scaling_note));
    }
    return empty("The models predicted " + number_label(d.predicted_sps, 1) +
                 " samples/s for this run (the Throughput chart above); " + d.scaling_note + ".");
  }
  LineChart eff =
      chart("predicted-efficiency", "Predicted scaling efficiency", "nodes", "efficiency (%)");
  eff.x.scale = AxisScale::kLog10;
  eff.y.zero = true;
  eff.y.max_tick = 100;
  LineChart tput = chart("predicted-throughput", "Predicted throughput", "nodes", "samples/s");
  tput.x.scale = AxisScale::kLog10;
  tput.y.scale = AxisScale::kLog10;
  Series e{"efficiency", {}, Style::kLineMarkers, "#1f77b4", {}, false};
  Series t{"throughput", {}, Style::kLineMarkers, "#ff7f0e", {}, false};
  for (const ScalingPoint& p : d.predicted_scaling) {
    e.points.emplace_back(p.nodes, 100 * p.efficiency);
    t.points.emplace_back(p.nodes, p.throughput_sps);
  }
  eff.series.push_back(std::move(e));
  tput.series.push_back(std::move(t));
  return note(d.scaling_note) + grid({render_svg(eff), render_svg(tput)});
}

std::string confidence_section(const ReportData& d) {
  if (d.rivals.empty() && d.winner.empty()) {
    return empty(
        "No trials were run for this plan (it came from the cache, the recipe fixed its "
        "settings, or tuning was off).");
  }
  if (d.rivals.empty()) {
    // Issue 42: a tuning of one candidate (one layout fits, the recipe fixed the rest) is not
    // "no trials".
    return empty("The trials measured one candidate, " + d.winner +
                 (d.winner_sps > 0 ? ", at " + number_label(d.winner_sps, 1) + " samples/s" : "") +
                 ": there was no other to compare it with (the recipe fixed the other settings, "
                 "or only this layout fits).");
  }
  std::vector<Bar> rows;
  std::vector<std::string> unmeasured;
  for (const Rival& r : d.rivals) {
    if (r.ratio <= 0) {
      unmeasured.push_back(r.label + (r.note.empty() ? "" : " (" + r.note + ")"));
      continue;
    }
    Bar b{r.label, r.ratio, r.lo, r.hi, "", ""};
    if (r.hi <= r.lo) b.note = std::to_string(r.rounds) + " rounds, no interval";
    rows.push_back(b);
  }
  std::sort(rows.begin(), rows.end(), [](const Bar& a, const Bar& b) { return a.value < b.value; });
  if (rows.size() > 12) rows.resize(12);
  std::string body;
  if (!rows.empty()) {
    body += wide(render_intervals(
        "confidence", "Tuner confidence: " + d.winner + " against each candidate", rows,
        "winner's throughput / the candidate's (> 1: the winner was faster; bars: 95 % "
        "intervals, grey: not significant)",
        kWide));
  }
  std::string text;
  if (d.regret >= 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "Estimated regret: an exhaustive search of these candidates would gain at "
                  "most ~%.0f %% throughput. ",
                  100 * d.regret);
    text += buf;
  }
  if (d.collective_regret >= 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "Collectives: ~%.0f %% of the allreduce time at the job's sizes (fitted "
                  "models). ",
                  100 * d.collective_regret);
    text += buf;
  }
  if (!d.budget_note.empty()) text += "The budget cut: " + d.budget_note + ". ";
  if (!unmeasured.empty()) {
    text += std::to_string(unmeasured.size()) + " candidate(s) without a comparison: ";
    for (size_t i = 0; i < unmeasured.size() && i < 6; ++i) {
      text += (i ? "; " : "") + unmeasured[i];
    }
    if (unmeasured.size() > 6) text += "; ...";
    text += ".";
  }
  if (!text.empty()) body += note(text);
  return body;
}

std::string tuning_section(const ReportData& d) {
  if (d.tuning.empty()) {
    return empty(
        "No collective measurements are stored for this machine and job shape (one "
        "rank, or tuning was off).");
  }
  // The domain: the job's sizes with an octave on each side (the sweep's other sizes do not
  // matter to this job), else every measured size.
  double lo = 0, hi = 0;
  for (const JobSize& j : d.job_sizes) {
    const double b = static_cast<double>(j.bytes);
    lo = lo == 0 ? b : std::min(lo, b);
    hi = std::max(hi, b);
  }
  LineChart c = chart("collectives", "Allreduce latency at this job's sizes", "", "");
  c.x = {"message size", AxisScale::kLog2, Units::kBytes, {}, {}, false, {}};
  c.y = {"median latency", AxisScale::kLog10, Units::kSeconds, {}, {}, false, {}};
  if (hi > 0) {
    c.x.lo = lo / 2;
    c.x.hi = hi * 2;
  }
  for (const TuningCurve& t : d.tuning) {
    Series s{t.algo, {}, Style::kLineMarkers, "", {}, true};
    for (const auto& [b, us] : t.bytes_us) {
      s.points.emplace_back(b, us * 1e-6);
      s.tips.push_back(t.algo + " at " + bytes_label(b) + ": " + seconds_label(us * 1e-6));
    }
    c.series.push_back(std::move(s));
  }
  Series chosen{"this job: the plan's choice (estimated)", {}, Style::kMarkers, "#000", {}, true};
  std::string rows;
  for (const JobSize& j : d.job_sizes) {
    char per[32];
    std::snprintf(per, sizeof per, "%g", j.per_step);
    c.marks.push_back({static_cast<double>(j.bytes), bytes_label(static_cast<double>(j.bytes))});
    if (j.est_us > 0) {
      chosen.points.emplace_back(static_cast<double>(j.bytes), j.est_us * 1e-6);
      chosen.tips.push_back(bytes_label(static_cast<double>(j.bytes)) + ": " + j.algo + ", " +
                            seconds_label(j.est_us * 1e-6) + " (x" + per + " per step)");
    }
    rows += "<tr><td>" + xml_escape(bytes_label(static_cast<double>(j.bytes))) + "</td><td>" + per +
            "</td><td>" + xml_escape(j.algo) + "</td><td>" +
            (j.est_us > 0 ? xml_escape(seconds_label(j.est_us * 1e-6)) : "not measured") +
            "</td></tr>\n";
  }
  // Only where the job allreduces something it has a choice to mark (a lone pipeline has none).
  if (!chosen.points.empty()) c.series.push_back(std::move(chosen));
  c.width = kWide;
  c.height = 440;
  std::string body = wide(render_svg(c));
  if (!rows.empty()) {
    body +=
        "<table class=\"sizes\"><tr><th>size</th><th>per step</th><th>chosen</th>"
        "<th>estimated time</th></tr>\n" +
        rows + "</table>\n";
  } else {
    body += note(
        "This job allreduces nothing (one rank, or one replica of a pipeline): the "
        "sweep is shown as measured.");
  }
  return body;
}

}  // namespace

size_t smoothing_window(size_t n) {
  size_t w = std::clamp<size_t>(n / 25, 3, 51);
  if (w % 2 == 0) ++w;
  return w;
}

std::vector<double> rolling_mean(const std::vector<double>& v, size_t window) {
  std::vector<double> out(v.size());
  const size_t half = window / 2;
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t a = i >= half ? i - half : 0, b = std::min(v.size(), i + half + 1);
    double s = 0;
    for (size_t k = a; k < b; ++k) s += v[k];
    out[i] = s / static_cast<double>(b - a);
  }
  return out;
}

std::vector<double> rolling_median(const std::vector<double>& v, size_t window) {
  std::vector<double> out(v.size());
  const size_t half = window / 2;
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t a = i >= half ? i - half : 0, b = std::min(v.size(), i + half + 1);
    std::vector<double> w(v.begin() + static_cast<std::ptrdiff_t>(a),
                          v.begin() + static_cast<std::ptrdiff_t>(b));
    std::sort(w.begin(), w.end());
    const size_t m = w.size() / 2;
    out[i] = w.size() % 2 ? w[m] : (w[m - 1] + w[m]) / 2;
  }
  return out;
}

std::string render_report_html(const ReportData& d) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<title>dltune report: " << xml_escape(d.title) << "</title>\n<style>" << kStyle
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
  o << section("Scaling", scaling_section(d));
  o << section("The tuner's confidence", confidence_section(d));
  o << section("Predicted scaling", predicted_scaling_section(d));
  o << section("Collective tuning", tuning_section(d));
  double total = 0;
  for (const auto& p : d.step_breakdown) total += p.second;
  o << section("Step time", d.step_breakdown.empty() || !(total > 0)
                                ? empty("No step timing was recorded.")
                                : wide(render_stacked_bar("steptime", "Mean timed step",
                                                          d.step_breakdown, "ms", kWide)));
  o << "</body></html>\n";
  return o.str();
}

}  // namespace dltune::report
