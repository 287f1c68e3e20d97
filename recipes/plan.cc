// Plan invariants, rule lookup and the default plan.
#include "recipes/plan.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace dltune::recipes {
namespace {

std::string u64(uint64_t v) { return std::to_string(v); }

Status validate_ranges(Collective c, const std::vector<SizeRange>& ranges) {
  const std::string name = "collectives." + std::string(collective_name(c));
  if (ranges.empty())
    return invalid_input(name + ": has no size ranges; give at least one covering 0 to " +
                         u64(kPlanMaxBytes) + " or leave the collective out");
  for (size_t i = 0; i < ranges.size(); ++i) {
    const SizeRange& r = ranges[i];
    const std::string at = name + "[" + std::to_string(i) + "]";
    if (r.min_bytes >= r.max_bytes)
      return invalid_input(at + ": min_bytes " + u64(r.min_bytes) + " must be below max_bytes " +
                           u64(r.max_bytes) + " (ranges are half-open [min, max))");
    if (i == 0 && r.min_bytes != 0)
      return invalid_input(at + ": the first range must start at min_bytes 0, got " +
                           u64(r.min_bytes));
    if (i > 0 && r.min_bytes != ranges[i - 1].max_bytes)
      return invalid_input(
          at + ": min_bytes " + u64(r.min_bytes) + " must equal the previous range's max_bytes " +
          u64(ranges[i - 1].max_bytes) +
          (r.min_bytes < ranges[i - 1].max_bytes ? " (ranges overlap)" : " (ranges leave a gap)") +
          "; ranges are sorted and contiguous");
  }
  if (ranges.back().max_bytes != kPlanMaxBytes)
    return invalid_input(name + "[" + std::to_string(ranges.size() - 1) +
                         "]: the last range must end at max_bytes " + u64(kPlanMaxBytes) +
                         " so that every size has a rule, got " + u64(ranges.back().max_bytes));
  return ok_status();
}

Status validate_parallel(const Plan& plan) {
  const ParallelLayout& p = plan.parallel;
  const int64_t ranks = static_cast<int64_t>(plan.job.nodes) * plan.job.ranks_per_node;
  if (p.replicas < 1 || p.stages < 1 || int64_t{p.replicas} * p.stages != ranks)
    return invalid_input("parallel: replicas " + std::to_string(p.replicas) + " x stages " +
                         std::to_string(p.stages) + " must equal the job's " +
                         std::to_string(ranks) + " ranks");
  if (p.stages == 1 && !p.partition.empty())
    return invalid_input("parallel.partition: a single stage has no partition");
  if (p.stages > 1 && p.partition.size() != static_cast<size_t>(p.stages))
    return invalid_input("parallel.partition: " + std::to_string(p.partition.size()) +
                         " first nodes for " + std::to_string(p.stages) +
                         " stages; give one per stage");
  if (p.microbatches < 1 || p.microbatches > plan.training.per_rank_batch)
    return invalid_input("parallel.microbatches: " + std::to_string(p.microbatches) +
                         " must be in 1..per_rank_batch (" +
                         std::to_string(plan.training.per_rank_batch) + ")");
  if (p.memory_bytes < 0) return invalid_input("parallel.memory_bytes: must be non-negative");
  return ok_status();
}

Status validate_training(const Plan& plan) {
  const TrainingPlan& t = plan.training;
  const int64_t replicas = plan.parallel.replicas;
  if (t.per_rank_batch < 1)
    return invalid_input("training.per_rank_batch: expected a positive integer, got " +
                         std::to_string(t.per_rank_batch));
  int64_t product = 0;  // per_rank_batch comes from outside: no wrapping around
  if (__builtin_mul_overflow(t.per_rank_batch, replicas, &product) || t.global_batch != product)
    return invalid_input("training.global_batch: " + std::to_string(t.global_batch) +
                         " must equal per_rank_batch " + std::to_string(t.per_rank_batch) + " x " +
                         std::to_string(replicas) +
                         (plan.parallel.stages > 1 ? " replicas (parallel.replicas)"
                                                   : " ranks (job.nodes x ranks_per_node)"));
  if (t.scaling == Scaling::kAuto)
    return invalid_input("training.scaling: expected weak or strong, got auto");
  if (!(t.lr_scale > 0))
    return invalid_input("training.lr_scale: expected a number greater than 0");
  if (t.warmup_steps < 0)
    return invalid_input("training.warmup_steps: expected a non-negative integer");
  if (t.bucket_bytes == 0) return invalid_input("training.bucket_bytes: expected at least 1");
  return ok_status();
}

Status validate_placement(const Plan& plan) {
  if (plan.job.nodes < 1 || plan.job.ranks_per_node < 1)
    return invalid_input("job: nodes and ranks_per_node must be positive, got " +
                         std::to_string(plan.job.nodes) + " and " +
                         std::to_string(plan.job.ranks_per_node));
  if (plan.placement.empty()) return ok_status();
  if (plan.placement.size() != static_cast<size_t>(plan.job.ranks_per_node))
    return invalid_input("placement: has " + std::to_string(plan.placement.size()) +
                         " entries but job.ranks_per_node is " +
                         std::to_string(plan.job.ranks_per_node) + "; give one per local rank");
  std::set<int> seen;
  for (size_t i = 0; i < plan.placement.size(); ++i) {
    const RankPlacement& p = plan.placement[i];
    const std::string at = "placement[" + std::to_string(i) + "]";
    if (p.local_rank < 0 || p.local_rank >= plan.job.ranks_per_node ||
        !seen.insert(p.local_rank).second)
      return invalid_input(at + ".local_rank: " + std::to_string(p.local_rank) +
                           " must be unique and in 0.." +
                           std::to_string(plan.job.ranks_per_node - 1));
    for (int cpu : p.cpus)
      if (cpu < 0) return invalid_input(at + ".cpus: negative CPU index " + std::to_string(cpu));
    if (p.gpu < -1)
      return invalid_input(at + ".gpu: expected a GPU index or -1, got " + std::to_string(p.gpu));
  }
  return ok_status();
}

}  // namespace

