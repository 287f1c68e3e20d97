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
constexpr double kCharW = 6.6;  // ~ width of an 11 px glyph, for laying out legends

constexpr double kLabelCharW = kCharW * 12 / 11;  // 7.2: a 12 px glyph (.label, .value)

// A row's label, right-aligned `room` px left of the plot: cut with an ellipsis where it would
// run past the chart's left edge (issue 42: a long candidate's name lost its start), at a UTF-8
// character boundary. The whole label stays in the row's tooltip.
std::string fit_row_label(const std::string& label, double room) {
  const auto fits = static_cast<size_t>(std::max(4.0, room / kLabelCharW));
  if (label.size() <= fits) return label;
  size_t cut = fits - 1;  // room for the ellipsis
  while (cut > 0 && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) --cut;
  return label.substr(0, cut) + "\u2026";
}

// The <text> of a row label at (x, y), fitted to `room` px, with the whole label as its tooltip.
std::string row_label_text(const std::string& label, double x, double y, double room) {
  std::ostringstream o;
  o << "<text x=\"" << x << "\" y=\"" << y << "\" text-anchor=\"end\" class=\"label\"><title>"
    << xml_escape(label) << "</title>" << xml_escape(fit_row_label(label, room)) << "</text>";
  return o.str();
}

bool is_log(AxisScale s) { return s != AxisScale::kLinear; }

double to_axis(AxisScale s, double v) {
  if (s == AxisScale::kLog10) return std::log10(v);
  if (s == AxisScale::kLog2) return std::log2(v);
  return v;
}

// Up to 3 significant digits, no trailing zeros, no exponent: 2.5, 10, 812, 0.05.
std::string short_number(double v) {
  char buf[64];
  const double a = std::fabs(v);
  const int decimals = a >= 100 || a == 0 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string label_for(Units u, double v, double step) {
  if (u == Units::kBytes) return bytes_label(v);
  if (u == Units::kSeconds) return seconds_label(v);
  return number_label(v, step);
}

struct Ticks {
  std::vector<std::pair<double, std::string>> at;  // data value, label
};

// Ticks over the domain [lo, hi] (axis units).
Ticks ticks(const Axis& ax, double lo, double hi) {
  Ticks t;
  auto keep = [&](double v) { return !ax.max_tick || v <= *ax.max_tick + 1e-9; };
  if (ax.scale == AxisScale::kLog2) {
    const int e0 = static_cast<int>(std::ceil(lo - 1e-9)),
              e1 = static_cast<int>(std::floor(hi + 1e-9));
    // Every power of two, or every 2nd, 5th, 10th (1 KiB, 1 MiB, 1 GiB) or 20th, aligned.
    int step = 20;
    for (int s : {1, 2, 5, 10}) {
      if ((e1 - e0) / s <= 8) {
        step = s;
        break;
      }
    }
    for (int e = e0; e <= e1; ++e) {
      if (((e % step) + step) % step != 0) continue;
      const double v = std::exp2(e);
      if (keep(v)) t.at.emplace_back(v, label_for(ax.units, v, 0));
    }
  } else if (ax.scale == AxisScale::kLog10) {
    const int e0 = static_cast<int>(std::floor(lo)), e1 = static_cast<int>(std::ceil(hi));
    const bool fine = hi - lo < 1.5;  // less than ~2 decades: 1-2-5 ticks
    for (int e = e0; e <= e1; ++e) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (m != 1.0 && !fine) continue;
        const double v = m * std::pow(10.0, e);
        const double a = std::log10(v);
        if (a < lo - 1e-9 || a > hi + 1e-9 || !keep(v)) continue;
        t.at.emplace_back(v, label_for(ax.units, v, v));  // "10", "0.5": the value's own digits
      }
    }
  } else {
    const double raw = (hi - lo) / 6;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = 10 * mag;
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
      if (raw <= m * mag) {
        step = m * mag;
        break;
      }
    }
    for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) {
      const double clean = std::fabs(v) < step * 1e-9 ? 0.0 : v;
      if (keep(clean)) t.at.emplace_back(clean, label_for(ax.units, clean, step));
    }
  }
  return t;
}

