// This machine's allreduce costs for `dltune predict`, from what the tuner stored: the
// measured curves at every job shape it swept (tuner/cost_model.h's PiecewiseCost per
// candidate), and per-level alpha-beta-gamma fits (predict/level_fit.h: stored ones, or fitted
// now from the sweeps) for the shapes it did not.
//
// The levels for a job of G ranks per node: intra from the one-node fit whose rank count is
// nearest G (ties: the larger), inter from the multi-node fit with the same G if there is one,
// else the nearest G, the most nodes first. A shape with measured curves uses them (the
// fastest candidate at each size); every other shape the levels.
//
// How sure (CommSource's spreads): at a measured shape, the median over its sizes of 1 MiB and
// more of each size's (p90 - p10) / 2 / median; elsewhere twice the larger RMS relative error
// of the fits used.
//
// A sweep across nodes with no one-node sweep of the same machine (a launch across nodes tunes
// only its own shape) is still fitted: its inter level with the node-local part taken as free,
// so that part's cost lands in the inter coefficients. Such a fit reproduces its own shape
// (within its rel_rms) and scales the node-local part as if it crossed the network elsewhere;
// intra_free says so, and the level used inside a node is then zero-cost.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "tuner/db/records.h"

#include "predict/level_fit.h"
#include "predict/predict.h"

namespace dltune::predict {

struct MachineComm {
  CommSource source;
  std::vector<LevelFit> fits;  // every fit known (stored, then made now)
  bool has_intra = false, has_inter = false;
  bool intra_free = false;  // no intra fit: the inter fit carries the node-local part
};

// `rows`: this machine's collective measurements (any shapes); `stored`: fits from the
// database. Never fails: what is missing shows in has_intra / has_inter.
MachineComm machine_comm(const std::vector<tuner::db::Measurement>& rows,
                         const std::vector<LevelFit>& stored, int per_node);

// Fits every shape in `rows` (intra from one-node sweeps, then inter with the intra fit of
// the nearest rank count, or with the node-local part free when there is none); shapes whose
// fit fails are left out.
std::vector<LevelFit> fit_all_levels(const std::vector<tuner::db::Measurement>& rows);

}  // namespace dltune::predict
