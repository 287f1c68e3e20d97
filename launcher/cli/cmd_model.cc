// `dltune model`: the networks the engine runs.
//
//   dltune model list [--json]
//   dltune model show MODEL|RECIPE [--input C,H,W|T] [--json]
//                     [--kernels [--kernel-batch B] [--threads T] [--precision fp32|bf16]]
//   dltune model forward MODEL|RECIPE --weights W --input X -o Y
//
// MODEL is a built-in name (dltune model list); anything else is a recipe file or a bundled
// recipe's name, whose model (for its data's input) is shown. `show` prints the node table:
// each node's op and attributes, inputs, output shape, parameters and forward FLOPs per sample;
// --json has "parameters" (the total, a tied tensor counted once), "flops_per_sample" and
// "nodes", and "memory", the memory model's terms for the best layout (launch_layout.h's
// candidate_json()). --kernels measures each node's candidate kernels here (dltune-worker
// profile --kernels, engine/graph/kernel_select.h) and shows which each node runs and why (a
// launch's tuning makes the same choice for its plan, launcher/flow/plan_kernels.h); --json
// adds "kernels", the worker's answer. `forward` runs in dltune-worker (the launcher links no
// BLAS).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "launcher/backend/rank_program.h"
#include "launcher/cli/commands.h"
#include "launcher/flow/launch_layout.h"
#include "recipes/model/builtins.h"
#include "recipes/recipe.h"
#include "recipes/yaml_reader.h"

namespace dltune::cli {
namespace {

struct ModelOptions {
  std::string model, input, weights, tensors, output;
  bool json = false;
  // The memory model's query (show): samples per step, ranks and a fixed layout.
  int64_t batch = 1;
  int ranks = 1, stages = 0, microbatches = 0;
  std::string optimizer, schedule, recompute, offload;
  // --kernels: each node's kernel measured here at `kernel_batch` on `threads`, in `precision`.
  bool kernels = false;
  int64_t kernel_batch = 32;
  int threads = 1;
  std::string precision;
};

// The worker's kernel choice for `o` (dltune-worker profile --kernels): its JSON, with "text",
// the table. Errors: --input with a built-in model (measured at its own input only), the
// worker's.
Result<nlohmann::json> measure_kernels(const ModelOptions& o) {
  auto worker = sibling_program("dltune-worker");
  if (!worker) return worker.error();
  std::vector<std::string> args = {"--kernels", "--batch", std::to_string(o.kernel_batch),
                                   "--threads", std::to_string(o.threads)};
  if (recipes::builtin_info(o.model)) {
    if (!o.input.empty())
      return invalid_input("--kernels measures a built-in model at its own input: drop --input");
    args.insert(args.end(), {"--model", o.model});
  } else {
    auto path = recipes::resolve_recipe_path(o.model);
    if (!path) return path.error();
    args.insert(args.end(), {"--recipe", *path});
  }
  if (!o.precision.empty()) args.insert(args.end(), {"--precision", o.precision});
  return launcher::ask_worker(*worker, args);
}

// The memory model's terms for `o` (the layout search, launch_layout.h): the best layout's
// {"layout", "replica_batch", "stages": [{"first_node", "terms"}]}.
Result<nlohmann::json> memory_terms(const ModelOptions& o) {
  launcher::LayoutQuery q;
  if (auto worker = sibling_program("dltune-worker")) q.worker = *worker;  // a GPU's memory
  if (recipes::builtin_info(o.model)) {
    q.model = o.model;
    q.input = o.input;
  } else {
    auto path = recipes::resolve_recipe_path(o.model);
    if (!path) return path.error();
    q.recipe_path = *path;
  }
  q.ranks = o.ranks;
  q.batch = o.batch;
  q.stages = o.stages;
  q.microbatches = o.microbatches;
  q.schedule = o.schedule;
  q.recompute = o.recompute;
  q.offload = o.offload;
  q.optimizer = o.optimizer;
  q.unlimited = true;
  auto a = launcher::query_layouts(q);
  if (!a) return a.error();
  return launcher::candidate_json(a->candidates.front());
}

// The graph MODEL|RECIPE names, and what to call it.
Result<std::pair<std::string, recipes::Graph>> resolve(const std::string& arg,
                                                       const std::string& input) {
  recipes::Shape shape;
  if (!input.empty()) {
    for (const std::string& part : strings::split(input, ',')) {
      auto v = strings::parse_int(part);
      if (!v || *v < 1 || *v > (int64_t{1} << 20))
        return invalid_input("--input: expected sizes such as 3,224,224 or 128, got '" + input +
                             "'");
      shape.push_back(*v);
    }
  }
  if (auto info = recipes::builtin_info(arg)) {
    recipes::BuiltinOptions o;
    o.input = shape;
    return std::make_pair(arg, *recipes::builtin_graph(arg, o));
  }
  auto recipe = recipes::load_recipe(arg);
  if (!recipe) {
    if (recipe.error().kind() == ErrorKind::kNotFound)
      return not_found("'" + arg + "' is neither a built-in model (" +
                       strings::join(recipes::builtin_model_names(), ", ") + ") nor a recipe" +
                       recipes::did_you_mean(arg, recipes::builtin_model_names()));
    return recipe.error();
  }
  if (!shape.empty())
    return invalid_input("--input applies to built-in models; recipe '" + recipe->name +
                         "' takes its data's input " +
                         recipes::describe_shape(recipe->model.graph.input));
  return std::make_pair(recipe->name, recipe->model.graph);
}

// 25557032 -> "25,557,032".
std::string group_digits(int64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0 && s[i - 1] != '-') out.push_back(',');
    out.push_back(s[i]);
  }
  return out;
}

