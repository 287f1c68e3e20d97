// Steps 4-5 of `dltune launch`: following rank 0's metrics while the job runs, and turning the
// run directory's files into summary.json, report.html and the summary a person reads.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/progress.h"
#include "common/result.h"
#include "launcher/launch_plan.h"
#include "launcher/launch_prediction.h"
#include "launcher/run_dir.h"
#include "recipes/recipe.h"

namespace dltune::launcher {

// Tails a metrics.jsonl file (engine/metrics.h) on a thread and feeds the progress display
// until stop(). Lines that are not complete or not JSON are skipped.
class MetricsFollower {
 public:
  MetricsFollower(std::string path, long total_steps, Progress* progress);
  ~MetricsFollower();  // stops
  MetricsFollower(const MetricsFollower&) = delete;
  MetricsFollower& operator=(const MetricsFollower&) = delete;
  void stop();

 private:
  void loop();
  std::string path_;
  long total_;
  Progress* progress_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Everything the summary is made of.
struct RunFacts {
  std::string recipe;
  int ranks = 1, nodes = 1;
  std::string backend;
  int cores_per_node = 0;  // usable cores of this node (0 = unknown)
  std::string binding;     // launch.binding: none, core, numa, auto
  PlanChoice choice;
  nlohmann::json worker;       // rank 0's worker summary (dltune-worker train --summary)
  double baseline_sps = 0;     // the same per-rank batch on one rank (0 = not measured)
  int64_t baseline_steps = 0;  // its length, its interval and its binding (launch_job.h)
  double baseline_rel_ci = 0;
  std::string baseline_bind;
  std::string baseline_error;   // why it was not measured ("" when it was or was not tried)
  double wall_seconds = 0;      // the whole launch
  uint64_t gradient_bytes = 0;  // bytes allreduced per step
  double copy_gbs = 0;          // single-core copy bandwidth at a bucket's size, for the bound
  LaunchPrediction prediction;  // what the models said before the run (launch_prediction.h)
  std::string resumed_from;     // checkpoint a resumed run started from ("" none)
  // Text data: the unigram entropy of the file in bits per byte (what a model that learned
  // only byte frequencies reaches); < 0 for other data.
  double unigram_entropy_bits = -1;
};

// The step and eval events of metrics.jsonl; a step that appears twice (a resumed run redoes
// the steps after its checkpoint) keeps its last occurrence.
struct MetricsLog {
  std::vector<nlohmann::json> steps, evals;
};
MetricsLog read_metrics(const std::string& path);

// summary.json (DESIGN.md "Machine-readable outputs"): recipe, ranks, nodes, steps,
// throughput_sps, scaling_efficiency, final_loss, heldout_accuracy, heldout_loss (per
// prediction, nats; text data also heldout_bits_per_byte and unigram_entropy_bits), plan_source,
// plan, tuning_seconds, wall_seconds, plus the step-time split, the allreduce bound, the database,
// "ranks_shared_cores" (more ranks per node than cores: ranks time-shared cores), and
// "warnings": what the user should not miss although the job succeeded (the 1-rank baseline
// failed, or its interval stayed wider than kBaselineRelCi; ranks shared cores; the loss of a run
// of >= kNoLearningMinSteps steps ended at or above kNoLearningLossShare of its first logged
// loss: the model did not learn).
inline constexpr int kNoLearningMinSteps = 100;
inline constexpr double kNoLearningLossShare = 0.95;
nlohmann::json make_summary(const RunFacts& facts, const MetricsLog& log, const RunDir& dir);

// The readable summary printed at the end.
std::string format_summary(const nlohmann::json& summary);

// Writes report.html for the run.
Status write_report(const RunFacts& facts, const MetricsLog& log, const nlohmann::json& summary,
                    const RunDir& dir);

// Measures a single-core memcpy bandwidth (GB/s) over `bytes` (best of a few copies).
double measure_copy_gbs(uint64_t bytes);

}  // namespace dltune::launcher