// The domain of an axis (axis units) from the visible values, padded so that nothing is drawn
// on the frame, and never degenerate.
std::pair<double, double> domain(const Axis& ax, std::vector<double> values) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values) {
    lo = std::min(lo, to_axis(ax.scale, v));
    hi = std::max(hi, to_axis(ax.scale, v));
  }
  if (ax.lo) lo = to_axis(ax.scale, *ax.lo);
  if (ax.hi) hi = to_axis(ax.scale, *ax.hi);
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (!is_log(ax.scale) && ax.zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  if (hi - lo <= 0) {
    if (is_log(ax.scale)) {
      lo -= 0.5, hi += 0.5;
    } else {
      const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
      lo -= pad, hi += pad;
    }
  }
  // Padded, so that no point is drawn on the frame (a 100 % accuracy included).
  const double pad = (hi - lo) * 0.05;
  if (!ax.lo && !(ax.zero && lo == 0)) lo -= pad;
  if (!ax.hi) hi += pad;
  return {lo, hi};
}

std::string open_svg(const std::string& id, const std::string& title, int w, int h) {
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"" << xml_escape(id)
    << "\" viewBox=\"0 0 " << w << " " << h << "\" width=\"100%\" role=\"img\" aria-label=\""
    << xml_escape(title) << "\">\n<text x=\"12\" y=\"22\" class=\"title\">" << xml_escape(title)
    << "</text>\n";
  return o.str();
}

std::string color_of(const std::string& c, size_t i) {
  return c.empty() ? kPalette[i % std::size(kPalette)] : c;
}

