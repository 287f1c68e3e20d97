#include "engine/train/recipe_config.h"

#include <algorithm>

#include "recipes/datasets.h"
#include "recipes/plan_fit.h"

namespace dltune::engine {
namespace {

// The data source's name and sizes (TrainConfig::data's forms).
void map_data(const recipes::DataConfig& d, TrainConfig* c) {
  switch (d.kind) {
    case recipes::DataKind::kSyntheticDigits:
    case recipes::DataKind::kSyntheticImagenet:
    case recipes::DataKind::kSyntheticCifar:
      c->data = d.kind == recipes::DataKind::kSyntheticDigits  ? "synthetic"
                : d.kind == recipes::DataKind::kSyntheticCifar ? "synthetic-cifar"
                                                               : "synthetic-imagenet";
      c->heldout_size = recipes::heldout_count(d.samples, d.heldout_fraction);
      c->train_size = d.samples - c->heldout_size;
      break;
    case recipes::DataKind::kMnist:
    case recipes::DataKind::kCifar10:
      // `heldout: test` evaluates on the test files; a share holds out part of the training
      // files (the worker splits them with split_heldout).
      c->heldout_split = d.heldout_test_files ? 0.0 : d.heldout_fraction;
      c->data = std::string(d.kind == recipes::DataKind::kMnist ? "mnist:" : "cifar10:") + d.path;
      break;
    case recipes::DataKind::kText:
      c->heldout_split = d.heldout_fraction;  // the file's last share
      c->data = "text:" + d.path;
      break;
    case recipes::DataKind::kImageFolder:
    case recipes::DataKind::kTokens:
      // Held out: the dataset's own (DIR/val, the last shard) or a share of the training
      // images (seeded) / windows (the last) (engine/data/real_data.h).
      c->heldout_split = d.heldout_test_files ? 0.0 : d.heldout_fraction;
      c->data = (d.kind == recipes::DataKind::kImageFolder ? "imagefolder:" : "tokens:") + d.path;
      break;
  }
}

// The layout and the batch per replica (every rank under data parallelism).
void map_layout(const recipes::Plan& plan, TrainConfig* c) {
  const recipes::ParallelLayout& pl = plan.parallel;
  const recipes::TrainingPlan& tp = plan.training;
  c->stages = pl.stages;
  c->partition = pl.partition;
  c->microbatches = pl.microbatches;
  c->pipeline_schedule = pl.schedule;
  c->recompute = pl.recompute == recipes::Recompute::kStage;
  c->offload_optimizer = pl.offload == recipes::Offload::kOptimizer;
  c->scaling = tp.scaling;
  c->global_batch = static_cast<int>(tp.global_batch);
  c->per_rank_batch = tp.scaling == Scaling::kWeak
                          ? static_cast<int>(tp.per_rank_batch)
                          : static_cast<int>((tp.global_batch + pl.replicas - 1) / pl.replicas);
}

void map_optimizer(const recipes::TrainingConfig& tr, const recipes::TrainingPlan& tp,
                   TrainConfig* c) {
  c->optimizer = tr.optimizer.kind;
  c->lr = tr.optimizer.lr * tp.lr_scale;
  c->momentum = tr.optimizer.momentum;
  c->weight_decay = tr.optimizer.weight_decay;
  c->beta1 = tr.optimizer.beta1;
  c->beta2 = tr.optimizer.beta2;
  c->eps = tr.optimizer.eps;
  c->clip_grad_norm = tr.optimizer.clip_grad_norm;
  c->init_from = tr.init_from;
  c->warmup_steps = std::max(tr.schedule.warmup_steps, tp.warmup_steps);
  c->schedule = tr.schedule.kind;
  if (tr.schedule.kind == recipes::ScheduleKind::kStep) {
    c->step_size = tr.schedule.step_size;
    c->gamma = tr.schedule.gamma;
  }
  if (tr.schedule.kind == recipes::ScheduleKind::kCosine) c->min_lr = tr.schedule.min_lr;
  c->seed = tr.seed;
}

// The plan's allreduce rules as the engine's ranges ([min, max) -> "at most max - 1"), with
// neighbours of the same algorithm and segment merged; ring everywhere without rules.
std::vector<AlgorithmRange> map_algorithms(const recipes::Plan& plan) {
  std::vector<AlgorithmRange> out;
  auto it = plan.collectives.find(recipes::Collective::kAllreduce);
  if (it == plan.collectives.end() || it->second.empty()) return {AlgorithmRange{}};
  for (const recipes::SizeRange& r : it->second) {
    const uint64_t max = r.max_bytes == recipes::kPlanMaxBytes ? UINT64_MAX : r.max_bytes - 1;
    const bool segmented =
        r.algo == recipes::Algorithm::kRing || r.algo == recipes::Algorithm::kHierarchical;
    const uint64_t segment = segmented ? r.segment_bytes : 0;
    if (!out.empty() && out.back().algorithm == r.algo && out.back().segment_bytes == segment)
      out.back().max_bytes = max;
    else
      out.push_back(AlgorithmRange{max, r.algo, segment});
  }
  return out;
}

}  // namespace

Result<TrainConfig> train_config_from(const recipes::Recipe& recipe, const recipes::Plan& plan,
                                      int ranks) {
  DLTUNE_TRY(recipes::check_plan_for_recipe(recipe, plan, ranks));
  TrainConfig c;
  c.model = recipe.model.builtin.empty() ? recipe.name : recipe.model.builtin;
  c.graph = recipe.model.graph;
  c.input = recipe.model.graph.input;
  c.classes = static_cast<int>(recipe.data.classes);
  map_data(recipe.data, &c);
  map_layout(plan, &c);
  map_optimizer(recipe.training, plan.training, &c);
  auto steps = recipes::training_steps(recipe, c.global_batch_for(ranks));
  if (!steps) return steps.error();
  c.steps = *steps;
  c.checkpoint_every = recipes::checkpoint_interval(recipe, c.steps);
  c.checkpoint_every_s = recipe.training.checkpoint_every_seconds;
  c.bucket_bytes = plan.training.bucket_bytes;
  c.overlap = plan.training.overlap;
  // Recipes have no device key: `comm.backend: nccl` means the ranks compute on their GPUs.
  if (recipe.comm.backend == "nccl") c.device = "gpu";
  c.algorithms = map_algorithms(plan);
  // How each rank computes: its threads, the precision, the kernels chosen per node.
  c.threads = plan.job.threads_per_rank;
  c.precision = plan.training.precision;
  c.kernels = plan.training.kernels;
  if (auto st = validate(c); !st) return std::move(st).error().wrap("recipe '" + recipe.name + "'");
  return c;
}

}  // namespace dltune::engine
