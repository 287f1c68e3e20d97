// Plan invariants, rule lookup and the default plan.
#include "recipes/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/strings.h"

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
  // A per-rank batch below 1 is validate_training's to name, not the micro-batches'.
  if (p.microbatches < 1 ||
      (plan.training.per_rank_batch >= 1 && p.microbatches > plan.training.per_rank_batch))
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
  if (t.precision != "fp32" && t.precision != "bf16")
    return invalid_input("training.precision: expected fp32 or bf16, got '" + t.precision + "'");
  return ok_status();
}

Status validate_placement(const Plan& plan) {
  if (plan.job.nodes < 1 || plan.job.ranks_per_node < 1)
    return invalid_input("job: nodes and ranks_per_node must be positive, got " +
                         std::to_string(plan.job.nodes) + " and " +
                         std::to_string(plan.job.ranks_per_node));
  if (plan.job.threads_per_rank < 1 || plan.job.threads_per_rank > 1024)
    return invalid_input("job.threads_per_rank: expected 1 to 1024, got " +
                         std::to_string(plan.job.threads_per_rank));
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

namespace {

Error implausible(const std::string& field, const std::string& got, const std::string& bound) {
  return invalid_input(field + ": " + got + " is not plausible (" + bound + ")");
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status plausible_training(const Plan& plan) {
  const TrainingPlan& t = plan.training;
  if (t.per_rank_batch > kMaxPlanPerRankBatch)
    return implausible("training.per_rank_batch", std::to_string(t.per_rank_batch),
                       "at most " + std::to_string(kMaxPlanPerRankBatch));
  if (t.global_batch > kMaxPlanGlobalBatch)
    return implausible("training.global_batch", std::to_string(t.global_batch),
                       "at most " + std::to_string(kMaxPlanGlobalBatch));
  const double lr_max = std::max(
      1.0, static_cast<double>(t.global_batch) / static_cast<double>(kMinLrReferenceBatch));
  if (!std::isfinite(t.lr_scale) || t.lr_scale > lr_max)
    return implausible("training.lr_scale", num(t.lr_scale),
                       "at most " + num(lr_max) + " at global batch " +
                           std::to_string(t.global_batch) +
                           ": a learning rate meant for at least " +
                           std::to_string(kMinLrReferenceBatch) + " samples, scaled linearly");
  if (t.warmup_steps > kMaxPlanWarmupSteps)
    return implausible("training.warmup_steps", std::to_string(t.warmup_steps),
                       "at most " + std::to_string(kMaxPlanWarmupSteps));
  if (t.bucket_bytes < kMinPlanBucketBytes || t.bucket_bytes > kMaxPlanBucketBytes)
    return implausible("training.bucket_bytes", strings::format_bytes(t.bucket_bytes),
                       "1 KiB to 4 GiB, as a recipe's comm.bucket");
  return ok_status();
}

Status plausible_placement(const Plan& plan) {
  for (size_t i = 0; i < plan.placement.size(); ++i) {
    const RankPlacement& p = plan.placement[i];
    const std::string at = "placement[" + std::to_string(i) + "]";
    if (p.cpus.size() > (size_t{1} << 16))
      return implausible(at + ".cpus", std::to_string(p.cpus.size()) + " CPUs", "at most 65536");
    for (int cpu : p.cpus)
      if (cpu >= (1 << 20)) return implausible(at + ".cpus", std::to_string(cpu), "below 2^20");
    if (p.gpu >= 4096) return implausible(at + ".gpu", std::to_string(p.gpu), "below 4096");
    if (p.nic.size() > 64)
      return implausible(at + ".nic", "a name of " + u64(p.nic.size()) + " bytes", "at most 64");
    for (char ch : p.nic)
      if (static_cast<unsigned char>(ch) < 0x21 || static_cast<unsigned char>(ch) > 0x7e)
        return invalid_input(at + ".nic: only printable characters without spaces");
  }
  return ok_status();
}

// The provenance: figures finite and non-negative, text bounded (parse_plan refuses control
// characters in it), the budget within what a recipe or --budget may give.
Status plausible_provenance(const Plan& plan) {
  const Provenance& pv = plan.provenance;
  for (const auto& [field, text] :
       {std::pair<const char*, const std::string*>{"provenance.reason", &pv.reason},
        {"provenance.recipe", &pv.recipe},
        {"provenance.budget.cut", &pv.budget_cut},
        {"parallel.reason", &plan.parallel.reason}}) {
    if (text->size() > kMaxPlanTextBytes)
      return implausible(field, u64(text->size()) + " bytes", "at most 4096");
  }
  for (double v :
       {pv.predicted_sps, pv.measured_sps, plan.parallel.predicted_sps, plan.parallel.measured_sps})
    if (!std::isfinite(v) || v < 0)
      return invalid_input("provenance: predicted_sps and measured_sps must be finite and >= 0");
  for (const auto& [field, v] : {std::pair<const char*, double>{"provenance.regret", pv.regret},
                                 {"provenance.collective_regret", pv.collective_regret}}) {
    if (!std::isfinite(v) || (v < 0 && v != -1))
      return implausible(field, num(v), "a share of at least 0, or unknown");
  }
  if (!(pv.budget_s >= 0) || pv.budget_s > kMaxTuneBudgetSeconds)
    return implausible("provenance.budget.budget_s", num(pv.budget_s),
                       "0 to " + num(kMaxTuneBudgetSeconds) + " seconds, as tune.budget");
  if (!(pv.tuning_s >= 0) || pv.tuning_s > 10 * kMaxTuneBudgetSeconds)
    return implausible("provenance.budget.tuning_s", num(pv.tuning_s),
                       "a non-negative number of seconds");
  if (pv.confidence) {
    const Confidence& c = *pv.confidence;
    if (c.rival.size() > kMaxPlanTextBytes)
      return implausible("provenance.confidence.rival", u64(c.rival.size()) + " bytes",
                         "at most 4096");
    for (double v : {c.ratio, c.lo, c.hi})
      if (!std::isfinite(v) || v < 0)
        return invalid_input(
            "provenance.confidence: ratio, lo and hi must be finite and non-negative");
    if (c.hi > 0 && c.lo > c.hi)
      return implausible("provenance.confidence.lo", num(c.lo), "at most hi, " + num(c.hi));
    if (c.rounds < 0 || c.rounds > 1000000)
      return implausible("provenance.confidence.rounds", std::to_string(c.rounds), "0 to 1000000");
  }
  return ok_status();
}

}  // namespace

Status check_plan_plausible(const Plan& plan) {
  if (plan.job.nodes > 100000 || plan.job.ranks_per_node > 4096)
    return implausible(
        "job", std::to_string(plan.job.nodes) + "x" + std::to_string(plan.job.ranks_per_node),
        "at most 100000 nodes of 4096 ranks");
  DLTUNE_TRY(plausible_training(plan));
  for (const auto& [c, ranges] : plan.collectives) {
    const std::string name = "collectives." + std::string(collective_name(c));
    if (ranges.size() > kMaxPlanRanges)
      return implausible(name, std::to_string(ranges.size()) + " ranges", "at most 64");
    for (size_t i = 0; i < ranges.size(); ++i)
      if (ranges[i].segment_bytes > kMaxPlanBucketBytes)
        return implausible(name + "[" + std::to_string(i) + "].segment_bytes",
                           u64(ranges[i].segment_bytes), "at most 4 GiB");
  }
  DLTUNE_TRY(plausible_placement(plan));
  return plausible_provenance(plan);
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
