// Alpha, beta and gamma of one level of this machine, fitted from the allreduce sweeps the
// tuner measured (tuner/db measurements of one job shape), so that `dltune predict` can reuse
// them at node counts nobody measured.
//
// Each measured (algorithm, size, median time) is one equation of predict/fabric.h's model:
// t = a alpha + b beta + c gamma, where a, b, c are that algorithm's coefficients at the
// shape (its steps, bytes sent and bytes reduced on the level). A one-node sweep fits the
// `intra` level; a sweep across nodes fits `inter` with intra already known (its time
// subtracted; the ring's slowest-link step is taken as the inter link's, which it is whenever
// the network is the slower level). The fit minimises the relative error (weights 1 / t^2,
// so a 4-byte allreduce counts as much as a 64 MiB one), all three coefficients >= 0 (the best
// non-negative subset). Its quality is the root mean square of the relative residuals. Ring
// segment sizes are one algorithm here; `native` (Open MPI's own) is not modelled and skipped.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "tuner/db/records.h"

#include "predict/fabric.h"

namespace dltune::predict {

struct LevelFit {
  std::string level;                  // "intra" or "inter"
  int nodes = 1, ranks_per_node = 1;  // the shape it was measured at
  Link link;
  double rel_rms = 0;  // fit error
  int points = 0;
};

// `rows`: the shape's successful allreduce measurements (others are ignored). Errors
// (invalid_input): fewer than three usable points, or rows of several shapes.
Result<LevelFit> fit_intra(const std::vector<tuner::db::Measurement>& rows);
Result<LevelFit> fit_inter(const std::vector<tuner::db::Measurement>& rows, const Link& intra);

// The fit's relative residual per point, for reports: (bytes, algorithm, measured s, model s).
struct FitPoint {
  double bytes = 0;
  std::string algo;
  double measured_s = 0, model_s = 0;
};
std::vector<FitPoint> fit_points(const std::vector<tuner::db::Measurement>& rows,
                                 const Fabric& fabric);

}  // namespace dltune::predict
