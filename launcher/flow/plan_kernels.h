// Each layer's kernel for a tuned plan, chosen by measurement (issue 38), as cuDNN's benchmark
// mode chooses on GPUs: `dltune-worker profile --kernels` times every node's candidate kernels
// (the engine's own and oneDNN's, engine/graph/kernel_select.h) at the plan's per-rank batch,
// on the rank's threads, in the plan's precision, on this machine. The choices go into the
// plan (training.kernels), so the tuning database keeps them with the plan, under this CPU's
// fingerprint (the plan's key), bundles carry them, and a cached plan reuses them unmeasured.
//
// Only data-parallel CPU plans are measured: a GPU rank's ops have one kernel each, and a
// pipeline's whole model need not fit one process. The measurement is bounded by a time limit
// (largest nodes first; the rest keep the engine's defaults) and never fails a launch: a
// failure leaves the plan on the defaults and says why.
#pragma once

#include <map>
#include <string>

#include "recipes/plan.h"

namespace dltune::launcher {

// Measures `plan`'s kernels with the worker at `worker` (its path) for the recipe at
// `recipe_path`, within `seconds`, and sets plan->training.kernels to the measured choices.
// Returns one line for the user, e.g. "kernels chosen by measurement in 1.2 s: onednn for 9
// nodes, blas for 3 (`dltune model show RECIPE --kernels` times them again)", or why none
// were measured ("" for a plan that is not measured: GPU, pipeline).
std::string choose_plan_kernels(const std::string& worker, const std::string& recipe_path,
                                recipes::Plan* plan, double seconds);

// The summary's words for a plan's kernels, e.g. "onednn for 9 nodes, blas for 3 (chosen by
// measurement)"; "" when the plan names none (the engine's defaults).
std::string kernels_text(const std::map<std::string, std::string>& kernels);

}  // namespace dltune::launcher
