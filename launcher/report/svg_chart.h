// SVG charts for the run report: line charts with readable axes (linear ticks at 1-2-5 steps
// with thousands separators, never exponents; log axes labelled in units: "64 KiB", "1 MiB",
// "10 µs", "1 ms"), faint raw series under their smoothed line, markers with tooltips, vertical
// reference lines with labels, horizontal bars with values and intervals, and a stacked bar.
// Every chart is a self-contained <svg> that scales to the width of its container (a viewBox,
// width 100 %); no scripts, no external resources. Elements carry classes and data-*
// attributes that tests read: svg.chart[data-chart], .series[data-points], .point, .bar, .tick.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dltune::report {

enum class AxisScale { kLinear, kLog10, kLog2 };
// How tick labels and tooltips read: plain numbers, seconds ("10 µs", "2.5 ms", "1.2 s"), bytes
// ("64 KiB", "1 MiB").
enum class Units { kPlain, kSeconds, kBytes };

struct Axis {
  std::string label;
  AxisScale scale = AxisScale::kLinear;
  Units units = Units::kPlain;
  std::optional<double> lo, hi;    // fixed ends of the domain (data outside is clipped)
  bool zero = false;               // linear: the domain includes 0
  std::optional<double> max_tick;  // no tick label above this (accuracy: 100)
};

enum class Style { kLine, kFaint, kMarkers, kLineMarkers };

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), any order; sorted when drawn
  Style style = Style::kLine;
  std::string color;              // "" = the palette's next colour
  std::vector<std::string> tips;  // per point (same order as points); "" or absent: automatic
  bool legend = true;
};

struct VMark {
  double x = 0;
  std::string label;  // drawn at the top of the line
};

struct LineChart {
  std::string id;  // data-chart attribute
  std::string title;
  Axis x, y;
  std::vector<Series> series;
  std::vector<VMark> marks;
  int width = 900;
  int height = 340;
};

// Renders the chart as an <svg> element. Points that cannot be shown (non-finite, or <= 0 on a
// log axis) are left out; a chart with nothing to show renders its frame and "no data".
std::string render_svg(const LineChart& chart);

struct Bar {
  std::string label;
  double value = 0;
  double lo = 0, hi = 0;  // an interval drawn as a whisker when hi > lo
  std::string color;      // "" = the palette
  std::string note;       // printed after the value
};

// Horizontal bars from 0 with their values printed ("4,249 samples/s"), for throughput. In this
// and render_intervals a row label too long for the left margin is cut with an ellipsis (the
// whole label is the text's tooltip), so that none runs past the chart's left edge.
std::string render_bars(const std::string& id, const std::string& title,
                        const std::vector<Bar>& bars, const std::string& unit, int width = 900);

// Ratios with their intervals on a log axis around 1 (a line at 1): the tuner's confidence,
// winner over each rival. Rows whose interval holds 1 are drawn grey ("not significant").
std::string render_intervals(const std::string& id, const std::string& title,
                             const std::vector<Bar>& rows, const std::string& x_label,
                             int width = 900);

// A stacked horizontal bar: labelled parts with values (e.g. milliseconds per step split into
// compute and exposed communication), with a legend.
std::string render_stacked_bar(const std::string& id, const std::string& title,
                               const std::vector<std::pair<std::string, double>>& parts,
                               const std::string& unit, int width = 900);

// Escapes &, <, >, " and ' for HTML/SVG text and attributes.
std::string xml_escape(const std::string& s);

// Labels as the axes and tooltips print them (for tests): 65536 -> "64 KiB", 1572864 ->
// "1.5 MiB"; 2.5e-5 -> "25 µs", 0.0123 -> "12.3 ms", 2 -> "2 s"; plain numbers with thousands
// separators and only the decimals `step` needs (4000 -> "4,000"; 0.25 at step 0.05 -> "0.25").
std::string bytes_label(double bytes);
std::string seconds_label(double seconds);
std::string number_label(double v, double step);

}  // namespace dltune::report