std::string tip_for(const LineChart& c, const Series& s, size_t k) {
  if (k < s.tips.size() && !s.tips[k].empty()) return s.tips[k];
  const auto& [x, y] = s.points[k];
  return s.name + ": " + label_for(c.x.units, x, std::fabs(x) < 10 ? 0.01 : 1) + ", " +
         label_for(c.y.units, y, std::fabs(y) < 10 ? 0.001 : 1);
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

std::string bytes_label(double b) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[48];
  if (std::fabs(b - std::round(b)) < 1e-9 || b >= 100) {
    std::snprintf(buf, sizeof buf, "%.0f %s", b, units[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  }
  return buf;
}

std::string seconds_label(double s) {
  if (s == 0) return "0 s";
  if (std::fabs(s) < 1e-3) return short_number(s * 1e6) + " \xC2\xB5s";  // µs
  if (std::fabs(s) < 1) return short_number(s * 1e3) + " ms";
  return short_number(s) + " s";
}

std::string number_label(double v, double step) {
  int decimals = 0;
  if (step > 0 && step < 1) decimals = static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  if (step <= 0) decimals = std::fabs(v) >= 100 ? 0 : std::fabs(v) >= 1 ? 2 : 3;
  decimals = std::clamp(decimals, 0, 6);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::fabs(v));
  std::string digits = buf;
  const size_t dot = digits.find('.');
  std::string whole = digits.substr(0, dot),
              frac = dot == std::string::npos ? "" : digits.substr(dot);
  for (int i = static_cast<int>(whole.size()) - 3; i > 0; i -= 3) {
    whole.insert(static_cast<size_t>(i), ",");
  }
  const bool negative =
      v < 0 && (whole != "0" || frac.find_first_not_of(".0") != std::string::npos);
  return (negative ? "-" : "") + whole + frac;
}

namespace {

// Whether a point is drawn: finite, positive on a log axis, inside the x axis's fixed range.
bool visible(const LineChart& c, double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && (!is_log(c.x.scale) || x > 0) &&
         (!is_log(c.y.scale) || y > 0) && (!c.x.lo || x >= *c.x.lo - 1e-12) &&
         (!c.x.hi || x <= *c.x.hi + 1e-12);
}

// A series' entry in the legend.
struct LegendItem {
  std::string name, color;
  Style style;
};

// A legend entry's width in pixels: its line, the name and a gap.
double legend_width(const LegendItem& it) {
  return 34 + kCharW * static_cast<double>(it.name.size()) + 18;
}

// The legend's entries laid out in rows at most `width` pixels wide (one row at least).
std::vector<std::vector<const LegendItem*>> legend_rows(const std::vector<LegendItem>& items,
                                                        double width) {
  std::vector<std::vector<const LegendItem*>> rows(1);
  double row_w = 0;
  for (const LegendItem& it : items) {
    const double w = legend_width(it);
    if (row_w + w > width && !rows.back().empty()) rows.emplace_back(), row_w = 0;
    rows.back().push_back(&it);
    row_w += w;
  }
  return rows;
}

// The plot area of a line chart (pixels) and its axes' domains (on the axes' scales): where a
// point goes.
struct Plot {
  const LineChart& c;
  double left, top, pw, ph;
  double xlo, xhi, ylo, yhi;
  double px(double x) const { return left + (to_axis(c.x.scale, x) - xlo) / (xhi - xlo) * pw; }
  double py(double y) const { return top + ph - (to_axis(c.y.scale, y) - ylo) / (yhi - ylo) * ph; }
};

// The grid lines with their tick labels, the axis labels and the vertical marks.
void draw_axes(std::ostringstream& o, const Plot& p) {
  const LineChart& c = p.c;
  const double left = p.left, top = p.top, pw = p.pw, ph = p.ph;
  for (const auto& [v, label] : ticks(c.x, p.xlo, p.xhi).at) {
    o << "<line x1=\"" << p.px(v) << "\" x2=\"" << p.px(v) << "\" y1=\"" << top << "\" y2=\""
      << top + ph << "\" stroke=\"#eee\"/><text x=\"" << p.px(v) << "\" y=\"" << top + ph + 16
      << "\" text-anchor=\"middle\" class=\"tick\">" << xml_escape(label) << "</text>\n";
  }
  for (const auto& [v, label] : ticks(c.y, p.ylo, p.yhi).at) {
    o << "<line x1=\"" << left << "\" x2=\"" << left + pw << "\" y1=\"" << p.py(v) << "\" y2=\""
      << p.py(v) << "\" stroke=\"#eee\"/><text x=\"" << left - 6 << "\" y=\"" << p.py(v) + 4
      << "\" text-anchor=\"end\" class=\"tick\">" << xml_escape(label) << "</text>\n";
  }
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << top + ph + 36
    << "\" text-anchor=\"middle\" class=\"label\">" << xml_escape(c.x.label) << "</text>\n";
  o << "<text transform=\"translate(16," << top + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\" class=\"label\">" << xml_escape(c.y.label)
    << "</text>\n";
  for (const VMark& m : c.marks) {
    if (!std::isfinite(m.x) || (is_log(c.x.scale) && m.x <= 0)) continue;
    o << "<line class=\"mark\" x1=\"" << p.px(m.x) << "\" x2=\"" << p.px(m.x) << "\" y1=\"" << top
      << "\" y2=\"" << top + ph << "\" stroke=\"#555\" stroke-dasharray=\"4 3\"/><text x=\""
      << p.px(m.x) + 4 << "\" y=\"" << top + 12 << "\" class=\"marklabel\">" << xml_escape(m.label)
      << "</text>\n";
  }
}

// Series i: its visible points in x order as a polyline (invisible for markers only), and a
// circle with a tooltip at each point where it has markers.
void draw_series(std::ostringstream& o, const Plot& p, size_t i) {
  const LineChart& c = p.c;
  const Series& s = c.series[i];
  const std::string color = color_of(s.color, i);
  std::vector<size_t> order(s.points.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return s.points[a].first < s.points[b].first; });
  size_t shown = 0;
  for (size_t k : order) shown += visible(c, s.points[k].first, s.points[k].second) ? 1 : 0;
  const bool line = s.style != Style::kMarkers;
  o << "<polyline class=\"series\" data-name=\"" << xml_escape(s.name) << "\" data-points=\""
    << shown << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\""
    << (s.style == Style::kFaint ? 1 : 2) << "\" stroke-opacity=\""
    << (s.style == Style::kFaint ? 0.25
        : line                   ? 1
                                 : 0)
    << "\" points=\"";
  for (size_t k : order) {
    if (visible(c, s.points[k].first, s.points[k].second)) {
      o << p.px(s.points[k].first) << "," << p.py(s.points[k].second) << " ";
    }
  }
  o << "\"/>\n";
  if (s.style == Style::kMarkers || s.style == Style::kLineMarkers) {
    for (size_t k : order) {
      const auto& [x, y] = s.points[k];
      if (!visible(c, x, y)) continue;
      o << "<circle class=\"point\" cx=\"" << p.px(x) << "\" cy=\"" << p.py(y)
        << "\" r=\"4\" fill=\"" << color << "\"><title>" << xml_escape(tip_for(c, s, k))
        << "</title></circle>\n";
    }
  }
}

// The legend's rows, the first baseline at `ly`, each row starting at `left`.
void draw_legend(std::ostringstream& o, const std::vector<std::vector<const LegendItem*>>& rows,
                 double left, double ly) {
  for (const auto& row : rows) {
    double lx = left;
    for (const LegendItem* it : row) {
      o << "<line x1=\"" << lx << "\" x2=\"" << lx + 24 << "\" y1=\"" << ly - 4 << "\" y2=\""
        << ly - 4 << "\" stroke=\"" << it->color << "\" stroke-width=\"3\" stroke-opacity=\""
        << (it->style == Style::kFaint ? 0.3 : 1) << "\"/>";
      if (it->style == Style::kMarkers || it->style == Style::kLineMarkers) {
        o << "<circle cx=\"" << lx + 12 << "\" cy=\"" << ly - 4 << "\" r=\"4\" fill=\"" << it->color
          << "\"/>";
      }
      o << "<text x=\"" << lx + 30 << "\" y=\"" << ly << "\" class=\"legend\">"
        << xml_escape(it->name) << "</text>\n";
      lx += legend_width(*it);
    }
    ly += 18;
  }
}

}  // namespace

