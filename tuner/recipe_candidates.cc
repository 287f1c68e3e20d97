// Recipe tuning's candidates (tuner/recipe_tuning.h "Candidates"): which batches, scaling
// modes, buckets, overlap settings and pipeline layouts a recipe's trials try, their learning
// rate rule, and how a near hit narrows them.
#include <algorithm>
#include <set>
#include <tuple>

#include "common/strings.h"
#include "recipes/datasets.h"
#include "tuner/recipe_tuning.h"

namespace dltune::tuner {
namespace {

using recipes::Scaling;
using recipes::TrainingPlan;

constexpr uint64_t kMiB = uint64_t{1} << 20;

int64_t ceil_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// The bucket sizes and overlap settings worth trying where `replicas` ranks reduce gradients
// of at most `largest` bytes (a stage's share of the model's `grad`): the recipe's where it
// fixes them; for one replica (nothing reduced: bucket and overlap change nothing it does) the
// plan's defaults (4 MiB, overlap on), not a search (AlexNet on one rank spent its whole 120 s
// budget telling 8 such twins apart); else 1, 4 and 16 MiB below `largest` and one bucket for
// everything, with overlap on and off.
struct CommChoices {
  std::vector<uint64_t> buckets;
  std::vector<bool> overlaps;
};
CommChoices comm_choices(const recipes::Recipe& r, int replicas, int64_t largest, int64_t grad) {
  CommChoices c;
  if (r.comm.bucket_bytes > 0) {
    c.buckets.push_back(r.comm.bucket_bytes);
  } else if (replicas == 1) {
    c.buckets.push_back(TrainingPlan{}.bucket_bytes);
  } else {
    for (uint64_t b : {1 * kMiB, 4 * kMiB, 16 * kMiB}) {
      if (b < static_cast<uint64_t>(largest)) c.buckets.push_back(b);
    }
    // One bucket, within what a plan may hold (recipes/plan.h): a tiny model's gradient still
    // gets a 1 KiB bucket, a huge one's several 4 GiB buckets.
    c.buckets.push_back(std::clamp(static_cast<uint64_t>(ceil_pow2(grad)),
                                   recipes::kMinPlanBucketBytes, recipes::kMaxPlanBucketBytes));
  }
  if (r.comm.overlap != recipes::Overlap::kOff) c.overlaps.push_back(true);
  if (r.comm.overlap != recipes::Overlap::kOn) c.overlaps.push_back(false);
  if (replicas == 1 && r.comm.overlap == recipes::Overlap::kAuto)
    c.overlaps = {TrainingPlan{}.overlap};
  return c;
}

}  // namespace

void apply_lr_rule(const recipes::Recipe& r, int ranks, TrainingPlan* t,
                   std::optional<recipes::LrScaling> rule) {
  const int64_t ref = std::max<int64_t>(1, lr_reference_batch(r, ranks));
  t->lr_scale =
      recipes::lr_scale_for(rule.value_or(r.training.optimizer.lr_scaling), t->global_batch, ref);
  const int64_t steps = recipes::training_steps(r, t->global_batch).value_or(1);
  t->warmup_steps = recipes::scaled_lr_warmup(r, steps, t->lr_scale);
}

int64_t gradient_bytes(const recipes::Recipe& r) {
  const recipes::GraphInfo info = recipes::analyze_graph(r.model.graph);
  if (!info.ok()) return 0;
  return info.parameters * 4;
}

std::string candidate_label(const TrainingPlan& t, uint64_t grad_bytes) {
  std::string s = "b" + std::to_string(t.per_rank_batch);
  s += t.scaling == Scaling::kStrong ? " strong(g" + std::to_string(t.global_batch) + ")" : " weak";
  if (grad_bytes > 0 && t.bucket_bytes >= grad_bytes) {
    s += " bucket=one(" + strings::format_bytes(t.bucket_bytes) + ")";
  } else {
    s += " bucket=" + strings::format_bytes(t.bucket_bytes);
  }
  s += t.overlap ? " overlap" : " no-overlap";
  return s;
}

Result<std::vector<RecipeCandidate>> generate_candidates(const recipes::Recipe& r,
                                                         const recipes::JobShape& job) {
  const int ranks = job.nodes * job.ranks_per_node;
  if (ranks < 1) return invalid_input("job shape: need at least one rank");
  const int64_t grad = gradient_bytes(r);
  if (grad <= 0) {
    return invalid_input("model: its layer shapes do not check (run 'dltune recipe check')");
  }
  const int64_t samples = recipes::train_samples(r).value_or(0);
  const int64_t max_global =
      r.training.max_global_batch > 0 ? std::min(r.training.max_global_batch, samples) : samples;
  auto fits = [&](int64_t global) { return global >= ranks && global <= max_global; };

  // Batches: (per_rank, global, scaling).
  std::vector<std::tuple<int64_t, int64_t, Scaling>> batches;
  const int64_t ref = reference_per_rank_batch(r, ranks);
  const bool weak = r.training.scaling != Scaling::kStrong;
  const bool strong = r.training.scaling != Scaling::kWeak;
  const bool strong_first = r.training.scaling == Scaling::kStrong;
  auto add_strong = [&] {
    const int64_t g = std::min(lr_reference_batch(r, ranks), max_global);
    if (g >= ranks && g % ranks == 0) batches.emplace_back(g / ranks, g, Scaling::kStrong);
  };
  // A batch the recipe names is the user's decision (it sets the optimisation the learning rate
  // was chosen for): it is kept, and only `batch: auto` lets the tuner search batches.
  const int64_t fixed_per_rank = r.training.per_rank_batch;
  const int64_t fixed_global = r.training.global_batch;
  if (fixed_per_rank > 0 || fixed_global > 0) {
    const int64_t global = fixed_global > 0 ? fixed_global : fixed_per_rank * ranks;
    const int64_t per_rank = fixed_global > 0 ? fixed_global / ranks : fixed_per_rank;
    const bool as_strong = fixed_global > 0 ? strong : !weak;
    if (per_rank >= 1 && global == per_rank * ranks) {
      batches.emplace_back(per_rank, global, as_strong ? Scaling::kStrong : Scaling::kWeak);
    }
  } else if (strong && strong_first) {
    add_strong();
  }
  if (weak && fixed_per_rank <= 0 && fixed_global <= 0) {
    std::set<int64_t> per_rank = {ref};
    for (int64_t b = std::max<int64_t>(1, ceil_pow2(ref) / 2); b <= ref * 4; b *= 2) {
      per_rank.insert(b);
    }
    for (int64_t b : per_rank) {
      if (b >= std::max<int64_t>(1, ref / 2) && fits(b * ranks)) {
        batches.emplace_back(b, b * ranks, Scaling::kWeak);
      }
    }
  }
  if (strong && !strong_first && fixed_per_rank <= 0 && fixed_global <= 0) add_strong();
  if (batches.empty()) {
    return invalid_input("training.batch: no per-rank batch near " + std::to_string(ref) +
                         " gives a global batch within " + std::to_string(max_global) +
                         " (training.max_global_batch and the " + std::to_string(samples) +
                         " training samples) for " + std::to_string(ranks) + " ranks");
  }

  const auto [buckets, overlaps] = comm_choices(r, ranks, grad, grad);
  std::vector<RecipeCandidate> out;
  std::set<std::tuple<int64_t, int64_t, uint64_t, bool>> seen;
  for (const auto& [per_rank, global, scaling] : batches) {
    for (uint64_t bucket : buckets) {
      for (bool overlap : overlaps) {
        if (!seen.insert({per_rank, global, bucket, overlap}).second) continue;
        TrainingPlan t;
        t.per_rank_batch = per_rank;
        t.global_batch = global;
        t.scaling = scaling;
        t.bucket_bytes = bucket;
        t.overlap = overlap;
        apply_lr_rule(r, ranks, &t);
        out.push_back({candidate_label(t, static_cast<uint64_t>(grad)), t, std::nullopt});
      }
    }
  }
  return out;
}

namespace {

// "1x2 stages m8 1f1b", "2x2 stages m4 gpipe recompute", "4x1 stages m1 1f1b offload".
std::string layout_label(const recipes::ParallelLayout& l) {
  std::string s = std::to_string(l.replicas) + "x" + std::to_string(l.stages) + " stages m" +
                  std::to_string(l.microbatches) + " " +
                  std::string(recipes::schedule_name(l.schedule));
  if (l.recompute == recipes::Recompute::kStage) s += " recompute";
  if (l.offload == recipes::Offload::kOptimizer) s += " offload";
  return s;
}

}  // namespace

LayoutBatch layout_reference_batch(const recipes::Recipe& r, int ranks) {
  const int64_t fixed_global = r.training.global_batch;
  if (fixed_global > 0) return {fixed_global, false};
  if (r.training.scaling == Scaling::kStrong) return {lr_reference_batch(r, ranks), false};
  return {reference_per_rank_batch(r, ranks), true};
}

std::vector<RecipeCandidate> layout_candidates(
    const recipes::Recipe& r, const recipes::JobShape& job,
    const std::vector<recipes::ParallelLayout>& layouts) {
  const int ranks = job.nodes * job.ranks_per_node;
  const int64_t grad = gradient_bytes(r);
  const LayoutBatch b = layout_reference_batch(r, ranks);
  std::vector<RecipeCandidate> out;
  for (const recipes::ParallelLayout& l : layouts) {
    // Plain data parallelism is the batch candidates' (no layout); data parallelism with the
    // optimizer state offloaded (GPU) is a layout of its own.
    if ((!l.pipelined() && l.offload == recipes::Offload::kNone) || l.replicas < 1) continue;
    TrainingPlan t;
    if (!b.per_replica) {
      if (b.samples % l.replicas != 0) continue;
      t.scaling = Scaling::kStrong;
      t.per_rank_batch = b.samples / l.replicas;
    } else {
      t.scaling = Scaling::kWeak;
      t.per_rank_batch = b.samples;
    }
    t.global_batch = t.per_rank_batch * l.replicas;
    if (t.per_rank_batch < l.microbatches) continue;
    apply_lr_rule(r, ranks, &t);
    // The replicas of each stage reduce its gradients as data parallelism does, so their
    // buckets and overlap are searched too (a family: they share one trainer in the trials).
    const int64_t stage_grad = (std::max<int64_t>(grad, 0) + l.stages - 1) / l.stages;
    const auto [buckets, overlaps] = comm_choices(r, l.replicas, stage_grad, grad);
    for (uint64_t bucket : buckets) {
      for (bool overlap : overlaps) {
        RecipeCandidate k;
        k.training = t;
        k.training.bucket_bytes = bucket;
        k.training.overlap = overlap;
        k.label = candidate_label(k.training, static_cast<uint64_t>(std::max<int64_t>(grad, 0))) +
                  ", " + layout_label(l);
        k.layout = l;
        out.push_back(std::move(k));
      }
    }
  }
  return out;
}

std::vector<RecipeCandidate> fallback_lr_candidates(const std::vector<RecipeCandidate>& candidates,
                                                    const recipes::Recipe& r,
                                                    const recipes::JobShape& job,
                                                    recipes::LrScaling rule) {
  std::vector<RecipeCandidate> out;
  if (r.training.optimizer.lr_scaling != recipes::LrScaling::kAuto) return out;
  for (const RecipeCandidate& k : candidates) {
    if (!(k.training.lr_scale > 1.0)) continue;
    RecipeCandidate s = k;
    apply_lr_rule(r, job.nodes * job.ranks_per_node, &s.training, rule);
    s.label += " lr=" + std::string(recipes::lr_scaling_name(rule));
    out.push_back(std::move(s));
  }
  return out;
}

bool trains_alike(const RecipeCandidate& a, const RecipeCandidate& b) {
  if (a.layout.has_value() != b.layout.has_value()) return false;
  if (a.layout && !recipes::same_layout(*a.layout, *b.layout)) return false;
  return recipes::trains_alike(a.training, b.training);
}

std::vector<RecipeCandidate> narrow_candidates(const std::vector<RecipeCandidate>& candidates,
                                               const recipes::TrainingPlan& hint) {
  auto within = [](double a, double b, double factor) {
    return a > 0 && b > 0 && a <= b * factor && b <= a * factor;
  };
  std::vector<RecipeCandidate> near;
  for (const RecipeCandidate& k : candidates) {
    const auto& t = k.training;
    if (t.scaling != hint.scaling || t.overlap != hint.overlap) continue;
    if (!within(static_cast<double>(t.per_rank_batch), static_cast<double>(hint.per_rank_batch),
                2.0)) {
      continue;
    }
    if (!within(static_cast<double>(t.bucket_bytes), static_cast<double>(hint.bucket_bytes), 4.0)) {
      continue;
    }
    near.push_back(k);
  }
  return near.empty() ? candidates : near;
}

}  // namespace dltune::tuner
