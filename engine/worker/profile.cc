#include "engine/worker/profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/json_input.h"
#include "common/paths.h"
#include "common/strings.h"
#include "engine/gpu/gpu_context.h"
#include "engine/graph/kernel_select.h"
#include "engine/train/node_costs.h"
#include "engine/train/recipe_config.h"
#include "engine/train/trainer.h"
#include "engine/worker/profile_copies.h"
#include "recipes/model/builtins.h"
#include "recipes/plan.h"
#include "recipes/recipe.h"

namespace dltune::engine {
namespace {

struct ProfileOptions {
  std::string model, recipe, out;
  int batch = 32, steps = 5, warmup = 2, threads = 1;
  bool fit = false, device_memory = false, kernels = false;
  bool steps_given = false;  // --steps on the command line (--fit's default is 3)
  std::string precision;     // "" (the recipe's), fp32, bf16
  double seconds = 0;        // --kernels: the selection's time limit (0: none)
  std::string kernel_file;   // a plan's kernel choices to profile with ({node: kernel})
  int copies = 1;            // copies at once, as a node's ranks (profile_copies.h)
  std::string barrier;       // a copy's barrier "R,W" (set by profile_copies, not by people)
};

// --kernel-choices FILE into cfg->kernels. Errors: an unreadable file, not a JSON object of
// strings (the trainer then refuses unknown nodes and kernels itself).
Status read_kernel_choices(const std::string& path, TrainConfig* cfg) {
  auto text = paths::read_file(path);
  if (!text) return text.error();
  auto j = parse_json_bounded(*text);
  if (!j) return std::move(j).error().wrap("--kernel-choices " + path);
  if (!j->is_object()) return invalid_input("--kernel-choices: expected a JSON object in " + path);
  for (const auto& [node, kernel] : j->items()) {
    if (!kernel.is_string())
      return invalid_input("--kernel-choices: node '" + node + "' needs a kernel name");
    cfg->kernels[node] = kernel.get<std::string>();
  }
  return ok_status();
}

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

// `text` to --out, or to standard output without it.
Status emit(const ProfileOptions& o, const std::string& text) {
  if (o.out.empty()) {
    std::fputs(text.c_str(), stdout);
    return ok_status();
  }
  return paths::write_file_atomic(o.out, text);
}

// --fit: the layout search's node costs around a replica batch of o.batch.
Status fit(const ProfileOptions& o, const TrainConfig& cfg) {
  auto graph = model_graph(cfg);
  if (!graph) return graph.error();
  auto costs = measure_node_costs(cfg, *graph, o.batch, o.steps_given ? o.steps : 3);
  if (!costs) return costs.error();
  return emit(o, planning::node_costs_to_json(*costs).dump() + "\n");
}

// --kernels: each node's kernel chosen by measurement at --batch on --threads
// (engine/graph/kernel_select.h), within --seconds.
Status kernels(const ProfileOptions& o, TrainConfig cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!o.precision.empty()) cfg.precision = o.precision;
  auto lone = lone_trainer(cfg, o.threads);
  if (!lone) return lone.error();
  KernelSelectOptions ko;
  ko.batch = static_cast<int>(cfg.per_rank_batch);
  ko.seconds = o.seconds;
  auto report = select_kernels(lone->trainer->model(), ko);
  if (!report) return report.error();
  nlohmann::json choices = nlohmann::json::object();
  for (const NodeKernelChoice& c : *report) {
    if (!c.timings.empty()) choices[c.name] = c.chosen;
  }
  nlohmann::json j;
  j["model"] = o.model.empty() ? o.recipe : o.model;
  j["batch"] = o.batch;
  j["threads"] = o.threads;
  j["precision"] = cfg.precision;
  j["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  j["kernels"] = kernel_report_json(*report);
  j["text"] = kernel_report_text(*report);
  j["choices"] = std::move(choices);
  return emit(o, j.dump() + "\n");
}

// --device-memory: GPU 0's memory.
Status device_memory(const ProfileOptions& o) {
  auto bytes = gpu::device_memory_bytes(0);
  if (!bytes) return bytes.error();
  return emit(o, nlohmann::json{{"device_memory_bytes", *bytes}}.dump() + "\n");
}

Status profile(const ProfileOptions& o) {
  if (o.device_memory) return device_memory(o);
  if (o.batch < 1) return invalid_input("--batch must be at least 1");
  if (o.model.empty() == o.recipe.empty()) return invalid_input("give --model or --recipe");
  // --fit profiles at most 64 samples a batch (measure_node_costs()).
  auto cfg = profile_config(o.model, o.recipe, o.fit ? std::min(o.batch, 64) : o.batch);
  if (!cfg) return cfg.error();
  if (o.fit) return fit(o, *cfg);
  if (o.kernels) return kernels(o, *cfg);
  if (o.copies > 1) return profile_copies(o.copies, o.out);
  if (!o.precision.empty()) cfg->precision = o.precision;
  if (!o.kernel_file.empty()) DLTUNE_TRY(read_kernel_choices(o.kernel_file, &*cfg));
  std::function<Status()> barrier;
  if (!o.barrier.empty()) barrier = [&o] { return wait_at_barrier(o.barrier); };
  auto p = profile_nodes(*cfg, o.steps, o.warmup, o.threads, barrier);
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
  j["step_samples_s"] = p->step_samples_s;
  return emit(o, j.dump() + "\n");
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
  cmd->add_option("--steps", o.steps, "timed steps (--fit: 3)")
      ->capture_default_str()
      ->each([&o](const std::string&) { o.steps_given = true; });
  cmd->add_option("--warmup", o.warmup, "untimed steps first")->capture_default_str();
  cmd->add_option("--threads", o.threads, "BLAS threads")->capture_default_str();
  cmd->add_option("--out", o.out, "write the JSON here instead of standard output");
  cmd->add_flag("--fit", o.fit,
                "each node's per-sample and per-call cost around --batch (the layout search's)");
  cmd->add_flag("--device-memory", o.device_memory, "GPU 0's memory as this process sees it");
  cmd->add_flag("--kernels", o.kernels,
                "choose each node's kernel by measurement at --batch on --threads");
  cmd->add_option("--precision", o.precision, "fp32 or bf16 (default: the recipe's)");
  cmd->add_option("--kernel-choices", o.kernel_file,
                  "a JSON file of {node: kernel} to profile with (a plan's choices)");
  cmd->add_option("--seconds", o.seconds, "--kernels: time limit (largest nodes first)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--copies", o.copies,
                  "run N copies at once, each on its share of the CPUs, as N ranks of a node; "
                  "report the slowest")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--barrier", o.barrier, "(internal) a copy's barrier R,W");
  return cmd;
}

int run_profile_command() {
  const ProfileOptions& o = opts();
  auto st = profile(o);
  if (!st) {
    // --fit and --device-memory answer the launcher, which reads the reason from --out.
    const bool answered = (o.fit || o.device_memory || o.kernels) && !o.out.empty() &&
                          paths::write_file_atomic(
                              o.out, nlohmann::json{{"error", st.error().message()}}.dump() + "\n")
                              .ok();
    if (!answered)
      std::fprintf(stderr, "dltune-worker profile: %s\n", st.error().message().c_str());
    return st.error().exit_code();
  }
  return 0;
}

}  // namespace dltune::engine
