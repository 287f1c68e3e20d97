// Cross-field checks: the combinations no single key can see (recipes/README.md, "Checks").
#include <filesystem>

#include "recipes/data_layout.h"
#include "recipes/datasets.h"
#include "recipes/recipe_parse_internal.h"

namespace dltune::recipes::internal {
namespace {

using Checks = std::vector<Check>;
std::string str(int64_t v) { return std::to_string(v); }

// imagefolder and tokens: the layout is there (recipes/data_layout.h), with two classes or
// more and the held-out part the recipe asks for. The class folders are listed, the token
// shards' headers read; the images themselves are `dltune data check`'s.
void check_real_data(const DataConfig& d, Checks& out) {
  if (d.path.empty()) return;  // the parser reported the missing path
  if (d.kind == DataKind::kImageFolder) {
    auto classes = imagefolder_classes(imagefolder_train_root(d.path));
    if (!classes)
      out.push_back({"data.path", classes.error().message(), {"data"}});
    else if (classes->size() < 2)
      out.push_back({"data.path",
                     "image folder '" + imagefolder_train_root(d.path) +
                         "' has one class folder ('" + classes->front() +
                         "'): a classifier needs two classes or more",
                     {"data"}});
    else if (d.heldout_test_files && imagefolder_val_root(d.path).empty())
      out.push_back({"data.heldout",
                     "'val' needs the held-out images in '" + d.path + "/val' beside '" + d.path +
                         "/train'; give a share such as 0.1 to hold out training images",
                     {"data"}});
    return;
  }
  if (d.kind != DataKind::kTokens) return;
  auto shards = token_shards(d.path);
  if (!shards) {
    out.push_back({"data.path", shards.error().message(), {"data"}});
    return;
  }
  auto split = split_tokens(*shards, d.context, d.heldout_test_files, d.heldout_fraction);
  if (!split) out.push_back({"data.heldout", split.error().message(), {"data"}});
}

void check_training(const Recipe& r, Checks& out) {
  const TrainingConfig& t = r.training;
  const int64_t ranks = r.launch.ranks;
  if (t.epochs > 0 && t.steps > 0)
    out.push_back({"training.steps", "give epochs or steps, not both", {"training"}});
  if (t.epochs <= 0 && t.steps <= 0)
    out.push_back({"training", "needs epochs or steps", {"training"}});
  if (t.per_rank_batch > 0 && t.global_batch > 0)
    out.push_back({"training.batch.global",
                   "give per_rank (weak scaling's unit) or global (strong scaling's), not both",
                   {"training.batch"}});
  const int64_t max = t.max_global_batch;
  if (max > 0 && t.per_rank_batch > max)
    out.push_back({"training.batch.per_rank",
                   "per-rank batch " + str(t.per_rank_batch) + " exceeds max_global " + str(max),
                   {"training.batch"}});
  else if (max > 0 && ranks > 0 && t.per_rank_batch * ranks > max)
    out.push_back({"training.batch.per_rank",
                   "per_rank " + str(t.per_rank_batch) + " x launch.ranks " + str(ranks) + " = " +
                       str(t.per_rank_batch * ranks) + " exceeds max_global " + str(max) +
                       "; lower per_rank or ranks, or raise max_global",
                   {"training.batch", "launch.ranks"}});
  if (max > 0 && t.global_batch > max)
    out.push_back({"training.batch.global",
                   "global batch " + str(t.global_batch) + " exceeds max_global " + str(max),
                   {"training.batch"}});
  if (t.global_batch > 0 && ranks > 0 && t.global_batch < ranks)
    out.push_back({"training.batch.global",
                   "global batch " + str(t.global_batch) + " is smaller than launch.ranks " +
                       str(ranks) + ": some ranks would get no samples",
                   {"training.batch", "launch.ranks"}});
  else if (t.global_batch > 0 && ranks > 0 && t.global_batch % ranks != 0)
    out.push_back({"training.batch.global",
                   "global batch " + str(t.global_batch) + " does not split evenly over " +
                       "launch.ranks " + str(ranks) + "; use a multiple of " + str(ranks),
                   {"training.batch", "launch.ranks"}});
  const ScheduleConfig& s = t.schedule;
  if (t.steps > 0 && s.warmup_steps >= t.steps)
    out.push_back({"training.schedule.warmup_steps",
                   "warmup of " + str(s.warmup_steps) +
                       " steps would not end before the last "
                       "step (steps: " +
                       str(t.steps) + ")",
                   {"training.schedule", "training.steps"}});
  if (t.steps > 0 && s.kind == ScheduleKind::kStep && s.step_size >= t.steps)
    out.push_back({"training.schedule.step_size",
                   "step_size " + str(s.step_size) + " >= steps " + str(t.steps) +
                       ": the learning rate would never drop; use a smaller step_size or "
                       "kind constant",
                   {"training.schedule", "training.steps"}});
  if (t.steps > 0 && t.checkpoint_every > t.steps)
    out.push_back({"training.checkpoint_every",
                   "checkpoint_every " + str(t.checkpoint_every) + " exceeds steps " +
                       str(t.steps) + ": no checkpoint would be written before the end",
                   {"training.checkpoint_every", "training.steps"}});
}

// The global batch one step takes when the recipe pins it down, else 0.
int64_t known_global_batch(const Recipe& r) {
  if (r.training.global_batch > 0) return r.training.global_batch;
  return r.training.per_rank_batch * std::max<int64_t>(r.launch.ranks, 1);
}

void check_data(const Recipe& r, Checks& out) {
  const DataConfig& d = r.data;
  const int64_t batch = known_global_batch(r);
  const auto train =
      static_cast<int64_t>(static_cast<double>(d.samples) * (1.0 - d.heldout_fraction));
  if (d.samples > 0 && batch > 0 && train < batch)
    out.push_back({"data.samples",
                   str(d.samples) + " samples leave " + str(train) +
                       " for training, fewer than one global batch of " + str(batch),
                   {"data", "training.batch", "launch.ranks"}});
  if (d.kind == DataKind::kText && !d.path.empty()) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto size = fs::is_regular_file(d.path, ec) ? fs::file_size(d.path, ec) : 0;
    if (!fs::is_regular_file(d.path, ec))
      out.push_back({"data.path",
                     "file '" + d.path +
                         "' does not exist; point data.path at a text file "
                         "(any file of bytes works, e.g. /usr/share/common-licenses/GPL-3)",
                     {"data"}});
    else if (static_cast<int64_t>(size) < 4 * (d.context + 1))
      out.push_back({"data.path",
                     "file '" + d.path + "' has " + str(static_cast<int64_t>(size)) +
                         " bytes, too few for samples of context " + str(d.context) +
                         "; use a longer file or a shorter data.context",
                     {"data"}});
  }
  check_real_data(d, out);
  if (!r.training.init_from.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(r.training.init_from, ec))
      out.push_back({"training.init_from",
                     "file '" + r.training.init_from +
                         "' does not exist; give a safetensors file of this model's weights",
                     {"training.init_from"}});
  }
  if (d.kind != DataKind::kMnist && d.kind != DataKind::kCifar10) return;
  if (d.path.empty()) return;  // the parser reported the missing path
  namespace fs = std::filesystem;
  std::error_code ec;
  // Both messages say where the data comes from and where it goes (recipes/datasets.h), and
  // how to point the recipe elsewhere without copying it.
  const std::string elsewhere =
      " (or, where the files are elsewhere: dltune launch RECIPE --set data.path=DIR)";
  if (!fs::is_directory(d.path, ec)) {
    out.push_back({"data.path",
                   "directory '" + d.path +
                       "' does not exist: " + dataset_fetch_hint(d.kind, d.path) + elsewhere,
                   {"data"}});
    return;
  }
  std::vector<std::string> files, missing;
  for (const DatasetFile& f : dataset_files(d)) {
    files.push_back(f.name);
    if (!fs::is_regular_file(fs::path(d.path) / f.name, ec)) missing.push_back(f.name);
  }
  if (!missing.empty())
    out.push_back({"data.path",
                   "'" + d.path + "' lacks " + strings::join(missing, ", ") + "; " +
                       std::string(data_kind_name(d.kind)) + " needs " +
                       strings::join(files, ", ") +
                       " there (uncompressed): " + dataset_fetch_hint(d.kind, d.path),
                   {"data"}});
}

