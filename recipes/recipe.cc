// Recipe names, loading by path or bundled name, the tuning signature and the JSON view.
#include "recipes/recipe.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/hash.h"
#include "common/paths.h"
#include "common/strings.h"
#include "recipes/recipe_parse_internal.h"
#include "recipes/yaml_reader.h"

#include "dltune/config.h"

namespace dltune::recipes {
namespace fs = std::filesystem;

std::string Problem::to_string() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  return out + ": " + key + ": " + message;
}

std::string_view data_kind_name(DataKind kind) {
  switch (kind) {
    case DataKind::kSyntheticDigits:
      return "synthetic-digits";
    case DataKind::kSyntheticImagenet:
      return "synthetic-imagenet";
    case DataKind::kMnist:
      return "mnist";
    case DataKind::kCifar10:
      return "cifar10";
    case DataKind::kSyntheticCifar:
      return "synthetic-cifar";
    case DataKind::kText:
      return "text";
    case DataKind::kImageFolder:
      return "imagefolder";
    case DataKind::kTokens:
      return "tokens";
  }
  return "?";
}

int64_t text_window_stride(int64_t context) { return std::max<int64_t>(1, context / 16); }

int64_t text_heldout_bytes(int64_t bytes, double heldout_fraction) {
  return static_cast<int64_t>(std::llround(static_cast<double>(bytes) * heldout_fraction));
}

int64_t text_windows(int64_t part_bytes, int64_t context) {
  return part_bytes < context + 1 ? 0
                                  : (part_bytes - context - 1) / text_window_stride(context) + 1;
}

std::optional<DataKind> internal::parse_data_kind(std::string_view s) {
  for (DataKind k : {DataKind::kSyntheticDigits, DataKind::kSyntheticImagenet, DataKind::kMnist,
                     DataKind::kCifar10, DataKind::kSyntheticCifar, DataKind::kText,
                     DataKind::kImageFolder, DataKind::kTokens})
    if (data_kind_name(k) == s) return k;
  return std::nullopt;
}

std::string_view schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kConstant:
      return "constant";
    case ScheduleKind::kStep:
      return "step";
    case ScheduleKind::kCosine:
      return "cosine";
  }
  return "?";
}

namespace {

// Directories searched for bundled recipes, in order.
std::vector<std::string> bundled_dirs() {
  std::vector<std::string> dirs;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back((exe.parent_path().parent_path() / "share/dltune/recipes").string());
  dirs.push_back(std::string(DLTUNE_SOURCE_DIR) + "/recipes");
  dirs.emplace_back("recipes");
  return dirs;
}

std::vector<std::string> yaml_names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".yaml" && entry.is_regular_file(ec))
      names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Result<std::string> find_bundled_recipe(const std::string& name) {
  for (const std::string& dir : bundled_dirs()) {
    const std::string path = dir + "/" + name + ".yaml";
    if (fs::is_regular_file(path)) return path;
  }
  return not_found("no bundled recipe named '" + name + "'");
}

std::vector<BundledRecipe> list_bundled_recipes() {
  std::vector<BundledRecipe> out;
  for (const std::string& dir : bundled_dirs()) {
    const std::vector<std::string> names = yaml_names_in(dir);
    if (names.empty()) continue;
    for (const std::string& name : names) {
      BundledRecipe b{name, dir + "/" + name + ".yaml", ""};
      ParseOutcome parsed = parse_recipe_file(b.path);
      b.description = parsed.recipe.description;  // shown even when its data files are absent
      out.push_back(std::move(b));
    }
    break;
  }
  return out;
}

Result<std::string> resolve_recipe_path(const std::string& path_or_name) {
  std::error_code ec;
  if (fs::is_regular_file(path_or_name, ec)) return path_or_name;
  const bool looks_like_name = path_or_name.find('/') == std::string::npos &&
                               !path_or_name.ends_with(".yaml") && !path_or_name.empty();
  if (looks_like_name) {
    auto bundled = find_bundled_recipe(path_or_name);
    if (bundled) return bundled;
  }
  std::vector<std::string> names;
  for (const BundledRecipe& b : list_bundled_recipes()) names.push_back(b.name);
  const std::string stem = fs::path(path_or_name).stem().string();
  const bool is_bundled = std::find(names.begin(), names.end(), stem) != names.end();
  const std::string hint = is_bundled && stem != path_or_name ? " (did you mean '" + stem + "'?)"
                                                              : did_you_mean(stem, names);
  return not_found("no recipe file or bundled recipe named '" + path_or_name + "'" + hint +
                   " (bundled: " + strings::join(names, ", ") + ")");
}

namespace {

Result<Recipe> recipe_or_problems(ParseOutcome parsed) {
  if (parsed.ok()) return std::move(parsed.recipe);
  return invalid_input(internal::problems_text(parsed.problems));
}

}  // namespace

Result<Recipe> load_recipe(const std::string& path_or_name) {
  auto path = resolve_recipe_path(path_or_name);
  if (!path) return std::move(path).error();
  return recipe_or_problems(parse_recipe_file(*path));
}

