// Parsing of the `training`, `comm`, `tune` and `launch` sections and of the whole file.
#include <algorithm>
#include <filesystem>
#include <limits>

#include "common/paths.h"
#include "recipes/plan.h"
#include "recipes/recipe_parse_internal.h"

namespace dltune::recipes::internal {
namespace {

void parse_batch(YamlReader& r, const Fields& parent, TrainingConfig* t) {
  const Fields::Entry* e = parent.find("batch");
  if (e == nullptr) return;
  if (e->value.IsScalar()) {
    if (e->value.Scalar() != "auto")
      r.report(*e, "expected 'auto' or a mapping such as {per_rank: 64} or {global: 128}, " +
                       describe_value(e->value));
    return;
  }
  Fields f;
  if (!r.fields(e->value, e->path, {"per_rank", "global", "max_global"}, &f)) return;
  r.get_int_or_auto(f, "per_rank", &t->per_rank_batch);
  r.get_int_or_auto(f, "global", &t->global_batch);
  r.get_int(f, "max_global", 1, kMaxInt, &t->max_global_batch);
  if (t->per_rank_batch > 0 && t->global_batch > 0)
    r.report(*f.find("global"),
             "give per_rank (weak scaling's unit) or global (strong scaling's), not both");
}

void parse_optimizer(YamlReader& r, const Fields& parent, OptimizerConfig* o) {
  const Fields::Entry* e = parent.find("optimizer");
  if (e == nullptr) return;
  Fields f;
  if (!r.fields(e->value, e->path,
                {"kind", "lr", "momentum", "weight_decay", "lr_reference_batch", "lr_scaling",
                 "betas", "eps", "clip_grad_norm"},
                &f))
    return;
  r.get_choice(f, "kind", {"sgd", "adamw"}, &o->kind);
  r.get_number(f, "lr", 0, true, kInf, false, &o->lr);
  if (const Fields::Entry* m = f.find("momentum"); m != nullptr && o->kind != "sgd")
    r.report(m->key, m->path, "only optimizer kind sgd takes 'momentum'; adamw has betas");
  r.get_number(f, "momentum", 0, false, 1, true, &o->momentum);
  if (const Fields::Entry* b = f.find("betas")) {
    if (o->kind != "adamw") {
      r.report(b->key, b->path, "only optimizer kind adamw takes 'betas'");
    } else if (!b->value.IsSequence() || b->value.size() != 2) {
      r.report(*b, "expected [beta1, beta2] such as [0.9, 0.95], " + describe_value(b->value));
    } else {
      Fields pair;  // read both through the number checks, as a tiny mapping
      YAML::Node m;
      m["beta1"] = b->value[0];
      m["beta2"] = b->value[1];
      if (r.fields(m, b->path, {"beta1", "beta2"}, &pair)) {
        r.get_number(pair, "beta1", 0, false, 1, true, &o->beta1);
        r.get_number(pair, "beta2", 0, false, 1, true, &o->beta2);
      }
    }
  }
  if (const Fields::Entry* eps = f.find("eps"); eps != nullptr && o->kind != "adamw")
    r.report(eps->key, eps->path, "only optimizer kind adamw takes 'eps'");
  r.get_number(f, "eps", 0, true, 1, false, &o->eps);
  r.get_number(f, "clip_grad_norm", 0, true, kInf, false, &o->clip_grad_norm);
  r.get_number(f, "weight_decay", 0, false, kInf, false, &o->weight_decay);
  r.get_int(f, "lr_reference_batch", 1, kMaxInt, &o->lr_reference_batch);
  std::string rule = "auto";
  if (r.get_choice(f, "lr_scaling", {"auto", "linear", "sqrt", "none"}, &rule))
    o->lr_scaling = *parse_lr_scaling(rule);
}

// `parallel: auto | data | pipeline | hybrid`, or a mapping with `mode` and the layout's keys.
void parse_parallel(YamlReader& r, const Fields& parent, ParallelConfig* p) {
  const Fields::Entry* e = parent.find("parallel");
  if (e == nullptr) return;
  const std::vector<std::string> modes = {"auto", "data", "pipeline", "hybrid"};
  if (e->value.IsScalar()) {
    r.scalar_choice(e->value, e->path, modes, &p->mode);
    return;
  }
  Fields f;
  if (!r.fields(e->value, e->path,
                {"mode", "stages", "microbatches", "schedule", "recompute", "offload"}, &f))
    return;
  r.get_choice(f, "mode", modes, &p->mode);
  r.get_int_or_auto(f, "stages", &p->stages);
  r.get_int_or_auto(f, "microbatches", &p->microbatches);
  r.get_choice(f, "schedule", {"auto", "gpipe", "1f1b", "async"}, &p->schedule);
  r.get_choice(f, "recompute", {"auto", "none", "stage"}, &p->recompute);
  r.get_choice(f, "offload", {"auto", "none", "optimizer"}, &p->offload);
  if (p->mode == "data") {
    for (const char* key : {"stages", "schedule", "recompute"})
      if (const Fields::Entry* k = f.find(key)) {
        const bool pipelined = std::string(key) == "stages"     ? p->stages > 1
                               : std::string(key) == "schedule" ? p->schedule != "auto"
                                                                : p->recompute == "stage";
        if (pipelined)
          r.report(k->key, k->path,
                   std::string("mode data runs one stage; '") + key +
                       "' needs mode pipeline, hybrid or auto");
      }
  }
  if (p->mode == "pipeline" || p->mode == "hybrid")
    if (const Fields::Entry* k = f.find("stages"); k != nullptr && p->stages == 1)
      r.report(*k, "mode " + p->mode + " needs at least 2 stages (or 'auto'), got 1");
}

void parse_schedule(YamlReader& r, const Fields& parent, ScheduleConfig* s) {
  const Fields::Entry* e = parent.find("schedule");
  if (e == nullptr) return;
  const std::vector<std::string> kinds = {"constant", "step", "cosine"};
  std::string kind = "constant";
  Fields f;
  if (e->value.IsScalar()) {
    if (!r.scalar_choice(e->value, e->path, kinds, &kind)) return;
  } else {
    if (!r.fields(e->value, e->path, {"kind", "warmup_steps", "step_size", "gamma", "min_lr"}, &f))
      return;
    if (!r.get_choice(f, "kind", kinds, &kind)) return;
  }
  s->kind = kind == "step"     ? ScheduleKind::kStep
            : kind == "cosine" ? ScheduleKind::kCosine
                               : ScheduleKind::kConstant;
  auto only_for = [&](const char* key, const char* which) {
    if (const Fields::Entry* k = f.find(key); k != nullptr && kind != which)
      r.report(k->key, k->path,
               std::string("only schedule kind ") + which + " takes '" + key + "', not " + kind);
  };
  only_for("step_size", "step");
  only_for("gamma", "step");
  only_for("min_lr", "cosine");
  r.get_int(f, "warmup_steps", 0, kMaxInt, &s->warmup_steps);
  if (kind == "step") {
    if (!f.has("step_size"))
      r.report(e->value, e->path, "kind step needs 'step_size': steps between lr drops");
    r.get_int(f, "step_size", 1, kMaxInt, &s->step_size);
    r.get_number(f, "gamma", 0, true, 1, true, &s->gamma);
  }
  if (kind == "cosine") r.get_number(f, "min_lr", 0, false, kInf, false, &s->min_lr);
}

}  // namespace

void parse_training(YamlReader& r, const YAML::Node& node, const std::string& base_dir,
                    TrainingConfig* t) {
  Fields f;
  if (!r.fields(node, "training",
                {"epochs", "steps", "batch", "scaling", "optimizer", "schedule", "checkpoint_every",
                 "checkpoint_every_seconds", "seed", "init_from", "parallel", "precision"},
                &f))
    return;
  r.get_int(f, "epochs", 1, kMaxInt, &t->epochs);
  r.get_int(f, "steps", 1, kMaxInt, &t->steps);
  if (f.has("epochs") && f.has("steps"))
    r.report(*f.find("steps"), "give epochs or steps, not both");
  if (!f.has("epochs") && !f.has("steps")) t->epochs = 1;
  parse_batch(r, f, t);
  std::string scaling = "auto";
  if (r.get_choice(f, "scaling", {"auto", "strong", "weak"}, &scaling))
    t->scaling = *parse_scaling(scaling);
  parse_optimizer(r, f, &t->optimizer);
  parse_schedule(r, f, &t->schedule);
  parse_parallel(r, f, &t->parallel);
  r.get_choice(f, "precision", {"fp32", "bf16", "auto"}, &t->precision);
  r.get_int(f, "checkpoint_every", 0, kMaxInt, &t->checkpoint_every);
  r.get_number(f, "checkpoint_every_seconds", 0, false, 1e7, false, &t->checkpoint_every_seconds);
  int64_t seed = static_cast<int64_t>(t->seed);
  if (r.get_int(f, "seed", 0, std::numeric_limits<int64_t>::max(), &seed))
    t->seed = static_cast<uint64_t>(seed);
  if (r.get_string(f, "init_from", &t->init_from) && !t->init_from.empty()) {
    std::filesystem::path p(t->init_from);
    if (p.is_relative()) p = std::filesystem::absolute(std::filesystem::path(base_dir) / p);
    t->init_from = p.lexically_normal().string();
  }
}

void parse_comm(YamlReader& r, const YAML::Node& node, CommConfig* c) {
  Fields f;
  if (!r.fields(node, "comm", {"backend", "allreduce", "bucket", "overlap"}, &f)) return;
  r.get_choice(f, "backend", {"auto", "mpi", "thread", "nccl"}, &c->backend);
  std::vector<std::string> algos = algorithm_names();
  algos.insert(algos.begin(), "auto");
  std::string algo = "auto";
  if (r.get_choice(f, "allreduce", algos, &algo) && algo != "auto")
    c->allreduce = parse_algorithm(algo);
  r.get_bytes_or_auto(f, "bucket", kMinPlanBucketBytes, kMaxPlanBucketBytes, &c->bucket_bytes);
  std::string overlap = "auto";
  if (r.get_choice(f, "overlap", {"auto", "on", "off", "true", "false"}, &overlap))
    c->overlap = overlap == "auto"                        ? Overlap::kAuto
                 : (overlap == "on" || overlap == "true") ? Overlap::kOn
                                                          : Overlap::kOff;
}

void parse_tune(YamlReader& r, const YAML::Node& node, TuneConfig* t) {
  Fields f;
  if (!r.fields(node, "tune", {"budget", "restart_budget", "objective", "target_accuracy"}, &f))
    return;
  r.get_number(f, "budget", 0, false, kMaxTuneBudgetSeconds, false, &t->budget_seconds);
  r.get_number(f, "restart_budget", 0, false, kMaxTuneBudgetSeconds, false,
               &t->restart_budget_seconds);
  std::string objective = "throughput";
  if (r.get_choice(f, "objective", {"throughput", "time-to-accuracy"}, &objective))
    t->objective = objective == "throughput" ? Objective::kThroughput : Objective::kTimeToAccuracy;
  const Fields::Entry* target = f.find("target_accuracy");
  if (objective == "time-to-accuracy" && target == nullptr && f.has("objective"))
    r.report(*f.find("objective"),
             "time-to-accuracy needs tune.target_accuracy, the held-out accuracy to reach");
  if (objective == "throughput" && target != nullptr)
    r.report(target->key, target->path, "only objective time-to-accuracy takes a target");
  r.get_number(f, "target_accuracy", 0, true, 1, false, &t->target_accuracy);
}

void parse_launch(YamlReader& r, const YAML::Node& node, LaunchConfig* l) {
  Fields f;
  if (!r.fields(node, "launch",
                {"ranks", "ranks_per_node", "threads_per_rank", "binding", "memory_per_rank",
                 "baseline", "restarts", "min_ranks", "min_nodes", "spare_nodes"},
                &f))
    return;
  r.get_int_or_auto(f, "ranks", &l->ranks);
  r.get_int_or_auto(f, "ranks_per_node", &l->ranks_per_node);
  r.get_int_or_auto(f, "threads_per_rank", &l->threads_per_rank);
  r.get_choice(f, "binding", {"none", "core", "numa", "auto"}, &l->binding);
  r.get_bytes_or_auto(f, "memory_per_rank", 1 << 20, std::numeric_limits<uint64_t>::max(),
                      &l->memory_per_rank);
  r.get_choice(f, "baseline", {"auto", "measure", "off"}, &l->baseline);
  r.get_int(f, "restarts", 0, kMaxRestarts, &l->restarts);
  r.get_int(f, "min_ranks", 0, 4096, &l->min_ranks);
  r.get_int(f, "min_nodes", 0, 4096, &l->min_nodes);
  r.get_int(f, "spare_nodes", 0, 4096, &l->spare_nodes);
}

}  // namespace dltune::recipes::internal

