#include "launcher/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace dltune::report {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

bool is_log(AxisScale s) { return s != AxisScale::kLinear; }

double to_axis(AxisScale s, double v) { return is_log(s) ? std::log10(v) : v; }

std::string fmt(double v) {
  char buf[32];
  if (v != 0 && (std::abs(v) >= 1e5 || std::abs(v) < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.0e", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

std::string bytes_label(double b) {
  static const char* units[] = {"B", "K", "M", "G"};
  int u = 0;
  while (b >= 1024 && u < 3) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%s", b, units[u]);
  return buf;
}

// Tick positions (in data units) and labels for an axis range [lo, hi] in axis units.
std::vector<std::pair<double, std::string>> ticks(AxisScale s, double lo, double hi) {
  std::vector<std::pair<double, std::string>> t;
  if (s == AxisScale::kLog2Bytes) {
    const int e0 = static_cast<int>(std::ceil(lo / std::log10(2.0)));
    const int e1 = static_cast<int>(std::floor(hi / std::log10(2.0)));
    const int step = std::max(1, (e1 - e0) / 8);
    for (int e = e0; e <= e1; e += step)
      t.push_back({std::ldexp(1.0, e), bytes_label(std::ldexp(1.0, e))});
  } else if (s == AxisScale::kLog10) {
    for (int e = static_cast<int>(std::ceil(lo)); e <= static_cast<int>(std::floor(hi)); ++e) {
      t.push_back({std::pow(10.0, e), fmt(std::pow(10.0, e))});
    }
  } else {
    const double span = hi - lo;
    const double raw = span / 6;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
      if (raw <= m * mag) {
        step = m * mag;
        break;
      }
    }
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      t.push_back({v, fmt(std::abs(v) < step * 1e-9 ? 0.0 : v)});
    }
  }
  return t;
}

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o.push_back(c);
    }
  }
  return o;
}