std::string render_svg(const LineChart& c) {
  std::vector<double> xs, ys;
  for (const Series& s : c.series) {
    for (const auto& [x, y] : s.points) {
      if (!visible(c, x, y)) continue;
      xs.push_back(x);
      ys.push_back(y);
    }
  }
  for (const VMark& m : c.marks) {
    if (std::isfinite(m.x) && (!is_log(c.x.scale) || m.x > 0)) xs.push_back(m.x);
  }
  // The legend, laid out in rows under the x axis label.
  std::vector<LegendItem> items;
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    if (s.legend) items.push_back({s.name, color_of(s.color, i), s.style});
  }
  const double left = 82, right = 24, top = 40;
  const auto rows = legend_rows(items, c.width - left - right);
  const double legend_h = items.empty() ? 0 : 18.0 * static_cast<double>(rows.size()) + 6;
  const double bottom = 52 + legend_h;
  const double pw = c.width - left - right, ph = c.height - top - bottom;
  std::ostringstream o;
  o << open_svg(c.id, c.title, c.width, c.height);
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#bbb\"/>\n";
  if (ys.empty()) {
    o << "<text x=\"" << left + pw / 2 << "\" y=\"" << top + ph / 2
      << "\" text-anchor=\"middle\" class=\"empty\">no data</text>\n</svg>\n";
    return o.str();
  }
  const auto [xlo, xhi] = domain(c.x, xs);
  const auto [ylo, yhi] = domain(c.y, ys);
  const Plot p{c, left, top, pw, ph, xlo, xhi, ylo, yhi};
  draw_axes(o, p);
  for (size_t i = 0; i < c.series.size(); ++i) draw_series(o, p, i);
  draw_legend(o, rows, left, top + ph + 54);
  o << "</svg>\n";
  return o.str();
}