bool trains_alike(const TrainingPlan& a, const TrainingPlan& b) {
  TrainingPlan x = a;
  x.bucket_bytes = b.bucket_bytes;
  x.overlap = b.overlap;
  return x == b;
}

bool same_layout(const ParallelLayout& a, const ParallelLayout& b) {
  return a.replicas == b.replicas && a.stages == b.stages && a.partition == b.partition &&
         a.microbatches == b.microbatches && a.schedule == b.schedule &&
         a.recompute == b.recompute && a.offload == b.offload;
}

std::string_view schedule_name(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGpipe:
      return "gpipe";
    case PipelineSchedule::kOneFOneB:
      return "1f1b";
    case PipelineSchedule::kAsync:
      return "async";
  }
  return "?";
}

std::optional<PipelineSchedule> parse_schedule(std::string_view s) {
  for (auto k : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB, PipelineSchedule::kAsync})
    if (schedule_name(k) == s) return k;
  return std::nullopt;
}

std::string_view recompute_name(Recompute r) { return r == Recompute::kStage ? "stage" : "none"; }

std::string_view offload_name(Offload o) { return o == Offload::kOptimizer ? "optimizer" : "none"; }

std::optional<Offload> parse_offload(std::string_view s) {
  if (s == "none") return Offload::kNone;
  if (s == "optimizer") return Offload::kOptimizer;
  return std::nullopt;
}

std::optional<Recompute> parse_recompute(std::string_view s) {
  if (s == "none") return Recompute::kNone;
  if (s == "stage") return Recompute::kStage;
  return std::nullopt;
}

std::string_view plan_source_name(PlanSource s) {
  switch (s) {
    case PlanSource::kTuned:
      return "tuned";
    case PlanSource::kCache:
      return "cache";
    case PlanSource::kDefault:
      return "default";
  }
  return "?";
}

std::optional<SizeRange> Plan::algorithm_for(Collective c, uint64_t bytes) const {
  auto it = collectives.find(c);
  if (it == collectives.end()) return std::nullopt;
  for (const SizeRange& r : it->second)
    if (bytes >= r.min_bytes && bytes < r.max_bytes) return r;
  // kPlanMaxBytes itself: the half-open last range excludes it; it belongs to the last rule.
  if (!it->second.empty() && bytes == kPlanMaxBytes && it->second.back().max_bytes == bytes)
    return it->second.back();
  return std::nullopt;
}

Status validate_plan(const Plan& plan) {
  if (plan.version != kPlanVersion)
    return invalid_input("version: this dltune reads plan version " + std::to_string(kPlanVersion) +
                         ", got " + std::to_string(plan.version));
  for (const auto& [c, ranges] : plan.collectives) DLTUNE_TRY(validate_ranges(c, ranges));
  DLTUNE_TRY(validate_placement(plan));
  DLTUNE_TRY(validate_parallel(plan));
  DLTUNE_TRY(validate_training(plan));
  return ok_status();
}

