// The Plan: the tuner's decisions for one job, which ranks execute without re-deciding
// (DESIGN.md). Plain data; JSON when it crosses a process boundary (the database stores it,
// the launcher hands it to the ranks). The JSON shape is agreed with tuner/db:
//
// {
//   "version": 1,
//   "collectives": {
//     "allreduce": [ {"min_bytes": 0, "max_bytes": 4096, "algo": "rd", "segment_bytes": 0},
//                    ("algo": any of common/collectives.h's names, NCCL's with an optional
//                     protocol: "nccl_ring_ll128")
//                    {"min_bytes": 4096, "max_bytes": 18446744073709551615, "algo": "ring",
//                     "segment_bytes": 1048576} ],
//     "broadcast": [ ... same shape ... ] },
//   "training": {"per_rank_batch": 64, "global_batch": 128, "scaling": "weak" | "strong",
//                "lr_scale": 2.0, "warmup_steps": 100, "bucket_bytes": 4194304,
//                "overlap": true, "precision": "fp32" | "bf16",
//                "kernels": {"conv1": "onednn", ...}},   (both optional: fp32, none)
//   "placement": [ {"local_rank": 0, "cpus": [0], "gpu": -1, "nic": ""} ],
//   "job": {"nodes": 1, "ranks_per_node": 2, "threads_per_rank": 18},  (threads optional: 1)
//   "parallel": {"replicas": 2, "stages": 1, "partition": [], "microbatches": 1,
//                "schedule": "1f1b", "recompute": "none", "reason": "...",
//                "memory_bytes": 0, "predicted_sps": 0, "measured_sps": 0},
//   "provenance": {"source": "tuned" | "cache" | "default", "reason": "...",
//                  "predicted_sps": 0.0, "measured_sps": 0.0,
//                  optional: "recipe": "quickstart",
//                  "confidence": {"rival": "b128 ...", "ratio": 1.12, "lo": 1.05, "hi": 1.19,
//                                 "rounds": 12, "significant": true},  (hi null: unknown)
//                  "regret": 0.02, "collective_regret": 0.0,
//                  "budget": {"budget_s": 20, "tuning_s": 19.1, "cut": "..."}}
// }
//
// Size ranges are half-open [min_bytes, max_bytes), sorted, contiguous, and cover every size:
// the first starts at 0 and the last ends at kPlanMaxBytes (2^64-1).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "recipes/enums.h"