Result<Recipe> load_recipe_text(std::string_view yaml_text, const std::string& file,
                                const std::string& base_dir) {
  return recipe_or_problems(parse_recipe(yaml_text, file, base_dir));
}

namespace {

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string recipe_signature(const Recipe& recipe) {
  // Versioned, canonical text: change the version whenever what goes in here changes. v1 held
  // only the model (v2 not the layout, AdamW's settings or the starting weights), so a plan tuned
  // for one recipe served every recipe of the same model (another batch, warm-up, bucket ...).
  // Everything below can change the plan the tuner picks, or whether a cached plan is right for
  // this recipe.
  // v4 adds launch.memory_per_rank: plans carry the layout the memory limit allowed.
  // v5 leaves the run's length out when the tuner measures throughput (issue 42: a `--set
  // training.steps=41` re-tuned for the whole budget). The length does not change what a trial
  // measures; it sets the warm-up a scaled lr gets (5 % of the run), which a launch derives again
  // for its own length (plan_fit.h's scaled_lr_warmup), and whether a trial saw past that
  // warm-up, after which a plan tuned for either length is at least as safe for the other (a
  // longer warm-up, or an lr left unscaled). The lr stays in: the trials test a scaled lr for
  // divergence, so the choice depends on it.
  // v6 leaves the learning rate out too (issue 42: `--set training.optimizer.lr=0.03` re-tuned
  // for the whole budget): the trials' throughput does not depend on it, only their lr scaling's
  // divergence checks do. A plan records the lr it was tuned with (provenance.tuned_lr) and a
  // launch with another lr uses it only where none of its trials scaled the lr (launch_plan.cc).
  std::string text = "dltune-recipe-signature v6\n";
  text += "dtype " + recipe.model.dtype + "\n";
  text += "input " + describe_shape(recipe.data.shape) + "\n";
  text += "classes " + std::to_string(recipe.data.classes) + "\n";
  text += describe_graph(recipe.model.graph);
  const DataConfig& d = recipe.data;
  text += "data " + std::string(data_kind_name(d.kind)) + " samples " + std::to_string(d.samples) +
          " heldout " + num(d.heldout_fraction) + (d.heldout_test_files ? " test-files" : "") +
          "\n";
  const TrainingConfig& t = recipe.training;
  if (recipe.tune.objective == Objective::kTimeToAccuracy)  // the target takes a length to reach
    text +=
        "length epochs " + std::to_string(t.epochs) + " steps " + std::to_string(t.steps) + "\n";
  text += "batch per_rank " + std::to_string(t.per_rank_batch) + " global " +
          std::to_string(t.global_batch) + " max_global " + std::to_string(t.max_global_batch) +
          " scaling " + std::string(scaling_name(t.scaling)) + "\n";
  const OptimizerConfig& o = t.optimizer;
  text += "optimizer " + o.kind + " momentum " + num(o.momentum) + " weight_decay " +
          num(o.weight_decay) + " lr_reference_batch " + std::to_string(o.lr_reference_batch) +
          " lr_scaling " + std::string(lr_scaling_name(o.lr_scaling)) + " betas " + num(o.beta1) +
          " " + num(o.beta2) + " eps " + num(o.eps) + " clip " + num(o.clip_grad_norm) + "\n";
  const ScheduleConfig& sc = t.schedule;
  text += "schedule " + std::string(schedule_kind_name(sc.kind)) + " warmup " +
          std::to_string(sc.warmup_steps) + " step_size " + std::to_string(sc.step_size) +
          " gamma " + num(sc.gamma) + " min_lr " + num(sc.min_lr) + "\n";
  const ParallelConfig& pc = t.parallel;
  text += "parallel " + pc.mode + " stages " + std::to_string(pc.stages) + " microbatches " +
          std::to_string(pc.microbatches) + " schedule " + pc.schedule + " recompute " +
          pc.recompute + "\n";
  // Written only when set, so that the signatures (and cached plans) of recipes that leave it
  // auto stay what v4 gave them.
  if (pc.offload != "auto") text += "offload " + pc.offload + "\n";
  // Likewise the compute settings (engine issue 38), written only when not the defaults.
  if (t.precision != "fp32") text += "precision " + t.precision + "\n";
  if (recipe.launch.threads_per_rank > 0)
    text += "threads_per_rank " + std::to_string(recipe.launch.threads_per_rank) + "\n";
  text += "init_from " + t.init_from + "\n";
  text += "memory_per_rank " + std::to_string(recipe.launch.memory_per_rank) + "\n";
  const CommConfig& c = recipe.comm;
  text += "comm backend " + c.backend + " allreduce " +
          (c.allreduce ? std::string(algorithm_name(*c.allreduce)) : std::string("auto")) +
          " bucket " + std::to_string(c.bucket_bytes) + " overlap " +
          std::to_string(static_cast<int>(c.overlap)) + "\n";
  text += "objective " + std::to_string(static_cast<int>(recipe.tune.objective)) + " target " +
          num(recipe.tune.target_accuracy) + "\n";
  return sha256_hex(text);
}

}  // namespace dltune::recipes
