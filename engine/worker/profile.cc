#include "engine/worker/profile.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "common/strings.h"
#include "engine/train/recipe_config.h"
#include "engine/train/train_data.h"
#include "recipes/model/builtins.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {
namespace {

struct ProfileOptions {
  std::string model, recipe, out;
  int batch = 32, steps = 5, warmup = 2, threads = 1;
};

ProfileOptions& opts() {
  static ProfileOptions o;
  return o;
}

constexpr const char* kTextFile = "/usr/share/common-licenses/GPL-3";

// A built-in model on synthetic data of its default input (GPT: a text file).
Result<TrainConfig> builtin_config(const std::string& name, int batch) {
  auto info = recipes::builtin_info(name);
  if (!info) {
    return not_found("unknown model '" + name + "'; built-in models are " +
                     strings::join(recipes::builtin_model_names(), ", "));
  }
  TrainConfig c;
  c.model = name;
  const recipes::Shape& in = info->default_input;
  if (info->family == "gpt") {
    c.data = std::string("text:") + kTextFile;
    c.heldout_split = 0.1;
  } else if (in == recipes::Shape{1, 28, 28}) {
    c.data = "synthetic";
  } else if (in == recipes::Shape{3, 32, 32}) {
    c.data = "synthetic-cifar";
  } else {
    c.data = "synthetic-imagenet";
  }
  c.per_rank_batch = batch;  // (it was left at the default 64 whatever --batch said)
  c.train_size = std::max(256, 4 * batch);
  c.heldout_size = 0;
  return c;
}

Result<TrainConfig> recipe_config(const std::string& path, int batch) {
  auto r = recipes::load_recipe(path);
  if (!r) return r.error();
  recipes::Plan plan = recipes::default_plan(1, 1, batch, recipes::Algorithm::kRing);
  plan.training.scaling = recipes::Scaling::kWeak;
  plan.training.per_rank_batch = batch;
  plan.training.global_batch = batch;
  auto c = train_config_from(*r, plan, 1);
  if (!c) return c.error();
  c->train_size = std::min<int64_t>(c->train_size, std::max(256, 4 * batch));
  c->heldout_size = 0;
  return c;
}

Status profile(const ProfileOptions& o) {
  if (o.batch < 1) return invalid_input("--batch must be at least 1");
  if (o.model.empty() == o.recipe.empty()) return invalid_input("give --model or --recipe");
  auto cfg = profile_config(o.model, o.recipe, o.batch);
  if (!cfg) return cfg.error();
  auto p = profile_nodes(*cfg, o.steps, o.warmup, o.threads);
  if (!p) return p.error();
  nlohmann::json j;
  j["model"] = o.model.empty() ? o.recipe : o.model;
  j["batch"] = o.batch;
  j["steps"] = o.steps;
  j["threads"] = o.threads;
  j["forward_s"] = p->forward_s;
  j["backward_s"] = p->backward_s;
  j["optimizer_s"] = p->optimizer_s;
  j["input_s"] = p->input_s;
  j["step_s"] = p->step_s;
  const std::string text = j.dump() + "\n";
  if (o.out.empty()) {
    std::fputs(text.c_str(), stdout);
    return ok_status();
  }
  return paths::write_file_atomic(o.out, text);
}

}  // namespace

Result<TrainConfig> profile_config(const std::string& model, const std::string& recipe, int batch) {
  return model.empty() ? recipe_config(recipe, batch) : builtin_config(model, batch);
}

CLI::App* add_profile_command(CLI::App& app) {
  ProfileOptions& o = opts();
  auto* cmd = app.add_subcommand("profile", "time one rank's compute per model node (for predict)");
  cmd->add_option("--model", o.model, "a built-in model (dltune model list)");
  cmd->add_option("--recipe", o.recipe, "a recipe file or bundled recipe name");
  cmd->add_option("--batch", o.batch, "per-rank batch")->capture_default_str();
  cmd->add_option("--steps", o.steps, "timed steps")->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "untimed steps first")->capture_default_str();
  cmd->add_option("--threads", o.threads, "BLAS threads")->capture_default_str();
  cmd->add_option("--out", o.out, "write the JSON here instead of standard output");
  return cmd;
}

int run_profile_command() {
  auto st = profile(opts());
  if (!st) {
    std::fprintf(stderr, "dltune-worker profile: %s\n", st.error().message().c_str());
    return st.error().exit_code();
  }
  return 0;
}

}  // namespace dltune::engine