namespace dltune::recipes {

inline constexpr int kPlanVersion = 1;
inline constexpr uint64_t kPlanMaxBytes = UINT64_MAX;

// One rule: messages of [min_bytes, max_bytes) bytes use `algo` (with NCCL's `protocol` for an
// NCCL algorithm: its JSON "algo" is then "nccl_ring_ll128"), pipelined in segments of
// segment_bytes (0 = unsegmented).
struct SizeRange {
  uint64_t min_bytes = 0;
  uint64_t max_bytes = kPlanMaxBytes;
  Algorithm algo = Algorithm::kRing;
  uint64_t segment_bytes = 0;
  NcclProtocol protocol = NcclProtocol::kAny;
  bool operator==(const SizeRange&) const = default;
};

struct TrainingPlan {
  // Samples per step of one replica (parallel.replicas; under data parallelism every rank is a
  // replica, so this is the per-rank batch).
  int64_t per_rank_batch = 1;
  int64_t global_batch = 1;          // = per_rank_batch x parallel.replicas
  Scaling scaling = Scaling::kWeak;  // kWeak or kStrong (never kAuto in a plan)
  double lr_scale = 1.0;             // multiplies the recipe's lr (linear scaling rule)
  int64_t warmup_steps = 0;
  uint64_t bucket_bytes = 4u << 20;  // gradient bucket (tensor fusion) size, > 0
  bool overlap = true;               // allreduce overlapped with backward
  // How the engine computes (engine issue 38): "fp32" or "bf16" (fp32 master weights), and a
  // kernel per node name where one was chosen (Op::kernels(); the others run their default).
  std::string precision = "fp32";
  std::map<std::string, std::string> kernels;
  bool operator==(const TrainingPlan&) const = default;
};

// Whether `a` and `b` differ at most in their communication settings (bucket size, overlap):
// they then train the same model the same way. The recipe tuner's trials share one trainer
// among such candidates (engine/worker/trial.cc) and size their memory by it (tuner/).
bool trains_alike(const TrainingPlan& a, const TrainingPlan& b);

// Where one local rank runs: its cores, GPU (-1 none) and NIC ("" none/default).
struct RankPlacement {
  int local_rank = 0;
  std::vector<int> cpus;
  int gpu = -1;
  std::string nic;
  bool operator==(const RankPlacement&) const = default;
};

struct JobShape {
  int nodes = 1;
  int ranks_per_node = 1;
  int threads_per_rank = 1;  // the engine's threads in each rank (its binding's cores)
  bool operator==(const JobShape&) const = default;
};

// How the model is laid over the ranks (HyPar-Flow, AxoNN): R replicas of a pipeline of S
// stages, R x S = every rank of the job. Rank r runs stage r % S of replica r / S: the ranks of
// one pipeline are neighbours (their activations cross most often). Stage s runs the nodes from
// partition[s] (a node name of the model graph) up to the next stage's first node; partition[0]
// is the graph's first node. A replica's share of the global batch runs as `microbatches`
// micro-batches under `schedule`; with recompute kStage a stage keeps only its inputs per
// micro-batch and runs its forward again before the backward; with offload kOptimizer (GPU
// engine) the optimizer state lives in pinned host memory and streams through the device for
// each update. Plain data parallelism is R = ranks, S = 1.
enum class PipelineSchedule { kGpipe, kOneFOneB, kAsync };
std::string_view schedule_name(PipelineSchedule s);  // "gpipe", "1f1b", "async"
std::optional<PipelineSchedule> parse_schedule(std::string_view s);
enum class Recompute { kNone, kStage };
std::string_view recompute_name(Recompute r);  // "none", "stage"
std::optional<Recompute> parse_recompute(std::string_view s);
enum class Offload { kNone, kOptimizer };
std::string_view offload_name(Offload o);  // "none", "optimizer"
std::optional<Offload> parse_offload(std::string_view s);

struct ParallelLayout {
  int replicas = 1;
  int stages = 1;
  std::vector<std::string> partition;  // one first-node name per stage; empty when S = 1
  int microbatches = 1;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  Recompute recompute = Recompute::kNone;
  Offload offload = Offload::kNone;
  // What the tuner knew: why this layout, the memory model's bytes per rank, the throughput it
  // predicted and the one its trials measured (0 = not measured).
  std::string reason;
  int64_t memory_bytes = 0;
  double predicted_sps = 0, measured_sps = 0;
  bool operator==(const ParallelLayout&) const = default;
  bool pipelined() const { return stages > 1; }
};

// Whether `a` and `b` run the same way: the same replicas, stages, cuts, micro-batches, schedule
// recomputation and offload (what the tuner knew about them, reason to measured_sps, may differ).
bool same_layout(const ParallelLayout& a, const ParallelLayout& b);

enum class PlanSource { kTuned, kCache, kDefault };
std::string_view plan_source_name(PlanSource s);  // "tuned", "cache", "default"

// How sure the tuner is of its measured choice: the winner against its closest rival, as the
// ratio of their throughputs over the rounds both ran (> 1: the winner was faster) and the ~95 %
// interval of that ratio (common/stats.h paired_rate_ratio); hi 0 when fewer rounds than an
// interval needs were run.
struct Confidence {
  std::string rival;
  double ratio = 0, lo = 0, hi = 0;
  int rounds = 0;
  bool significant = false;  // the interval excludes 1
  bool operator==(const Confidence&) const = default;
};

struct Provenance {
  PlanSource source = PlanSource::kDefault;
  std::string reason;        // why this plan: "ring beat rd by 1.4x above 64 KiB", "site db x"
  double predicted_sps = 0;  // samples/s the cost model predicted
  double measured_sps = 0;   // samples/s measured in trials (0 = not measured)
  // The fields below are optional in the JSON (absent = their defaults here).
  std::string recipe;  // the recipe's name when the plan was tuned ("" none): db show names it
  std::optional<Confidence> confidence;  // of the training choices, when trials measured them
  // Estimated share of throughput (training) or allreduce time (collectives) an exhaustive
  // search would have gained over this plan: 0.03 = 3 %; < 0 unknown.
  double regret = -1;
  double collective_regret = -1;
  double budget_s = 0;     // tune.budget when it was tuned (0 = not recorded)
  double tuning_s = 0;     // the seconds tuning took
  std::string budget_cut;  // what the budget cut ("" nothing): "5 of 12 candidates not measured"
  // The steps of the run it was tuned for, at its global batch (0 = not recorded): the run's
  // length is not in the tuning key (recipe_signature), so a launch of another length reuses
  // the plan and says so.
  int64_t run_steps = 0;
  // The recipe's learning rate its trials trained with (0 = not recorded): the rate is not in the
  // tuning key either; a launch with another rate reuses the plan only where none of its trials
  // scaled the rate (their divergence checks are what depends on it), and says so.
  double tuned_lr = 0;
  bool operator==(const Provenance&) const = default;
};

struct Plan {
  int version = kPlanVersion;
  // Per collective, its size rules. A collective without rules is left to the default.
  std::map<Collective, std::vector<SizeRange>> collectives;
  TrainingPlan training;
  std::vector<RankPlacement> placement;  // empty, or one entry per local rank 0..rpn-1
  JobShape job;
  // The layout; a plan without one (older plans) is data parallel over every rank.
  ParallelLayout parallel;
  Provenance provenance;
  bool operator==(const Plan&) const = default;

