#include "planning/overlap.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dltune::planning {

namespace {

// `points` (ascending bytes) at `bytes`: interpolated on log(bytes), the nearest beyond them,
// never below zero.
Interference::Point interpolate(const std::vector<Interference::Point>& points, double bytes) {
  using Point = Interference::Point;
  if (points.empty()) return {bytes, 0, 0};
  auto clamp0 = [bytes](Point p) {
    return Point{bytes, std::max(0.0, p.compute), std::max(0.0, p.comm)};
  };
  if (bytes <= points.front().bytes) return clamp0(points.front());
  if (bytes >= points.back().bytes) return clamp0(points.back());
  auto above = std::upper_bound(points.begin(), points.end(), bytes,
                                [](double b, const Point& p) { return b < p.bytes; });
  auto below = above - 1;
  const double f = (std::log(bytes) - std::log(below->bytes)) /
                   (std::log(above->bytes) - std::log(below->bytes));
  return clamp0({bytes, below->compute + f * (above->compute - below->compute),
                 below->comm + f * (above->comm - below->comm)});
}

}  // namespace

Interference::Point Interference::at(double bytes) const { return interpolate(points, bytes); }

Interference Interference::constant(double compute, double comm, std::string source) {
  Interference i;
  i.points = {{1, compute, comm}};
  i.source = std::move(source);
  return i;
}

Interference Interference::end(bool high_end) const {
  Interference i;
  i.points = has_range() ? (high_end ? high : low) : points;
  i.source = source;
  return i;
}

OverlapResult overlap_timeline(double start, const std::vector<double>& segments,
                               const std::vector<OverlapBucket>& buckets, const Interference& i) {
  OverlapResult r;
  double t = start;
  size_t s = 0;  // the compute segment running; segments.size() once compute has ended
  double c_left = segments.empty() ? 0 : std::max(0.0, segments[0]);
  size_t next = 0;  // the next bucket to start
  bool comm = false;
  double m_left = 0;
  Interference::Point slow;
  r.compute_end = segments.empty() ? start : -1;
  r.comm_end = start;
  auto ready = [&](size_t k) {
    const int after = buckets[k].ready_after;
    return after < 0 ? s >= segments.size() : s > static_cast<size_t>(after);
  };
  for (;;) {
    while (s < segments.size() && c_left <= 0) {
      if (++s < segments.size()) c_left = std::max(0.0, segments[s]);
    }
    if (s >= segments.size() && r.compute_end < 0) r.compute_end = t;
    if (comm && m_left <= 0) {
      comm = false;
      r.comm_end = t;
    }
    if (!comm && next < buckets.size() && ready(next)) {
      comm = true;
      m_left = std::max(0.0, buckets[next].seconds);
      slow = i.at(buckets[next].bytes);
      ++next;
      continue;  // a zero-length bucket ends at once
    }
    const bool computing = s < segments.size();
    if (!computing && !comm) break;
    const bool both = computing && comm;
    const double rc = both ? 1 / (1 + slow.compute) : 1;
    const double rm = both ? 1 / (1 + slow.comm) : 1;
    const double tc = computing ? c_left / rc : std::numeric_limits<double>::infinity();
    const double tm = comm ? m_left / rm : std::numeric_limits<double>::infinity();
    const double dt = std::min(tc, tm);
    t += dt;
    if (both) r.overlapped_s += dt;
    // The stream that reached its event ends exactly (no rounding residue left behind).
    if (computing) c_left = tc <= tm ? 0 : c_left - dt * rc;
    if (comm) m_left = tm <= tc ? 0 : m_left - dt * rm;
  }
  return r;
}

Interference::Point slowdowns_from_timings(double compute_alone, double comm_alone,
                                           double compute_took, double comm_took) {
  auto partly = [](double took, double alone, double overlap) {
    const double x = std::clamp((took - alone) / overlap, -0.9, 0.9);
    return x / (1 - x);
  };
  auto throughout = [](double took, double alone) { return std::min(9.0, took / alone - 1); };
  Interference::Point p;
  if (comm_took <= compute_took) {
    p.comm = throughout(comm_took, comm_alone);
    p.compute = partly(compute_took, compute_alone, comm_took);
  } else {
    p.compute = throughout(compute_took, compute_alone);
    p.comm = partly(comm_took, comm_alone, compute_took);
  }
  return p;
}

}  // namespace dltune::planning