std::string render_bars(const std::string& id, const std::string& title,
                        const std::vector<Bar>& bars, const std::string& unit, int width) {
  const double left = 250, right = 200, top = 36, row = 30;
  const double h = top + row * static_cast<double>(bars.size()) + 30;
  double hi = 0;
  for (const Bar& b : bars) hi = std::max({hi, b.value, b.hi});
  if (!(hi > 0)) hi = 1;
  const double pw = width - left - right;
  auto px = [&](double v) { return left + std::max(0.0, v) / hi * pw; };
  std::ostringstream o;
  o << open_svg(id, title, width, static_cast<int>(h));
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double y = top + row * static_cast<double>(i);
    const std::string color = color_of(b.color, i);
    const std::string value =
        number_label(b.value, 1) + " " + unit + (b.note.empty() ? std::string() : " " + b.note);
    o << row_label_text(b.label, left - 8, y + 17, left - 12);
    o << "<rect class=\"bar\" x=\"" << left << "\" y=\"" << y + 4 << "\" width=\""
      << px(b.value) - left << "\" height=\"" << row - 10 << "\" fill=\"" << color << "\"><title>"
      << xml_escape(b.label + ": " + value) << "</title></rect>";
    if (b.hi > b.lo) {
      o << "<line x1=\"" << px(b.lo) << "\" x2=\"" << px(b.hi) << "\" y1=\"" << y + 14 << "\" y2=\""
        << y + 14 << "\" stroke=\"#222\" stroke-width=\"1.5\"/>";
    }
    o << "<text x=\"" << px(std::max(b.value, b.hi)) + 6 << "\" y=\"" << y + 18
      << "\" class=\"value\">" << xml_escape(value) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string render_intervals(const std::string& id, const std::string& title,
                             const std::vector<Bar>& rows, const std::string& x_label, int width) {
  const double left = 330, right = 210, top = 40, row = 24;
  const double h = top + row * static_cast<double>(std::max<size_t>(rows.size(), 1)) + 44;
  double lo = 1, hi = 1;
  for (const Bar& b : rows) {
    for (double v : {b.value, b.lo, b.hi}) {
      if (v > 0 && std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  }
  // Symmetric around 1 on the log axis, at least 0.9-1.1.
  const double span = std::max({std::log(hi), -std::log(lo), std::log(1.1)}) * 1.1;
  const double pw = width - left - right;
  auto px = [&](double v) { return left + (std::log(v) + span) / (2 * span) * pw; };
  std::ostringstream o;
  o << open_svg(id, title, width, static_cast<int>(h));
  const double bottom = top + row * static_cast<double>(std::max<size_t>(rows.size(), 1));
  double last_x = -1e9;
  for (double t : {0.33, 0.5, 0.67, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0}) {
    if (std::fabs(std::log(t)) > span) continue;
    // 1 always; the others only where they do not crowd their neighbours (or 1).
    const bool near_one = t != 1.0 && std::fabs(px(t) - px(1.0)) < 48;
    if (near_one || (t != 1.0 && px(t) - last_x < 48)) continue;
    last_x = px(t);
    o << "<line x1=\"" << px(t) << "\" x2=\"" << px(t) << "\" y1=\"" << top << "\" y2=\"" << bottom
      << "\" stroke=\"" << (t == 1.0 ? "#444" : "#eee") << "\"/><text x=\"" << px(t) << "\" y=\""
      << bottom + 16 << "\" text-anchor=\"middle\" class=\"tick\">" << number_label(t, 0.01)
      << "x</text>\n";
  }
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << bottom + 36
    << "\" text-anchor=\"middle\" class=\"label\">" << xml_escape(x_label) << "</text>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Bar& b = rows[i];
    const double y = top + row * static_cast<double>(i) + row / 2;
    const bool known = b.hi > b.lo && b.lo > 0;
    const bool significant = known && (b.lo > 1 || b.hi < 1);
    const std::string color = significant ? "#1f77b4" : "#999";
    std::string value = number_label(b.value, 0.01) + "x";
    if (known) value += " (" + number_label(b.lo, 0.01) + "-" + number_label(b.hi, 0.01) + ")";
    if (!b.note.empty()) value += " " + b.note;
    o << row_label_text(b.label, left - 8, y + 4, left - 12);
    if (known) {
      o << "<line x1=\"" << px(b.lo) << "\" x2=\"" << px(b.hi) << "\" y1=\"" << y << "\" y2=\"" << y
        << "\" stroke=\"" << color << "\" stroke-width=\"3\"/>";
    }
    if (b.value > 0) {
      o << "<circle class=\"point\" cx=\"" << px(b.value) << "\" cy=\"" << y << "\" r=\"5\" fill=\""
        << color << "\"><title>" << xml_escape(b.label + ": " + value) << "</title></circle>";
    }
    o << "<text x=\"" << left + pw + 8 << "\" y=\"" << y + 4 << "\" class=\"value\">"
      << xml_escape(value) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string render_stacked_bar(const std::string& id, const std::string& title,
                               const std::vector<std::pair<std::string, double>>& parts,
                               const std::string& unit, int width) {
  double total = 0;
  for (const auto& p : parts) total += std::max(0.0, p.second);
  const double left = 20, bar_w = width - 40, height = 116;
  std::ostringstream o;
  o << open_svg(id, title + " (" + number_label(total, 0.01) + " " + unit + ")", width,
                static_cast<int>(height));
  double x = left, legend_x = left;
  for (size_t i = 0; i < parts.size(); ++i) {
    const double w = total > 0 ? std::max(0.0, parts[i].second) / total * bar_w : 0;
    const char* color = kPalette[i % std::size(kPalette)];
    const std::string label =
        parts[i].first + " " + number_label(parts[i].second, 0.01) + " " + unit;
    o << "<rect class=\"bar\" x=\"" << x << "\" y=\"34\" width=\"" << w
      << "\" height=\"30\" fill=\"" << color << "\"><title>" << xml_escape(label)
      << "</title></rect>\n";
    o << "<rect x=\"" << legend_x << "\" y=\"80\" width=\"12\" height=\"12\" fill=\"" << color
      << "\"/><text x=\"" << legend_x + 16 << "\" y=\"91\" class=\"legend\">" << xml_escape(label)
      << "</text>\n";
    legend_x += 16 + kCharW * static_cast<double>(label.size()) + 18;
    x += w;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace dltune::report