void check_model(const Recipe& r, Checks& out) {
  const ModelConfig& m = r.model;
  const std::vector<std::string> deps = {"model", "data"};
  if (m.dtype != "f32")
    out.push_back({"model.dtype", "expected f32, got \"" + m.dtype + "\"", {"model.dtype"}});
  if (!m.input.empty() && m.input != r.data.shape) {
    out.push_back({"model.input",
                   "input " + describe_shape(m.input) + " does not match the data's samples " +
                       describe_shape(r.data.shape) + " (" +
                       std::string(data_kind_name(r.data.kind)) + ")",
                   deps});
    return;
  }
  if (m.graph.nodes.empty()) {
    out.push_back({"model", "has no layers", deps});
    return;
  }
  auto node_key = [&](size_t i) {
    const std::string index = "[" + str(static_cast<int64_t>(i)) + "]";
    return m.form == ModelForm::kLayers  ? "model.layers" + index
           : m.form == ModelForm::kNodes ? "model.nodes" + index
                                         : std::string("model");
  };
  const GraphInfo info = analyze_graph(m.graph);
  for (const auto& [index, message] : info.problems) {
    const std::string where =
        m.form != ModelForm::kBuiltin
            ? ""
            : "built-in " + m.builtin + ", node " +
                  (index < m.graph.nodes.size() ? m.graph.nodes[index].name : "?") + ": ";
    out.push_back({node_key(index), where + message, deps});
  }
  if (!info.ok()) return;
  const Shape& last = info.output();
  const size_t last_node = m.graph.nodes.size() - 1;
  if (r.data.kind == DataKind::kText || r.data.kind == DataKind::kTokens) {
    const bool text = r.data.kind == DataKind::kText;
    const Shape want = {r.data.context, r.data.classes};
    if (last != want)
      out.push_back({node_key(last_node),
                     "the model ends with " + describe_shape(last) + " outputs but " +
                         (text ? "text" : "token") + " data needs " + describe_shape(want) +
                         (text ? " (a score for every byte value at every position)"
                               : " (a score for every GPT-2 token at every position)"),
                     deps});
    return;
  }
  if (last.size() != 1 || last[0] != r.data.classes)
    out.push_back({node_key(last_node),
                   "the model ends with " + describe_shape(last) + " outputs but the data has " +
                       str(r.data.classes) +
                       " classes; end with linear {out: " + str(r.data.classes) + "}",
                   deps});
}