  // Sets the job shape; a data-parallel layout (one stage) follows it (every rank a replica).
  void set_job(JobShape shape) {
    job = shape;
    if (parallel.stages == 1) parallel.replicas = shape.nodes * shape.ranks_per_node;
  }
  // The rule for a `bytes`-byte message of collective `c`; nullopt when the plan has no rules
  // for `c`. On a validated plan every size has exactly one rule.
  std::optional<SizeRange> algorithm_for(Collective c, uint64_t bytes) const;
};

// Checks every invariant above. Error (invalid_input) names the field and what is allowed:
// "collectives.allreduce[1]: min_bytes 5000 must equal the previous range's max_bytes 4096
// (ranges are sorted and contiguous)".
Status validate_plan(const Plan& plan);

// Bounds no sensible plan exceeds, whatever its recipe: what a plan from outside (a bundle, a
// database someone else wrote) must stay within before anything runs it.
inline constexpr int64_t kMaxPlanPerRankBatch = int64_t{1} << 20;
inline constexpr int64_t kMaxPlanGlobalBatch = int64_t{1} << 30;
inline constexpr int64_t kMaxPlanRanks = int64_t{1} << 20;
inline constexpr int64_t kMaxPlanWarmupSteps = 10000000;
// A gradient bucket holds at least 1 KiB (the recipe's comm.bucket minimum) and at most 4 GiB
// (1,000 times what data-parallel frameworks default to); the same bounds hold for a recipe's
// comm.bucket, and the tuner's one-bucket candidate stays within them.
inline constexpr uint64_t kMinPlanBucketBytes = 1024;
inline constexpr uint64_t kMaxPlanBucketBytes = uint64_t{4} << 30;
inline constexpr size_t kMaxPlanRanges = 64;
// The smallest batch a learning rate may be meant for (lr_reference_batch): linear scaling
// never multiplies the lr by more than global batch / 2 (lr_scale_for caps it there), so a
// plan's lr_scale is at most max(1, global_batch / kMinLrReferenceBatch).
inline constexpr int64_t kMinLrReferenceBatch = 2;
// The longest text a plan's free-text fields hold (reasons, the budget cut, the rival).
inline constexpr size_t kMaxPlanTextBytes = 4096;

// Ok when `plan` (valid per validate_plan) stays within the bounds above: job of at most
// kMaxPlanRanks ranks (nodes <= 100000, ranks per node <= 4096); per-rank batch <= 2^20 and
// global batch <= 2^30; lr_scale finite and at most max(1, global batch / kMinLrReferenceBatch);
// warm-up <= 10^7 steps; bucket in [1 KiB, 4 GiB]; at most 64 size ranges per collective with
// segments no larger than the bucket bound; placement CPUs < 2^20 (at most 2^16 per rank), GPU
// index < 4096, NIC names of at most 64 printable bytes; free text of at most 4096 bytes
// (parse_plan refuses control characters in it); finite, non-negative figures: throughputs,
// regrets (-1: unknown), the budget (at most kMaxTuneBudgetSeconds) and the seconds tuning took,
// the confidence's ratio and interval (lo <= hi when hi is known). invalid_input naming the
// field and the bound otherwise. What a plan must be for a given recipe is plan_fit.h's
// check_plan_for_recipe.
Status check_plan_plausible(const Plan& plan);

// The JSON above. Never fails (a plan that does not validate still serialises).
nlohmann::json plan_to_json(const Plan& plan);
// Reads and validates. Errors (invalid_input): a missing or mistyped field, an unknown key, an
// unsupported version, an unknown algorithm, ranges that overlap, leave gaps or are unsorted.
Result<Plan> plan_from_json(const nlohmann::json& j);
// plan_to_json(plan).dump(2).
std::string serialize_plan(const Plan& plan);
// Parses JSON text then plan_from_json(). Bad JSON: "not valid JSON: <parser message>".
Result<Plan> parse_plan(std::string_view text);

// A plan that covers every size with one algorithm and no segmenting, for `nodes` x
// `ranks_per_node` ranks and weak scaling at `per_rank_batch`: the "default" provenance.
Plan default_plan(int nodes, int ranks_per_node, int64_t per_rank_batch, Algorithm algo);

}  // namespace dltune::recipes