std::string human(double v) {
  char buf[32];
  if (v >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

int run_list(const ModelOptions& o) {
  nlohmann::json out = nlohmann::json::array();
  if (!o.json)
    std::printf("%-12s %-13s %-12s %12s  %s\n", "model", "family", "input", "parameters",
                "description");
  for (const auto& m : recipes::builtin_models()) {
    const recipes::GraphInfo info = recipes::analyze_graph(*recipes::builtin_graph(m.name, {}));
    if (o.json) {
      out.push_back({{"name", m.name},
                     {"family", m.family},
                     {"input", m.default_input},
                     {"classes", m.default_classes},
                     {"parameters", info.parameters},
                     {"description", m.description}});
      continue;
    }
    std::printf("%-12s %-13s %-12s %12s  %s\n", m.name.c_str(), m.family.c_str(),
                recipes::describe_shape(m.default_input).c_str(),
                group_digits(info.parameters).c_str(), m.description.c_str());
  }
  if (o.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

int run_show(const ModelOptions& o) {
  auto resolved = resolve(o.model, o.input);
  if (!resolved) return report_error("model show", resolved.error());
  const auto& [name, graph] = *resolved;
  const recipes::GraphInfo info = recipes::analyze_graph(graph);
  if (!info.ok()) {
    const auto& [index, message] = info.problems.front();
    const std::string node = index < graph.nodes.size() ? graph.nodes[index].name : "?";
    return report_error("model show",
                        invalid_input("model '" + name + "': node '" + node + "': " + message));
  }
  nlohmann::json nodes = nlohmann::json::array();
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const recipes::Node& n = graph.nodes[i];
    int64_t params = 0;
    for (const auto& t : info.params)
      if (t.node == static_cast<int>(i)) params += recipes::numel(t.shape);
    std::vector<std::string> from;
    for (int s : info.inputs[i])
      from.push_back(s < 0 ? std::string(recipes::kGraphInput)
                           : graph.nodes[static_cast<size_t>(s)].name);
    std::vector<recipes::Shape> in;
    for (int s : info.inputs[i])
      in.push_back(s < 0 ? graph.input : info.outputs[static_cast<size_t>(s)]);
    nodes.push_back({{"name", n.name},
                     {"op", recipes::describe_op(n.op, n.attrs)},
                     {"from", from},
                     {"output", info.outputs[i]},
                     {"parameters", params},
                     {"flops", recipes::op_flops(n.op, n.attrs, in, info.outputs[i])}});
  }
  auto memory = memory_terms(o);
  if (!memory) return report_error("model show", memory.error());
  nlohmann::json kernels;
  if (o.kernels) {
    auto k = measure_kernels(o);
    if (!k) return report_error("model show --kernels", k.error());
    kernels = std::move(*k);
  }
  if (o.json) {
    nlohmann::json j = {{"model", name},
                        {"memory", *memory},
                        {"input", graph.input},
                        {"output", info.output()},
                        {"parameters", info.parameters},
                        {"state", info.state_floats},
                        {"flops_per_sample", info.flops_per_sample},
                        {"nodes", nodes}};
    if (o.kernels) j["kernels"] = kernels;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model %s: input %s -> output %s\n\n", name.c_str(),
              recipes::describe_shape(graph.input).c_str(),
              recipes::describe_shape(info.output()).c_str());
  int name_w = 4, op_w = 2;  // columns as wide as their longest entry
  for (const auto& n : nodes) {
    name_w = std::max(name_w, static_cast<int>(n["name"].get<std::string>().size()));
    op_w = std::max(op_w, static_cast<int>(n["op"].get<std::string>().size()));
  }
  std::printf("%-*s  %-*s  %-14s %12s %9s\n", name_w, "node", op_w, "op", "output", "parameters",
              "flops");
  for (const auto& n : nodes) {
    const std::string op = n["op"].get<std::string>();
    std::printf("%-*s  %-*s  %-14s %12s %9s\n", name_w, n["name"].get<std::string>().c_str(), op_w,
                op.c_str(), recipes::describe_shape(n["output"].get<recipes::Shape>()).c_str(),
                n["parameters"].get<int64_t>() > 0
                    ? group_digits(n["parameters"].get<int64_t>()).c_str()
                    : "",
                human(n["flops"].get<double>()).c_str());
  }
  std::printf("\n%s parameters, %s FLOPs per sample (forward)%s\n",
              group_digits(info.parameters).c_str(), human(info.flops_per_sample).c_str(),
              info.state_floats > 0
                  ? (", " + group_digits(info.state_floats) + " batch-norm statistics").c_str()
                  : "");
  const nlohmann::json& stages = (*memory)["stages"];
  std::printf("\nmemory per rank, %s samples per replica, %s:\n",
              group_digits((*memory)["replica_batch"].get<int64_t>()).c_str(),
              (*memory)["layout"]["reason"].get<std::string>().c_str());
  std::printf("  %-8s %11s %11s %11s %11s %11s %11s %13s %11s %11s\n", "stage", "parameters",
              "gradients", "optimizer", "state", "activations", "workspace", "communication",
              "checkpoint", "total");
  for (size_t s = 0; s < stages.size(); ++s) {
    const nlohmann::json& t = stages[s]["terms"];
    auto mem = [&](const char* k) { return strings::format_bytes(t[k].get<uint64_t>()); };
    std::printf("  %-8s %11s %11s %11s %11s %11s %11s %13s %11s %11s\n",
                stages.size() == 1 ? "all" : std::to_string(s).c_str(), mem("parameters").c_str(),
                mem("gradients").c_str(), mem("optimizer").c_str(), mem("state").c_str(),
                mem("activations").c_str(), mem("workspace").c_str(), mem("communication").c_str(),
                mem("checkpoint").c_str(), mem("total").c_str());
    if (t.value("offloaded_to_host", 0) > 0)
      std::printf("  %-8s optimizer state in host memory, not in the total: %s\n", "",
                  mem("offloaded_to_host").c_str());
  }
  if (o.kernels) {
    std::printf(
        "\nkernels at batch %lld on %d thread(s), %s, measured here in %.1f s (a node "
        "with one kernel is not listed):\n%s",
        static_cast<long long>(o.kernel_batch), o.threads,
        kernels.value("precision", "fp32").c_str(), kernels.value("seconds", 0.0),
        kernels.value("text", "").c_str());
  }
  return 0;
}

int run_forward(const ModelOptions& o) {
  auto worker = sibling_program("dltune-worker");
  if (!worker) return report_error("model forward", worker.error());
  std::vector<std::string> argv = {*worker, "forward"};
  if (recipes::builtin_info(o.model)) {
    argv.insert(argv.end(), {"--model", o.model});
  } else {
    auto path = recipes::resolve_recipe_path(o.model);
    if (!path)
      return report_error(
          "model forward",
          not_found("'" + o.model + "' is neither a built-in model (" +
                    strings::join(recipes::builtin_model_names(), ", ") + ") nor a recipe"));
    argv.insert(argv.end(), {"--recipe", *path});
  }
  argv.insert(argv.end(), {"--weights", o.weights, "--input", o.tensors, "-o", o.output});
  auto rc = run_to_completion(argv, "model forward");
  if (!rc) return report_error("model forward", rc.error());
  return *rc;
}

}  // namespace

void setup_model(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("model", "List, show or run the networks the engine trains");
  cmd->require_subcommand(1);
  auto opts = std::make_shared<ModelOptions>();

  auto* list = cmd->add_subcommand("list", "List the built-in models");
  list->add_flag("--json", opts->json, "Print as JSON");
  list->callback([exit_code, opts] { *exit_code = run_list(*opts); });

  auto* show = cmd->add_subcommand(
      "show", "A model's nodes: op, inputs, output shape, parameters and FLOPs per sample");
  show->add_option("MODEL", opts->model, "A built-in model, a recipe file or a bundled recipe")
      ->required();
  show->add_option("--input", opts->input,
                   "Per-sample input of a built-in, e.g. 3,64,64 (images) or 256 (tokens)");
  show->add_flag("--json", opts->json, "Print as JSON (\"parameters\" is the total)");
  show->add_option("--batch", opts->batch, "samples per step for the memory terms (default 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  show->add_option("--ranks", opts->ranks, "ranks for the memory terms' layout (default 1)")
      ->check(CLI::Range(1, 1 << 20));
  show->add_option("--stages", opts->stages, "pipeline stages (default: auto)")
      ->check(CLI::Range(1, 4096));
  show->add_option("--microbatches", opts->microbatches, "micro-batches per step")
      ->check(CLI::Range(1, 1 << 20));
  show->add_option("--schedule", opts->schedule, "gpipe | 1f1b | async");
  show->add_option("--recompute", opts->recompute, "none | stage");
  show->add_option("--offload", opts->offload,
                   "none | optimizer (the GPU engine's optimizer state in host memory)");
  show->add_option("--optimizer", opts->optimizer, "sgd | adamw (default sgd)");
  show->add_flag("--kernels", opts->kernels,
                 "measure each node's kernels here (the engine's, oneDNN's) and show the choice");
  show->add_option("--kernel-batch", opts->kernel_batch, "--kernels: samples per timed pass")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  show->add_option("--threads", opts->threads, "--kernels: threads (default 1)")
      ->check(CLI::Range(1, 1024));
  show->add_option("--precision", opts->precision, "--kernels: fp32 | bf16 (default the recipe's)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  show->callback([exit_code, opts] { *exit_code = run_show(*opts); });

  auto* forward = cmd->add_subcommand(
      "forward", "Evaluation-mode logits of a model for the tensor 'input' of a safetensors file");
  forward->add_option("MODEL", opts->model, "A built-in model, a recipe file or a bundled recipe")
      ->required();
  forward->add_option("--weights", opts->weights, "safetensors file of the model's tensors")
      ->required();
  forward->add_option("--input", opts->tensors, "safetensors file holding the tensor 'input'")
      ->required();
  forward->add_option("-o,--output", opts->output, "safetensors file to write 'logits' to")
      ->required();
  forward->callback([exit_code, opts] { *exit_code = run_forward(*opts); });
}

}  // namespace dltune::cli