void check_launch(const Recipe& r, Checks& out) {
  const LaunchConfig& l = r.launch;
  if (l.ranks > 0 && l.min_ranks > l.ranks)
    out.push_back({"launch.min_ranks",
                   str(l.min_ranks) + " is more than launch.ranks " + str(l.ranks) +
                       ": a job never continues on more ranks than it has",
                   {"launch"}});
  if (l.ranks > 0 && l.ranks_per_node > l.ranks)
    out.push_back(
        {"launch.ranks_per_node",
         str(l.ranks_per_node) + " ranks per node is more than launch.ranks " + str(l.ranks),
         {"launch"}});
  else if (l.ranks > 0 && l.ranks_per_node > 0 && l.ranks % l.ranks_per_node != 0)
    out.push_back({"launch.ranks_per_node",
                   "launch.ranks " + str(l.ranks) + " does not fill whole nodes of " +
                       str(l.ranks_per_node) + " ranks; use a divisor of " + str(l.ranks),
                   {"launch"}});
  if (l.threads_per_rank > 1024)
    out.push_back({"launch.threads_per_rank",
                   str(l.threads_per_rank) + " threads per rank: at most 1024",
                   {"launch"}});
  if (r.comm.backend == "thread" && l.ranks_per_node > 0 && l.ranks > l.ranks_per_node)
    out.push_back({"comm.backend",
                   "thread runs every rank in one process, so all launch.ranks must be on one "
                   "node; use mpi or auto",
                   {"comm.backend", "launch"}});
  if (r.tune.objective == Objective::kTimeToAccuracy && r.tune.target_accuracy <= 0)
    out.push_back(
        {"tune.target_accuracy", "time-to-accuracy needs a target accuracy in (0, 1]", {"tune"}});
  const ParallelConfig& p = r.training.parallel;
  if (p.stages > 1 && l.ranks > 0 && l.ranks % p.stages != 0)
    out.push_back({"training.parallel.stages",
                   str(p.stages) + " stages do not divide launch.ranks " + str(l.ranks) +
                       " (ranks = replicas x stages)",
                   {"training.parallel", "launch"}});
  if (p.stages > 1 && r.comm.backend == "nccl")
    out.push_back({"training.parallel.stages",
                   "pipeline stages run on the CPU engine only for now; use comm.backend auto or "
                   "mpi, or one stage",
                   {"training.parallel", "comm.backend"}});
  if (p.offload == "optimizer" && r.comm.backend != "nccl")
    out.push_back({"training.parallel.offload",
                   "offload optimizer moves the GPU engine's optimizer state to host memory; "
                   "this recipe trains on the CPU (comm.backend " +
                       r.comm.backend +
                       "), whose state is in host memory already: use nccl or "
                       "leave offload auto",
                   {"training.parallel", "comm.backend"}});
  const int64_t replica_batch = r.training.per_rank_batch > 0 ? r.training.per_rank_batch : 0;
  if (p.microbatches > 0 && replica_batch > 0 && p.microbatches > replica_batch)
    out.push_back({"training.parallel.microbatches",
                   str(p.microbatches) + " micro-batches are more than the " + str(replica_batch) +
                       " samples of a replica's batch",
                   {"training.parallel", "training.batch"}});
}

}  // namespace

std::vector<Check> cross_checks(const Recipe& recipe) {
  Checks out;
  check_training(recipe, out);
  check_data(recipe, out);
  check_model(recipe, out);
  check_launch(recipe, out);
  return out;
}

std::vector<Problem> locate_checks(const Recipe& recipe, const std::vector<Check>& checks,
                                   const SourceMap* where) {
  std::vector<Problem> out;
  for (const Check& c : checks) {
    Problem p{recipe.source_path.empty() ? "<recipe>" : recipe.source_path, 0, 0, c.key, c.message};
    std::string key = c.key;
    while (where != nullptr && !key.empty()) {
      if (auto it = where->find(key); it != where->end()) {
        p.line = it->second.first;
        p.column = it->second.second;
        break;
      }
      const size_t cut = key.find_last_of(".[");
      key = cut == std::string::npos ? "" : key.substr(0, cut);
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace dltune::recipes::internal

namespace dltune::recipes {

std::vector<Problem> validate_recipe(const Recipe& recipe, const SourceMap* where) {
  return internal::locate_checks(recipe, internal::cross_checks(recipe), where);
}

}  // namespace dltune::recipes