Status check_plan_plausible(const Plan& plan) {
  const auto beyond = [](const std::string& field, const std::string& got,
                         const std::string& bound) {
    return invalid_input(field + ": " + got + " is not plausible (" + bound + ")");
  };
  if (plan.job.nodes > 100000 || plan.job.ranks_per_node > 4096)
    return beyond("job",
                  std::to_string(plan.job.nodes) + "x" + std::to_string(plan.job.ranks_per_node),
                  "at most 100000 nodes of 4096 ranks");
  const TrainingPlan& t = plan.training;
  if (t.per_rank_batch > kMaxPlanPerRankBatch)
    return beyond("training.per_rank_batch", std::to_string(t.per_rank_batch),
                  "at most " + std::to_string(kMaxPlanPerRankBatch));
  if (t.global_batch > kMaxPlanGlobalBatch)
    return beyond("training.global_batch", std::to_string(t.global_batch),
                  "at most " + std::to_string(kMaxPlanGlobalBatch));
  if (!std::isfinite(t.lr_scale) ||
      t.lr_scale > static_cast<double>(std::max<int64_t>(1, t.global_batch)))
    return beyond("training.lr_scale", std::to_string(t.lr_scale),
                  "a finite factor no larger than the global batch");
  if (t.warmup_steps > kMaxPlanWarmupSteps)
    return beyond("training.warmup_steps", std::to_string(t.warmup_steps),
                  "at most " + std::to_string(kMaxPlanWarmupSteps));
  if (t.bucket_bytes > kMaxPlanBucketBytes)
    return beyond("training.bucket_bytes", u64(t.bucket_bytes), "at most 16 GiB");
  for (const auto& [c, ranges] : plan.collectives) {
    const std::string name = "collectives." + std::string(collective_name(c));
    if (ranges.size() > kMaxPlanRanges)
      return beyond(name, std::to_string(ranges.size()) + " ranges", "at most 64");
    for (size_t i = 0; i < ranges.size(); ++i)
      if (ranges[i].segment_bytes > kMaxPlanBucketBytes)
        return beyond(name + "[" + std::to_string(i) + "].segment_bytes",
                      u64(ranges[i].segment_bytes), "at most 16 GiB");
  }
  for (size_t i = 0; i < plan.placement.size(); ++i) {
    const RankPlacement& p = plan.placement[i];
    const std::string at = "placement[" + std::to_string(i) + "]";
    if (p.cpus.size() > (size_t{1} << 16))
      return beyond(at + ".cpus", std::to_string(p.cpus.size()) + " CPUs", "at most 65536");
    for (int cpu : p.cpus)
      if (cpu >= (1 << 20)) return beyond(at + ".cpus", std::to_string(cpu), "below 2^20");
    if (p.gpu >= 4096) return beyond(at + ".gpu", std::to_string(p.gpu), "below 4096");
    if (p.nic.size() > 64)
      return beyond(at + ".nic", "a name of " + u64(p.nic.size()) + " bytes", "at most 64");
    for (char ch : p.nic)
      if (static_cast<unsigned char>(ch) < 0x21 || static_cast<unsigned char>(ch) > 0x7e)
        return invalid_input(at + ".nic: only printable characters without spaces");
  }
  const Provenance& pv = plan.provenance;
  if (pv.reason.size() > 4096)
    return beyond("provenance.reason", u64(pv.reason.size()) + " bytes", "at most 4096");
  for (double v : {pv.predicted_sps, pv.measured_sps})
    if (!std::isfinite(v) || v < 0)
      return invalid_input("provenance: predicted_sps and measured_sps must be finite and >= 0");
  return ok_status();
}

Plan default_plan(int nodes, int ranks_per_node, int64_t per_rank_batch, Algorithm algo) {
  Plan plan;
  plan.collectives[Collective::kAllreduce] = {SizeRange{0, kPlanMaxBytes, algo, 0}};
  plan.set_job({nodes, ranks_per_node});
  plan.training.per_rank_batch = per_rank_batch;
  plan.training.global_batch = per_rank_batch * nodes * ranks_per_node;
  plan.training.scaling = Scaling::kWeak;
  plan.provenance.source = PlanSource::kDefault;
  plan.provenance.reason = "no tuning: one algorithm for every size";
  return plan;
}

}  // namespace dltune::recipes
