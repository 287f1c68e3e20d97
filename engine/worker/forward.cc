// `dltune-worker forward`: a network's evaluation-mode logits for a batch, from safetensors in and
// out (what `dltune model forward` runs; the launcher itself links no BLAS).
//
//   dltune-worker forward (--model NAME | --recipe FILE) --weights W.safetensors
//                         --input X.safetensors -o Y.safetensors
//
// X holds the tensor `input` (N, C, H, W) of images or (N, T) of token ids; Y gets `logits`
// (N, classes) or (N, T, vocab). A built-in model is built for X's per-sample shape (ResNets and
// VGG take any image size large enough); a recipe's graph must take X's shape. Every tensor of
// the network must be in W with its shape (torchvision state_dicts load unchanged). Bad files
// exit 2 with one sentence naming the tensor, and nothing is written.
#include "engine/worker/forward.h"

#include <cstdio>

#include "common/strings.h"
#include "engine/core/tensor.h"
#include "engine/graph/model.h"
#include "engine/io/safetensors.h"
#include "recipes/model/builtins.h"
#include "recipes/recipe.h"

namespace dltune::engine {
namespace {

struct ForwardOptions {
  std::string model, recipe, weights, input, output;
};

ForwardOptions& options() {
  static ForwardOptions o;
  return o;
}

Result<recipes::Graph> graph_for(const ForwardOptions& o, const recipes::Shape& sample) {
  if (!o.recipe.empty()) {
    auto r = recipes::load_recipe(o.recipe);
    if (!r) return r.error();
    if (r->model.graph.input != sample)
      return invalid_input("tensor 'input' has samples of " + recipes::describe_shape(sample) +
                           " but recipe '" + r->name + "' takes " +
                           recipes::describe_shape(r->model.graph.input));
    return r->model.graph;
  }
  auto info = recipes::builtin_info(o.model);
  if (!info)
    return not_found("unknown model '" + o.model + "'; built-in models are " +
                     strings::join(recipes::builtin_model_names(), ", "));
  const bool tokens = info->family == "gpt";
  if (tokens && sample.size() != 1)
    return invalid_input("tensor 'input' must hold token ids (N, T) for " + o.model + ", got " +
                         recipes::describe_shape(sample) + " per sample");
  recipes::BuiltinOptions b;
  b.input = sample;
  return *recipes::builtin_graph(o.model, b);
}

// A file that cannot be read is bad input here: the user named it.
Error as_input_error(const Error& e) {
  return e.kind() == ErrorKind::kIo ? invalid_input(e.message()) : e;
}

Status run_forward(const ForwardOptions& o) {
  auto x = read_safetensors(o.input);
  if (!x) return as_input_error(x.error());
  auto it = x->find("input");
  if (it == x->end())
    return invalid_input("safetensors file '" + o.input + "' has no tensor named 'input'");
  const StoredTensor& in = it->second;
  if (in.shape.size() < 2 || in.shape[0] < 1)
    return invalid_input("tensor 'input' must be (N, ...) with N >= 1 samples, got " +
                         recipes::describe_shape(in.shape));
  const recipes::Shape sample(in.shape.begin() + 1, in.shape.end());
  auto graph = graph_for(o, sample);
  if (!graph) return graph.error();
  const std::string name = o.recipe.empty() ? o.model : o.recipe;
  auto model = Model::build(*graph, name);
  if (!model) return model.error();
  if (Status st = load_safetensors_into(*model, o.weights); !st) return as_input_error(st.error());
  const int n = static_cast<int>(in.shape[0]);
  model->reserve(n);
  const float* y = model->forward(in.values.data(), n, false);
  TensorFile out;
  StoredTensor logits;
  logits.dtype = "F32";
  logits.shape = {in.shape[0]};
  for (int64_t d : model->output_shape()) logits.shape.push_back(d);
  logits.values.assign(y, y + n * model->output_numel());
  out.emplace("logits", std::move(logits));
  return write_safetensors(o.output, out, {{"model", name}, {"producer", "dltune model forward"}});
}

}  // namespace

CLI::App* add_forward_command(CLI::App& app) {
  ForwardOptions& o = options();
  auto* cmd = app.add_subcommand(
      "forward", "evaluation-mode logits of a model for the tensor 'input' of a safetensors file");
  auto* model = cmd->add_option("--model", o.model, "a built-in model");
  cmd->add_option("--recipe", o.recipe, "a recipe file or bundled recipe name")->excludes(model);
  cmd->add_option("--weights", o.weights, "safetensors file of the model's tensors")->required();
  cmd->add_option("--input", o.input, "safetensors file with the tensor 'input'")->required();
  cmd->add_option("-o,--output", o.output, "safetensors file to write 'logits' to")->required();
  return cmd;
}

int run_forward_command() {
  const ForwardOptions& o = options();
  if (o.model.empty() == o.recipe.empty()) {
    std::fprintf(stderr, "dltune model forward: give a model name or a recipe\n");
    return 2;
  }
  set_blas_threads(1);
  auto st = run_forward(o);
  if (!st) {
    std::fprintf(stderr, "dltune model forward: %s\n", st.error().message().c_str());
    return st.error().exit_code();
  }
  return 0;
}

}  // namespace dltune::engine