namespace dltune::recipes {
namespace {

// Reads the top-level mapping into `recipe`.
void parse_document(YamlReader& r, const YAML::Node& root, const std::string& base_dir,
                    Recipe* recipe) {
  using namespace internal;
  if (!root.IsDefined() || root.IsNull()) {
    // An empty document has no position: point at the start of the file.
    r.report_at(1, 1, "recipe", "the file is empty; a recipe needs at least 'model' and 'data'");
    return;
  }
  Fields f;
  if (!r.fields(root, "",
                {"name", "description", "model", "data", "training", "comm", "tune", "launch"}, &f))
    return;
  if (r.get_string(f, "name", &recipe->name) && f.has("name") &&
      !internal::valid_name(recipe->name))
    r.report(*f.find("name"), "'" + recipe->name +
                                  "' may only use letters, digits, '.', '_' and '-' (it names "
                                  "the run directory)");
  r.get_string(f, "description", &recipe->description);
  for (const char* required : {"model", "data"})
    if (!f.has(required))
      r.report(root, required, std::string("missing required section '") + required + "'");
  if (const Fields::Entry* e = f.find("data")) parse_data(r, e->value, base_dir, &recipe->data);
  if (const Fields::Entry* e = f.find("model")) parse_model(r, e->value, &recipe->model);
  build_model_graph(recipe);
  if (const Fields::Entry* e = f.find("training"))
    parse_training(r, e->value, base_dir, &recipe->training);
  else
    recipe->training.epochs = 1;
  if (const Fields::Entry* e = f.find("comm")) parse_comm(r, e->value, &recipe->comm);
  if (const Fields::Entry* e = f.find("tune")) parse_tune(r, e->value, &recipe->tune);
  if (const Fields::Entry* e = f.find("launch")) parse_launch(r, e->value, &recipe->launch);
}

}  // namespace

std::string internal::default_name(const std::string& file, const std::string& fallback) {
  std::string base = file.substr(file.find_last_of('/') + 1);
  if (const size_t dot = base.rfind('.'); dot != std::string::npos && dot > 0) base.resize(dot);
  return base.empty() ? fallback : base;
}

bool internal::valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

void internal::sort_problems(std::vector<Problem>* problems) {
  std::stable_sort(problems->begin(), problems->end(), [](const Problem& a, const Problem& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
}

std::optional<YAML::Node> internal::load_document(std::string_view text, const std::string& file,
                                                  std::vector<Problem>* problems) {
  // Bounds before yaml-cpp builds a tree (and before anything walks one).
  if (auto problem = precheck_yaml(text, file)) {
    problems->push_back(std::move(*problem));
    return std::nullopt;
  }
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    Problem p{file, e.mark.line + 1, e.mark.column + 1, "syntax",
              "YAML syntax error: " + e.msg + "; check the indentation, colons and brackets here"};
    if (e.mark.line < 0) p.line = p.column = 0;
    problems->push_back(std::move(p));
    return std::nullopt;
  }
}

std::string internal::problems_text(const std::vector<Problem>& problems) {
  std::vector<std::string> lines;
  for (const Problem& p : problems) lines.push_back(p.to_string());
  return strings::join(lines, "\n");
}

ParseOutcome parse_recipe(std::string_view yaml_text, const std::string& file,
                          const std::string& base_dir) {
  ParseOutcome out;
  auto root = internal::load_document(yaml_text, file, &out.problems);
  if (!root) return out;
  return internal::parse_recipe_document(*root, file, base_dir);
}

ParseOutcome internal::parse_recipe_document(const YAML::Node& root, const std::string& file,
                                             const std::string& base_dir) {
  ParseOutcome out;
  SourceMap where;
  YamlReader r(file, &out.problems, &where);
  Recipe& recipe = out.recipe;
  recipe.name = internal::default_name(file, "recipe");
  recipe.source_path = file;
  recipe.source_dir = base_dir;
  try {
    parse_document(r, root, base_dir, &recipe);
  } catch (const YAML::Exception& e) {  // not expected: the reader never converts with as<>
    out.problems.push_back({file, 0, 0, "recipe", std::string("cannot read: ") + e.what()});
  }
  // Cross-field checks, except those that depend on a key parsing already complained about.
  std::vector<internal::Check> checks = internal::cross_checks(recipe);
  std::erase_if(checks, [&](const internal::Check& c) {
    for (const Problem& p : out.problems)
      for (const std::string& dep : c.depends)
        if (p.key == "recipe" || p.key == "syntax" || p.key.starts_with(dep) ||
            dep.starts_with(p.key))
          return true;
    return false;
  });
  for (Problem& c : internal::locate_checks(recipe, checks, &where))
    out.problems.push_back(std::move(c));
  internal::sort_problems(&out.problems);
  return out;
}

ParseOutcome parse_recipe_file(const std::string& path) {
  auto text = paths::read_file(path);
  if (!text) {
    ParseOutcome out;
    out.problems.push_back({path, 0, 0, "recipe", text.error().message()});
    return out;
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  return parse_recipe(*text, path, dir.empty() ? "/" : dir);
}

}  // namespace dltune::recipes
