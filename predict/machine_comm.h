// This machine's allreduce costs for `dltune predict`, from what the tuner stored: the
// measured curves at every job shape it swept (tuner/cost_model.h's PiecewiseCost per
// candidate), and per-level alpha-beta-gamma fits (predict/level_fit.h: stored ones, or fitted
// now from the sweeps) for the shapes it did not.
//
// The levels for a job of G ranks per node: intra from the one-node fit whose rank count is
// nearest G (ties: the larger), inter from the multi-node fit with the same G if there is one,
// else the nearest G, the most nodes first. A shape with measured curves uses them (the
// fastest candidate at each size); every other shape the levels.
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
};

// `rows`: this machine's collective measurements (any shapes); `stored`: fits from the
// database. Never fails: what is missing shows in has_intra / has_inter.
MachineComm machine_comm(const std::vector<tuner::db::Measurement>& rows,
                         const std::vector<LevelFit>& stored, int per_node);

// Fits every shape in `rows` (intra from one-node sweeps, then inter with the intra fit of
// the nearest rank count); shapes whose fit fails are left out.
std::vector<LevelFit> fit_all_levels(const std::vector<tuner::db::Measurement>& rows);

}  // namespace dltune::predict
