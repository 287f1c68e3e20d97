#include "launcher/report/report.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "launcher/report/svg_chart.h"

namespace dltune::report {
namespace {

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

// The tick labels of an SVG ("<text ... class=\"tick\">LABEL</text>").
std::vector<std::string> ticks(const std::string& svg) {
  std::vector<std::string> out;
  const std::string open = "class=\"tick\">";
  for (size_t p = svg.find(open); p != std::string::npos; p = svg.find(open, p + 1)) {
    const size_t b = p + open.size();
    out.push_back(svg.substr(b, svg.find('<', b) - b));
  }
  return out;
}

ReportData sample() {
  ReportData d;
  d.title = "quickstart <2 ranks>";
  d.summary = {{"throughput", "2,400 samples/s"}, {"plan", "tuned"}};
  for (long s = 0; s < 300; ++s) {
    d.steps.push_back({s, 2.3 / static_cast<double>(s + 1), 2000.0 + static_cast<double>(s % 7)});
  }
  d.evals = {{150, 0.8}, {300, 1.0}};
  d.tuning = {{"rd", {{262144, 150}, {524288, 290}, {1 << 20, 560}, {2 << 20, 1200}}},
              {"shm", {{262144, 90}, {524288, 180}, {1 << 20, 350}, {2 << 20, 700}}}};
  d.job_sizes = {{1 << 20, 1, "shm", 350}, {655360, 1, "shm", 230}};
  d.step_breakdown = {{"compute", 20.0}, {"exposed communication", 4.0}, {"other", 1.0}};
  d.ranks = 2;
  d.throughput_sps = 2400;
  d.baseline_sps = 1300;
  d.predicted_sps = 2500;
  d.scaling_efficiency = 2400 / 2600.0;
  d.winner = "b64 weak bucket=1MiB overlap";
  d.rivals = {{"b64 weak bucket=1MiB no-overlap", 1.12, 1.05, 1.19, 12, ""},
              {"b128 weak bucket=one overlap", 1.01, 0.97, 1.05, 12, ""},
              {"b32 weak bucket=1MiB overlap", 1.6, 0, 0, 2, ""},
              {"b256 weak bucket=1MiB overlap", 0, 0, 0, 0, "not measured: budget"}};
  d.regret = 0.03;
  d.collective_regret = 0.0;
  return d;
}

TEST(Report, HasEveryPlotAndEscapesText) {
  const std::string html = render_report_html(sample());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // loss, accuracy, throughput, scaling, confidence, collectives, step time
  EXPECT_EQ(count(html, "<svg"), 7u);
  for (const char* id :
       {"loss", "accuracy", "throughput", "scaling", "confidence", "collectives", "steptime"}) {
    EXPECT_NE(html.find(std::string("data-chart=\"") + id + "\""), std::string::npos) << id;
  }
  EXPECT_NE(html.find("quickstart &lt;2 ranks&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<2 ranks>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained and inert
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("NaN"), std::string::npos);
  EXPECT_EQ(html.find("inf"), std::string::npos);
  EXPECT_NE(html.find("width=\"100%\""), std::string::npos);  // as wide as the page allows
}

TEST(Report, AxesAreReadable) {
  const std::string html = render_report_html(sample());
  for (const std::string& t : ticks(html)) {
    EXPECT_EQ(t.find("e-"), std::string::npos) << t;
    EXPECT_EQ(t.find("e+"), std::string::npos) << t;
  }
  // Sizes in KiB / MiB, times in units.
  EXPECT_NE(html.find(">1 MiB<"), std::string::npos);
  EXPECT_NE(html.find(" \xC2\xB5s<"), std::string::npos);
  // Tooltips name sizes and times the way a person reads them.
  EXPECT_NE(html.find("shm at 1 MiB: 350 \xC2\xB5s"), std::string::npos);
  EXPECT_NE(html.find("1 MiB: shm, 350 \xC2\xB5s (x1 per step)"), std::string::npos);
  // The step time is in ms, as the summary prints it.
  EXPECT_NE(html.find("compute 20.00 ms"), std::string::npos);
}

TEST(Report, TheCollectiveChartCoversTheJobsSizesOnly) {
  ReportData d = sample();
  d.tuning[0].bytes_us.insert(d.tuning[0].bytes_us.begin(), {4, 2.0});  // a size the job never uses
  const std::string html = render_report_html(d);
  const size_t at = html.find("data-chart=\"collectives\"");
  const std::string svg = html.substr(at, html.find("</svg>", at) - at);
  EXPECT_EQ(svg.find(">4 B<"), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"mark\""), 2u);  // 1 MiB and 640 KiB
  EXPECT_NE(svg.find("the plan&#39;s choice"), std::string::npos);
  // Issue 42: a lone pipeline allreduces nothing; its chart marked "the plan's choice" anyway.
  d.job_sizes.clear();
  const std::string lone = render_report_html(d);
  EXPECT_EQ(lone.find("the plan&#39;s choice"), std::string::npos);
  EXPECT_NE(lone.find("This job allreduces nothing"), std::string::npos);
}

TEST(Report, OnePointAccuracyGetsASensibleRange) {
  ReportData d = sample();
  d.evals = {{300, 0.97}};
  const std::string html = render_report_html(d);
  const size_t at = html.find("data-chart=\"accuracy\"");
  const std::string svg = html.substr(at, html.find("</svg>", at) - at);
  EXPECT_EQ(count(svg, "class=\"point\""), 1u);
  EXPECT_NE(html.find("Held-out accuracy (one evaluation, step 300)"), std::string::npos);
  const auto t = ticks(svg);
  ASSERT_GE(t.size(), 4u);
  for (const std::string& s : t) {
    EXPECT_EQ(s.find("e-"), std::string::npos) << s;
    EXPECT_EQ(s.find("105"), std::string::npos) << s;  // no tick above 100 %
  }
}

TEST(Report, EmptySectionsSaySo) {
  ReportData d;
  d.title = "empty";
  const std::string html = render_report_html(d);
  EXPECT_NE(html.find("No training steps were recorded."), std::string::npos);
  EXPECT_NE(html.find("No collective measurements"), std::string::npos);
  EXPECT_NE(html.find("No trials were run"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), 0u);
  // Issue 42: a tuning that measured one candidate (one layout fits) is not "no trials".
  d.winner = "b32 weak bucket=4 MiB overlap, 1x2 stages m8 1f1b";
  d.winner_sps = 173.9;
  const std::string one = render_report_html(d);
  EXPECT_EQ(one.find("No trials were run"), std::string::npos);
  EXPECT_NE(one.find("The trials measured one candidate, b32 weak bucket=4 MiB overlap, 1x2 "
                     "stages m8 1f1b, at 174 samples/s: there was no other"),
            std::string::npos)
      << one;
}

// The predicted scaling curve: two plots against nodes with where the numbers come from, or a
// sentence when no prediction was made.
TEST(Report, PredictedScalingHasItsPlotsOrSaysWhyNot) {
  ReportData d = sample();
  d.predicted_sps = 0;
  const std::string without = render_report_html(d);
  EXPECT_NE(without.find("No prediction was made for this run."), std::string::npos);
  // Issue 42: a pipelined run has a prediction but no curve; the page says which.
  d.predicted_sps = 157;
  d.scaling_note =
      "no scaling curve: the curve is drawn for data parallelism, and this plan is "
      "a 2-stage pipeline";
  const std::string pipelined = render_report_html(d);
  EXPECT_EQ(pipelined.find("No prediction was made"), std::string::npos);
  EXPECT_NE(pipelined.find("The models predicted 157 samples/s for this run (the Throughput "
                           "chart above); no scaling curve: the curve is drawn for data "
                           "parallelism, and this plan is a 2-stage pipeline."),
            std::string::npos);
  d.predicted_scaling = {{1, 2, 1000, 1.0}, {16, 32, 12000, 0.75}, {1024, 2048, 200000, 0.2}};
  d.scaling_note = "fits <of> this machine";
  const std::string html = render_report_html(d);
  EXPECT_EQ(count(html, "<svg"), count(without, "<svg") + 2);  // efficiency and throughput
  EXPECT_NE(html.find("Predicted scaling efficiency"), std::string::npos);
  EXPECT_NE(html.find("fits &lt;of&gt; this machine"), std::string::npos);
  EXPECT_EQ(html.find("No prediction was made"), std::string::npos);
}

TEST(Report, SmoothingHelpers) {
  EXPECT_EQ(smoothing_window(10), 3u);
  EXPECT_EQ(smoothing_window(300), 13u);
  EXPECT_EQ(smoothing_window(100000), 51u);
  const std::vector<double> v = {1, 100, 3, 4, 5};
  EXPECT_EQ(rolling_median(v, 3), (std::vector<double>{50.5, 3, 4, 4, 4.5}));
  EXPECT_DOUBLE_EQ(rolling_mean(v, 3)[2], (100 + 3 + 4) / 3.0);
}

TEST(SvgChart, Labels) {
  EXPECT_EQ(bytes_label(131072), "128 KiB");
  EXPECT_EQ(bytes_label(1572864), "1.5 MiB");
  EXPECT_EQ(bytes_label(4), "4 B");
  EXPECT_EQ(seconds_label(2.5e-5), "25 \xC2\xB5s");
  EXPECT_EQ(seconds_label(0.0123), "12.3 ms");
  EXPECT_EQ(seconds_label(2), "2 s");
  EXPECT_EQ(number_label(4000, 1000), "4,000");
  EXPECT_EQ(number_label(0.25, 0.05), "0.25");
  EXPECT_EQ(number_label(-0.0000001, 0.5), "0.0");
}

// Issue 42: a long candidate's label ran past the chart's left edge. Row labels are
// right-aligned at the plot: whatever text sits there must fit between the edge and the plot.
TEST(SvgChart, LongRowLabelsAreCutToTheMarginWithTheWholeInATooltip) {
  const std::string longest =
      "b64 weak bucket=16 MiB overlap allreduce=ring/segment 1 MiB threads 2x1 kernel=direct "
      "precision=bf16 schedule=1f1b micro=8";
  const std::vector<Bar> rows = {{longest, 1.2, 1.1, 1.3, "", ""},
                                 {"b32 weak", 1.05, 0, 0, "", ""}};
  for (const std::string& svg :
       {render_intervals("c", "t", rows, "ratio"), render_bars("b", "t", rows, "samples/s")}) {
    // The drawn label: after its <title>, up to </text>.
    const size_t t = svg.find("<title>" + longest + "</title>");
    ASSERT_NE(t, std::string::npos) << svg;
    const size_t b = t + 7 + longest.size() + 8;
    const std::string drawn = svg.substr(b, svg.find("</text>", b) - b);
    EXPECT_LT(drawn.size(), longest.size());
    EXPECT_EQ(drawn.substr(drawn.size() - 3), "\u2026");
    EXPECT_EQ(longest.rfind(drawn.substr(0, drawn.size() - 3), 0), 0u) << drawn;
    // Its right end, x, minus its width at 12 px (7.2 px a glyph) stays inside the chart.
    const size_t xa = svg.rfind("<text x=\"", t);
    const double x = std::stod(svg.substr(xa + 9));
    EXPECT_GE(x - 7.2 * static_cast<double>(drawn.size() - 2), 0.0) << drawn;
    // A short label is drawn whole.
    EXPECT_NE(svg.find("<title>b32 weak</title>b32 weak</text>"), std::string::npos);
  }
}

TEST(SvgChart, LogAxesSkipNonPositivePointsAndLabelUnits) {
  LineChart c;
  c.x = {"size", AxisScale::kLog2, Units::kBytes, {}, {}, false, {}};
  c.y = {"time", AxisScale::kLog10, Units::kSeconds, {}, {}, false, {}};
  c.series.push_back(
      {"a", {{0, 1e-5}, {4, 1e-5}, {1 << 20, 1e-3}, {2 << 20, -1}}, Style::kLine, "", {}, true});
  const std::string svg = render_svg(c);
  EXPECT_NE(svg.find("data-points=\"2\""), std::string::npos);
  EXPECT_NE(svg.find(">1 MiB<"), std::string::npos);
  EXPECT_NE(svg.find(">1 ms<"), std::string::npos);
  EXPECT_NE(svg.find(">10 \xC2\xB5s<"), std::string::npos);
}

TEST(SvgChart, AFlatSeriesHasNoTinyAxis) {
  LineChart c;
  c.series.push_back({"a", {{1, 0.5}, {2, 0.5}}, Style::kLine, "", {}, true});
  for (const std::string& t : ticks(render_svg(c))) EXPECT_EQ(t.find("e-"), std::string::npos) << t;
}

// A plain log axis (nodes, samples/s) labels its decades with their own digits: "1", "10",
// "1,000", "0.1", never "10.00".
TEST(SvgChart, PlainLogTicksHaveNoSpareDecimals) {
  LineChart c;
  c.x.scale = AxisScale::kLog10;
  c.series.push_back({"a", {{0.1, 1}, {1, 2}, {1024, 3}}, Style::kLine, "", {}, true});
  const auto t = ticks(render_svg(c));
  for (const char* want : {"0.1", "1", "10", "100", "1,000"}) {
    EXPECT_NE(std::find(t.begin(), t.end(), want), t.end()) << want;
  }
  for (const std::string& s : t) EXPECT_EQ(s.find(".00"), std::string::npos) << s;
}

TEST(SvgChart, NothingToShow) {
  LineChart c;
  c.x.scale = AxisScale::kLog10;
  c.y.scale = AxisScale::kLog10;
  c.series.push_back({"a", {{-1, -1}}, Style::kLine, "", {}, true});
  EXPECT_NE(render_svg(c).find("no data"), std::string::npos);
}

}  // namespace
}  // namespace dltune::report
