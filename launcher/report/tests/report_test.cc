#include "launcher/report/report.h"

#include <gtest/gtest.h>

#include "launcher/report/svg_chart.h"

namespace dltune::report {
namespace {

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

ReportData sample() {
  ReportData d;
  d.title = "quickstart <2 ranks>";
  d.summary = {{"throughput", "2,400 samples/s"}, {"plan", "tuned"}};
  for (long s = 1; s <= 50; ++s)
    d.steps.push_back({s, 2.3 / static_cast<double>(s), 2000.0 + static_cast<double>(s)});
  d.evals = {{25, 0.8}, {50, 0.96}};
  d.tuning = {{"rd", {{4, 0.5}, {1024, 1.2}, {1 << 20, 400}}},
              {"shm", {{4, 0.9}, {1024, 1.0}, {1 << 20, 150}}}};
  d.chosen = {{4, "rd"}, {1024, "shm"}, {1 << 20, "shm"}};
  d.step_breakdown = {{"compute", 0.020}, {"exposed communication", 0.004}};
  return d;
}

TEST(Report, HasEveryPlotAndEscapesText) {
  const std::string html = render_report_html(sample());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(count(html, "<svg"), 5u);  // loss, accuracy, throughput, tuning, breakdown
  EXPECT_EQ(count(html, "class=\"series\""), 5u);
  EXPECT_EQ(count(html, "class=\"chosen\""), 3u);  // rd at 4 B, shm at 1 KiB and 1 MiB
  EXPECT_NE(html.find("quickstart &lt;2 ranks&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<2 ranks>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained and inert
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
}

TEST(Report, EmptySectionsSaySo) {
  ReportData d;
  d.title = "empty";
  const std::string html = render_report_html(d);
  EXPECT_NE(html.find("No training steps were recorded."), std::string::npos);
  EXPECT_NE(html.find("No collective measurements"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), 0u);
}

// The predicted scaling curve: two plots against nodes with where the numbers come from, or a
// sentence when no prediction was made.
TEST(Report, PredictedScalingHasItsPlotsOrSaysWhyNot) {
  ReportData d = sample();
  EXPECT_NE(render_report_html(d).find("No prediction was made for this run."), std::string::npos);
  d.predicted_scaling = {{1, 2, 1000, 1.0}, {16, 32, 12000, 0.75}, {1024, 2048, 200000, 0.2}};
  d.scaling_note = "fits <of> this machine";
  const std::string html = render_report_html(d);
  EXPECT_EQ(count(html, "<svg"), 7u);  // the five above, efficiency and throughput
  EXPECT_NE(html.find("Predicted scaling efficiency"), std::string::npos);
  EXPECT_NE(html.find("fits &lt;of&gt; this machine"), std::string::npos);
  EXPECT_EQ(html.find("No prediction was made"), std::string::npos);
}

TEST(SvgChart, LogAxesSkipNonPositivePointsAndLabelBytes) {
  LineChart c{"t",
              "size",
              "us",
              AxisScale::kLog2Bytes,
              AxisScale::kLog10,
              {{"a", {{0, 1}, {4, 1}, {1 << 20, 100}, {2 << 20, -1}}, {}}}};
  const std::string svg = render_svg(c);
  // Exactly two points survive: "x,y x,y ".
  const size_t at = svg.find("points=\"");
  ASSERT_NE(at, std::string::npos);
  const size_t begin = at + 8;
  const std::string points = svg.substr(begin, svg.find('"', begin) - begin);
  EXPECT_EQ(count(points, ","), 2u);
  EXPECT_NE(svg.find(">1M<"), std::string::npos);
  EXPECT_NE(svg.find(">100<"), std::string::npos);
}

TEST(SvgChart, NothingToShow) {
  LineChart c{"t", "x", "y", AxisScale::kLog10, AxisScale::kLog10, {{"a", {{-1, -1}}, {}}}};
  EXPECT_NE(render_svg(c).find("no data"), std::string::npos);
}

}  // namespace
}  // namespace dltune::report
