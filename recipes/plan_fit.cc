#include "recipes/plan_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "recipes/datasets.h"

namespace dltune::recipes {
namespace {

template <typename T>
void set(std::vector<std::string>* notes, const char* field, T* target, T wanted,
         const std::string& shown_wanted, const std::string& shown_had) {
  if (*target == wanted) return;
  notes->push_back(std::string("training.") + field + ": the recipe fixes " + shown_wanted +
                   ", the plan had " + shown_had);
  *target = wanted;
}

}  // namespace

int64_t scaled_lr_warmup(const Recipe& recipe, int64_t run_steps, double lr_scale) {
  const int64_t warmup = recipe.training.schedule.warmup_steps;
  if (!(lr_scale > 1.0)) return warmup;
  const int64_t steps = std::max<int64_t>(1, run_steps);
  return std::max<int64_t>({warmup, (steps + 19) / 20, 1});
}

std::vector<std::string> apply_fixed_settings(const Recipe& recipe, int64_t ranks, Plan* plan) {
  std::vector<std::string> notes;
  TrainingPlan& t = plan->training;
  const TrainingConfig& r = recipe.training;
  ranks = std::max<int64_t>(1, ranks);
  // A pipeline's batch is per replica (the ranks of one replica share its samples).
  if (plan->parallel.pipelined()) ranks = std::max(1, plan->parallel.replicas);
  if (r.per_rank_batch > 0) {
    set(&notes, "per_rank_batch", &t.per_rank_batch, r.per_rank_batch,
        std::to_string(r.per_rank_batch), std::to_string(t.per_rank_batch));
    t.global_batch = t.per_rank_batch * ranks;
    set(&notes, "scaling", &t.scaling, Scaling::kWeak, "weak",
        std::string(scaling_name(t.scaling)));
  } else if (r.global_batch > 0) {
    set(&notes, "global_batch", &t.global_batch, r.global_batch, std::to_string(r.global_batch),
        std::to_string(t.global_batch));
    t.per_rank_batch = std::max<int64_t>(1, r.global_batch / ranks);
    set(&notes, "scaling", &t.scaling, Scaling::kStrong, "strong",
        std::string(scaling_name(t.scaling)));
  } else if (r.scaling != Scaling::kAuto) {
    set(&notes, "scaling", &t.scaling, r.scaling, std::string(scaling_name(r.scaling)),
        std::string(scaling_name(t.scaling)));
  }
  if (t.warmup_steps < r.schedule.warmup_steps) {
    set(&notes, "warmup_steps", &t.warmup_steps, r.schedule.warmup_steps,
        "at least " + std::to_string(r.schedule.warmup_steps), std::to_string(t.warmup_steps));
  }
  const CommConfig& c = recipe.comm;
  if (r.precision != "auto") {
    set(&notes, "precision", &t.precision, r.precision, r.precision, t.precision);
  }
  if (c.bucket_bytes > 0) {
    set(&notes, "bucket_bytes", &t.bucket_bytes, c.bucket_bytes, std::to_string(c.bucket_bytes),
        std::to_string(t.bucket_bytes));
  }
  if (c.overlap != Overlap::kAuto) {
    const bool on = c.overlap == Overlap::kOn;
    set(&notes, "overlap", &t.overlap, on, on ? "on" : "off", t.overlap ? "on" : "off");
  }
  if (c.allreduce) {
    std::vector<SizeRange>& rules = plan->collectives[Collective::kAllreduce];
    const std::vector<SizeRange> wanted = {SizeRange{0, kPlanMaxBytes, *c.allreduce, 0}};
    if (rules != wanted) {
      notes.push_back("collectives.allreduce: the recipe fixes " +
                      std::string(algorithm_name(*c.allreduce)) +
                      " for every size, the plan had other rules");
      rules = wanted;
    }
  }
  return notes;
}

Plan recipe_default_plan(const Recipe& recipe, const JobShape& job) {
  const auto& t = recipe.training;
  const int64_t ranks = std::max<int64_t>(1, int64_t{job.nodes} * job.ranks_per_node);
  int64_t per_rank = t.per_rank_batch;
  if (per_rank <= 0 && t.global_batch > 0) per_rank = std::max<int64_t>(1, t.global_batch / ranks);
  if (per_rank <= 0) per_rank = 32;
  const Algorithm algo = recipe.comm.allreduce.value_or(Algorithm::kRing);
  Plan plan = default_plan(job.nodes, job.ranks_per_node, per_rank, algo);
  plan.job.threads_per_rank = job.threads_per_rank;
  auto& tp = plan.training;
  tp.precision = t.precision == "auto" ? "fp32" : t.precision;
  if (t.scaling == Scaling::kStrong && t.global_batch > 0) {
    tp.scaling = Scaling::kStrong;
    tp.global_batch = t.global_batch;
    tp.per_rank_batch = std::max<int64_t>(1, t.global_batch / ranks);
  } else {
    tp.scaling = Scaling::kWeak;
    tp.per_rank_batch = per_rank;
    tp.global_batch = per_rank * ranks;
  }
  const int64_t ref = t.optimizer.lr_reference_batch;
  tp.lr_scale = lr_scale_for(t.optimizer.lr_scaling, tp.global_batch, ref);
  tp.warmup_steps = t.schedule.warmup_steps;
  if (recipe.comm.bucket_bytes > 0) tp.bucket_bytes = recipe.comm.bucket_bytes;
  tp.overlap = recipe.comm.overlap != Overlap::kOff;
  if (t.parallel.microbatches > 0)
    plan.parallel.microbatches = static_cast<int>(t.parallel.microbatches);
  plan.provenance.source = PlanSource::kDefault;
  plan.provenance.reason = "the recipe's own settings (not tuned)";
  return plan;
}

namespace {

Error bad(const Recipe& r, const std::string& key, const std::string& what) {
  return invalid_input("recipe '" + r.name + "': " + key + ": " + what);
}

Status check_batch(const Recipe& recipe, const Plan& plan) {
  const TrainingPlan& tp = plan.training;
  const int64_t replicas = plan.parallel.replicas;
  if (tp.scaling == Scaling::kWeak) {
    if (tp.per_rank_batch < 1) return bad(recipe, "plan.training.per_rank_batch", "must be >= 1");
    if (tp.global_batch != tp.per_rank_batch * replicas)
      return bad(recipe, "plan.training.global_batch",
                 std::to_string(tp.global_batch) + " is not per_rank_batch " +
                     std::to_string(tp.per_rank_batch) + " x " + std::to_string(replicas) +
                     " replicas");
  } else if (tp.global_batch < replicas) {
    return bad(recipe, "plan.training.global_batch",
               "global batch " + std::to_string(tp.global_batch) + " gives some of the " +
                   std::to_string(replicas) + " replicas no samples");
  }
  const int64_t max_global = recipe.training.max_global_batch;
  if (max_global > 0 && tp.global_batch > max_global)
    return bad(recipe, "training.batch.max_global",
               "the plan's global batch " + std::to_string(tp.global_batch) + " exceeds it (" +
                   std::to_string(max_global) + ")");
  return ok_status();
}

Status check_engine_settings(const Recipe& recipe, const Plan& plan) {
  if (recipe.model.dtype != "f32")
    return bad(recipe, "model.dtype",
               "the engine trains f32 only, got '" + recipe.model.dtype + "'");
  if (recipe.model.graph.nodes.empty()) return bad(recipe, "model", "has no layers");
  const DataConfig& d = recipe.data;
  const bool synthetic = d.kind == DataKind::kSyntheticDigits ||
                         d.kind == DataKind::kSyntheticImagenet ||
                         d.kind == DataKind::kSyntheticCifar;
  if (synthetic && d.samples - heldout_count(d.samples, d.heldout_fraction) < 1)
    return bad(recipe, "data.samples", "leaves no training samples after the held-out share");
  const OptimizerConfig& o = recipe.training.optimizer;
  if (o.kind != "sgd" && o.kind != "adamw")
    return bad(recipe, "training.optimizer.kind",
               "the engine runs sgd and adamw, not '" + o.kind + "'");
  if (recipe.training.schedule.kind == ScheduleKind::kStep &&
      recipe.training.schedule.step_size < 1)
    return bad(recipe, "training.schedule.step_size", "must be at least 1");
  if (!(plan.training.lr_scale > 0.0))
    return bad(recipe, "plan.training.lr_scale", "must be positive");
  const bool gpu = recipe.comm.backend == "nccl";
  if (plan.parallel.offload == Offload::kOptimizer && !gpu)
    return bad(recipe, "plan.parallel.offload",
               "optimizer offload needs the GPU engine (comm.backend nccl); this recipe trains on "
               "the CPU, whose optimizer state is in host memory already");
  if (auto it = plan.collectives.find(Collective::kAllreduce); it != plan.collectives.end()) {
    for (size_t i = 0; i < it->second.size(); ++i) {
      const Algorithm a = it->second[i].algo;
      if (!gpu && is_nccl(a))
        return bad(
            recipe, "plan.collectives.allreduce[" + std::to_string(i) + "]",
            "algorithm '" + std::string(algorithm_name(a)) + "' is not one the CPU engine runs");
    }
  }
  return ok_status();
}

}  // namespace

Status check_plan_for_recipe(const Recipe& recipe, const Plan& plan, int64_t ranks) {
  if (ranks < 1) return invalid_input("a job of " + std::to_string(ranks) + " ranks");
  if (Status st = validate_plan(plan); !st) return std::move(st).error().wrap("plan");
  const ParallelLayout& pl = plan.parallel;
  if (int64_t{pl.replicas} * pl.stages != ranks)
    return bad(recipe, "plan.parallel",
               std::to_string(pl.replicas) + " replicas x " + std::to_string(pl.stages) +
                   " stages is not the job's " + std::to_string(ranks) + " ranks");
  DLTUNE_TRY(check_batch(recipe, plan));
  return check_engine_settings(recipe, plan);
}

int64_t reference_per_rank_batch(const Recipe& r, int ranks) {
  if (r.training.per_rank_batch > 0) return r.training.per_rank_batch;
  if (r.training.global_batch > 0) {
    return std::max<int64_t>(1, r.training.global_batch / std::max(1, ranks));
  }
  if (r.model.builtin == "cifar-cnn" || r.model.builtin == "alexnet") return 128;
  return 64;
}

int64_t lr_reference_batch(const Recipe& r, int ranks) {
  if (r.training.optimizer.lr_reference_batch > 0) return r.training.optimizer.lr_reference_batch;
  if (r.training.global_batch > 0) return r.training.global_batch;
  if (r.training.per_rank_batch > 0) {
    const int64_t n = r.launch.ranks > 0 ? r.launch.ranks : ranks;
    return r.training.per_rank_batch * n;
  }
  return reference_per_rank_batch(r, ranks) * ranks;
}

Status check_plan_lr_scale(const Recipe& recipe, int64_t ranks, const Plan& plan) {
  const TrainingPlan& t = plan.training;
  const OptimizerConfig& o = recipe.training.optimizer;
  const int n = static_cast<int>(std::clamp<int64_t>(ranks, 1, kMaxPlanRanks));
  // Every factor a dltune launch or tuner of this recipe can give at this global batch: the
  // rule (auto: linear, then the tuner's sqrt fallback) from the tuner's reference batch and
  // from the recipe's own (its default plan), and 1 (none, or lr kept unscaled).
  std::vector<LrScaling> rules = {o.lr_scaling};
  if (o.lr_scaling == LrScaling::kAuto) rules = {LrScaling::kLinear, LrScaling::kSqrt};
  double lo = 1.0, hi = 1.0;
  for (LrScaling rule : rules) {
    for (int64_t ref : {lr_reference_batch(recipe, n), o.lr_reference_batch}) {
      if (ref <= 0) continue;
      const double f = lr_scale_for(rule, t.global_batch, ref);
      lo = std::min(lo, f);
      hi = std::max(hi, f);
    }
  }
  constexpr double kRoundOff = 1e-9;  // a factor stored as JSON text reads back exactly; margin
  if (std::isfinite(t.lr_scale) && t.lr_scale >= lo * (1 - kRoundOff) &&
      t.lr_scale <= hi * (1 + kRoundOff)) {
    return ok_status();
  }
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "training.lr_scale: x%g is not what the recipe's lr rule gives at global batch "
                "%lld (optimizer.lr_scaling %s from a reference batch of %lld: x%g to x%g)",
                t.lr_scale, static_cast<long long>(t.global_batch),
                std::string(lr_scaling_name(o.lr_scaling)).c_str(),
                static_cast<long long>(lr_reference_batch(recipe, n)), lo, hi);
  return invalid_input(buf);
}

}  // namespace dltune::recipes
