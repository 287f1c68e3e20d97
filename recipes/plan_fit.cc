#include "recipes/plan_fit.h"

#include <algorithm>

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

}  // namespace dltune::recipes
