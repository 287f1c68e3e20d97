// The run directory's fixed layout (DESIGN.md "The run directory"): the files `dltune launch`
// writes, and those its ranks write into, by name. launcher/flow/run_dir.h creates and reads a run
// directory; a rank given `dltune-worker train --run-dir DIR` writes its metrics, checkpoint,
// trace and summary at these places, so nothing but the directory crosses to the ranks.
//
//   <runs>/<recipe>-<UTC timestamp>/
//     recipe.yaml          the recipe as run (the overrides applied, data paths absolute)
//     plan.json            the Plan (recipes/plan.h) the ranks executed
//     launch.json          how it was launched: ranks, nodes, backend, the exact command
//     metrics.jsonl        rank 0's step / eval events (engine/train/metrics.h)
//     tb/                  the same as TensorBoard event files (engine/train/tensorboard.h)
//     checkpoints/         the training checkpoint (checkpoint.bin)
//     trace.json           Chrome trace of compute and communication per rank
//     worker_summary.json  rank 0's own summary of the training run
//     failures/rank-N.txt  rank N's error when it gave up waiting for a peer (a timeout: the
//                          sign of a hung rank), for the launch's restart row
//     summary.json         the outcome (DESIGN.md "Machine-readable outputs")
//     report.html          the self-contained report
#pragma once

#include <string>

namespace dltune::run_layout {

inline constexpr const char* kRecipe = "recipe.yaml";
inline constexpr const char* kPlan = "plan.json";
inline constexpr const char* kLaunch = "launch.json";
inline constexpr const char* kMetrics = "metrics.jsonl";
inline constexpr const char* kCheckpoint = "checkpoints/checkpoint.bin";
inline constexpr const char* kTrace = "trace.json";
inline constexpr const char* kWorkerSummary = "worker_summary.json";
inline constexpr const char* kFailures = "failures";
inline constexpr const char* kSummary = "summary.json";
inline constexpr const char* kReport = "report.html";

// `dir`/`name`.
inline std::string in(const std::string& dir, const char* name) { return dir + "/" + name; }

}  // namespace dltune::run_layout