std::string render_svg(const LineChart& c) {
  const double left = 70, right = 170, top = 30, bottom = 50;
  const double pw = c.width - left - right, ph = c.height - top - bottom;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  auto visible = [&](double x, double y) {
    return std::isfinite(x) && std::isfinite(y) && (!is_log(c.x_scale) || x > 0) &&
           (!is_log(c.y_scale) || y > 0);
  };
  for (const Series& s : c.series) {
    for (const auto& [x, y] : s.points) {
      if (!visible(x, y)) continue;
      xlo = std::min(xlo, to_axis(c.x_scale, x));
      xhi = std::max(xhi, to_axis(c.x_scale, x));
      ylo = std::min(ylo, to_axis(c.y_scale, y));
      yhi = std::max(yhi, to_axis(c.y_scale, y));
    }
  }
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" << c.width
    << "\" height=\"" << c.height << "\" viewBox=\"0 0 " << c.width << " " << c.height
    << "\" role=\"img\" aria-label=\"" << xml_escape(c.title) << "\">\n";
  o << "<text x=\"" << left << "\" y=\"18\" class=\"title\">" << xml_escape(c.title) << "</text>\n";
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#999\"/>\n";
  if (!std::isfinite(xlo)) {
    o << "<text x=\"" << left + pw / 2 << "\" y=\"" << top + ph / 2
      << "\" text-anchor=\"middle\">no data</text>\n</svg>\n";
    return o.str();
  }
  if (xhi - xlo < 1e-12) xlo -= 0.5, xhi += 0.5;
  if (yhi - ylo < 1e-12)
    ylo -= is_log(c.y_scale) ? 0.5 : std::max(1e-9, std::abs(ylo) * 0.1),
        yhi += is_log(c.y_scale) ? 0.5 : std::max(1e-9, std::abs(yhi) * 0.1);
  // Linear y axes of positive data start at zero, so that small wiggles look small.
  if (!is_log(c.y_scale) && ylo > 0) ylo = 0;
  auto px = [&](double x) { return left + (to_axis(c.x_scale, x) - xlo) / (xhi - xlo) * pw; };
  auto py = [&](double y) { return top + ph - (to_axis(c.y_scale, y) - ylo) / (yhi - ylo) * ph; };
  for (const auto& [v, label] : ticks(c.x_scale, xlo, xhi)) {
    o << "<line x1=\"" << px(v) << "\" x2=\"" << px(v) << "\" y1=\"" << top << "\" y2=\""
      << top + ph << "\" stroke=\"#eee\"/><text x=\"" << px(v) << "\" y=\"" << top + ph + 16
      << "\" text-anchor=\"middle\" class=\"tick\">" << xml_escape(label) << "</text>\n";
  }
  for (const auto& [v, label] : ticks(c.y_scale, ylo, yhi)) {
    o << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << py(v) << "\" y2=\""
      << py(v) << "\" stroke=\"#eee\"/><text x=\"" << left - 6 << "\" y=\"" << py(v) + 4
      << "\" text-anchor=\"end\" class=\"tick\">" << xml_escape(label) << "</text>\n";
  }
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << c.height - 8
    << "\" text-anchor=\"middle\" class=\"label\">" << xml_escape(c.x_label) << "</text>\n";
  o << "<text transform=\"translate(14," << top + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\" class=\"label\">" << xml_escape(c.y_label)
    << "</text>\n";
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    const char* color = kPalette[i % std::size(kPalette)];
    auto pts = s.points;
    std::sort(pts.begin(), pts.end());
    o << "<polyline class=\"series\" data-name=\"" << xml_escape(s.name)
      << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.8\" points=\"";
    for (const auto& [x, y] : pts) {
      if (visible(x, y)) o << px(x) << "," << py(y) << " ";
    }
    o << "\"/>\n";
    for (const auto& [x, y] : pts) {
      if (!visible(x, y)) continue;
      if (std::find(s.chosen_x.begin(), s.chosen_x.end(), x) == s.chosen_x.end()) continue;
      o << "<circle class=\"chosen\" cx=\"" << px(x) << "\" cy=\"" << py(y) << "\" r=\"4\" fill=\""
        << color << "\"><title>" << xml_escape(s.name) << " chosen at " << fmt(x)
        << "</title></circle>\n";
    }
    const double ly = top + 12 + 18 * static_cast<double>(i);
    o << "<line x1=\"" << left + pw + 12 << "\" x2=\"" << left + pw + 32 << "\" y1=\"" << ly
      << "\" y2=\"" << ly << "\" stroke=\"" << color << "\" stroke-width=\"3\"/><text x=\""
      << left + pw + 38 << "\" y=\"" << ly + 4 << "\" class=\"legend\">" << xml_escape(s.name)
      << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string render_stacked_bar(const std::string& title,
                               const std::vector<std::pair<std::string, double>>& parts,
                               const std::string& unit, int width) {
  double total = 0;
  for (const auto& p : parts) total += std::max(0.0, p.second);
  const double left = 20, bar_w = width - 40, height = 110;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" << width
    << "\" height=\"" << height << "\" role=\"img\" aria-label=\"" << xml_escape(title) << "\">\n"
    << "<text x=\"" << left << "\" y=\"18\" class=\"title\">" << xml_escape(title) << "</text>\n";
  double x = left;
  double legend_x = left;
  for (size_t i = 0; i < parts.size(); ++i) {
    const double w = total > 0 ? std::max(0.0, parts[i].second) / total * bar_w : 0;
    const char* color = kPalette[i % std::size(kPalette)];
    const std::string label = parts[i].first + " " + fmt(parts[i].second) + " " + unit;
    o << "<rect class=\"part\" x=\"" << x << "\" y=\"30\" width=\"" << w
      << "\" height=\"30\" fill=\"" << color << "\"><title>" << xml_escape(label)
      << "</title></rect>\n";
    o << "<rect x=\"" << legend_x << "\" y=\"76\" width=\"12\" height=\"12\" fill=\"" << color
      << "\"/><text x=\"" << legend_x + 16 << "\" y=\"87\" class=\"legend\">" << xml_escape(label)
      << "</text>\n";
    legend_x += 16 + 6.5 * static_cast<double>(label.size()) + 18;  // ~6.5 px per 11 px glyph
    x += w;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace dltune::report
