// Computation and communication that slow each other while both run (issue 41 item 4).
//
// A data-parallel step reduces its gradient buckets on a communication thread (or, on GPUs, a
// communication stream) while backward computes. The two are not free of each other: on a
// host, a communication thread without a core of its own takes the compute's cores, and even
// with one the copies and reductions share memory bandwidth and caches; on a GPU, NCCL's
// kernels take streaming multiprocessors and memory bandwidth from the compute's kernels. So
// while both run, each progresses more slowly than alone.
//
// The model: while both run, computation proceeds at 1 / (1 + compute) of its speed alone and
// communication at 1 / (1 + comm) of its own, where `compute` and `comm` are the slowdowns at
// the size of the bucket being reduced (points measured or assumed per size; between them
// interpolated on log(bytes), beyond them the nearest). 0 and 0 is perfect overlap; 1 and 1 is
// two threads time-sharing one core, which takes exactly as long as running one after the
// other. overlap_timeline() runs the two streams as an event simulation: compute works through
// its segments in order (backward node by node), each bucket joins the communication queue when
// the segment that makes it final ends, and the queue is served one bucket at a time.
#pragma once

#include <string>
#include <vector>

namespace dltune::planning {

struct Interference {
  struct Point {
    double bytes = 0;
    double compute = 0;  // compute's slowdown while this size's allreduce runs (0.19: 19 %)
    double comm = 0;     // the allreduce's slowdown while compute runs
  };
  std::vector<Point> points;  // ascending bytes; empty: no interference (perfect overlap)
  std::string source;         // said with every prediction that used it
  // How sure: the slowdowns at the low and the high end of their range, at the same sizes as
  // `points` (the ends of a prediction's interval); empty: taken as exact.
  std::vector<Point> low, high;
  // The slowdowns at `bytes` (zero without points).
  Point at(double bytes) const;
  bool empty() const { return points.empty(); }
  bool has_range() const { return !low.empty() && low.size() == high.size(); }
  // The same slowdowns everywhere.
  static Interference constant(double compute, double comm, std::string source);
  // The interference at the low or the high end of its range (itself without one), exact.
  Interference end(bool high_end) const;
};

// One bucket of overlap_timeline(): `seconds` of communication alone, of `bytes`, final when
// compute segment `ready_after` ends (-1: when every segment has ended).
struct OverlapBucket {
  double seconds = 0, bytes = 0;
  int ready_after = -1;
};

struct OverlapResult {
  double compute_end = 0;   // when the last compute segment ended, slowed by the overlap
  double comm_end = 0;      // when the last bucket was reduced (the start when none)
  double overlapped_s = 0;  // time during which both ran
};

// The two streams above from time `start`: compute segments `segments` (seconds alone) one
// after the other, buckets served in the order given, each from when it is final and the
// previous one is done. Precondition: every ready_after < segments.size(); segments >= 0.
OverlapResult overlap_timeline(double start, const std::vector<double>& segments,
                               const std::vector<OverlapBucket>& buckets, const Interference& i);

// The slowdowns that explain one measurement of the two streams, by the model above: compute
// of `compute_alone` seconds and communication of `comm_alone` seconds started together and
// ended after `compute_took` and `comm_took`. The stream that ended last ran slowed while the
// other ran and alone after: its x = (took - alone) / (the other's took) = s / (1 + s); the
// other ran slowed throughout: s = took / alone - 1. Slowdowns are capped at 9 (x at 0.9: the
// stream hardly moved while the other ran) and may be negative (faster together: noise).
// Precondition: all four > 0.
Interference::Point slowdowns_from_timings(double compute_alone, double comm_alone,
                                           double compute_took, double comm_took);

}  // namespace dltune::planning
