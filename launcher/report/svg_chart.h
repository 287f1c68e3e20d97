// Minimal SVG line charts for the run report: linear or log axes with readable ticks, a
// legend, and optional emphasised segments (the tuner's chosen algorithm per size range).
// Output is a self-contained <svg> element; no scripts, no external resources.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace dltune::report {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), any order; sorted when drawn
  // x values at which this series is the chosen one: drawn with filled markers.
  std::vector<double> chosen_x;
};

enum class AxisScale { kLinear, kLog10, kLog2Bytes };

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  AxisScale x_scale = AxisScale::kLinear;
  AxisScale y_scale = AxisScale::kLinear;
  std::vector<Series> series;
  int width = 720;
  int height = 360;
};

// Renders the chart as an <svg> element. Points that cannot be shown (non-finite, or <= 0 on a
// log axis) are skipped; a chart with nothing to show renders its frame and "no data".
std::string render_svg(const LineChart& chart);

// Escapes &, <, >, " and ' for HTML/SVG text and attributes.
std::string xml_escape(const std::string& s);

// A stacked horizontal bar: labelled parts with values (e.g. seconds per step split into
// compute and exposed communication), rendered as an <svg> element with a legend.
std::string render_stacked_bar(const std::string& title,
                               const std::vector<std::pair<std::string, double>>& parts,
                               const std::string& unit, int width = 720);

}  // namespace dltune::report
