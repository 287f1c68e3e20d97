// Plan <-> JSON (the shape in plan.h). Reading is strict: every field is type-checked, unknown
// keys are errors, and the result must pass validate_plan().
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "common/json_input.h"
#include "common/strings.h"
#include "recipes/plan.h"

namespace dltune::recipes {
namespace {

using nlohmann::json;

// Reads typed fields of JSON objects; keeps the first error.
class Reader {
 public:
  bool ok() const { return !error_.has_value(); }
  Error error() const { return *error_; }
  // The message goes to terminals and may quote the input (a key, an unknown name): whatever
  // a terminal would act on is escaped (common/strings.h printable).
  void fail(const std::string& path, const std::string& message) {
    if (!error_) error_ = invalid_input(strings::printable(path + ": " + message, ""));
  }

  // Text from a database or bundle someone else wrote reaches terminals (the dry run's "why:",
  // db show): no control characters, escape sequences or bytes that are not UTF-8.
  bool text(const std::string& at, const std::string& v) {
    const size_t bad = strings::find_control(v);
    if (bad == std::string::npos) return true;
    fail(at, "a control character or a byte that is not UTF-8 at byte " + std::to_string(bad) +
                 "; plan text fields hold printable text only");
    return false;
  }

  // `j` must be an object whose keys are all in `allowed` and include all of `required`.
  bool object(const json& j, const std::string& path, const std::vector<std::string>& allowed,
              const std::vector<std::string>& required) {
    if (!j.is_object()) {
      fail(path, std::string("expected an object, got ") + j.type_name());
      return false;
    }
    for (const auto& [key, value] : j.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        fail(join(path, key), "unknown key; allowed: " + strings::join(allowed, ", "));
    }
    for (const std::string& key : required)
      if (!j.contains(key)) fail(join(path, key), "missing");
    return ok();
  }

  template <typename T>
  void read(const json& obj, const std::string& key, const std::string& path, T* out) {
    if (!obj.contains(key)) return;
    const json& v = obj.at(key);
    const std::string at = join(path, key);
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean())
        return fail(at, std::string("expected true or false, got ") + v.type_name());
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) return fail(at, std::string("expected a string, got ") + v.type_name());
      if (!text(at, v.get_ref<const std::string&>())) return;
    } else if constexpr (std::is_same_v<T, double>) {
      if (!v.is_number()) return fail(at, std::string("expected a number, got ") + v.type_name());
    } else if constexpr (std::is_unsigned_v<T>) {
      // A JSON built in code holds 2048 as a signed integer, a parsed one as unsigned.
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        return fail(at, "expected a non-negative integer, got " + v.dump());
    } else {
      if (!v.is_number_integer()) return fail(at, "expected an integer, got " + v.dump());
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail(at, "out of range: " + v.dump());
      const int64_t i = v.get<int64_t>();
      if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max())
        return fail(at, "out of range: " + v.dump());
    }
    *out = v.get<T>();
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

 private:
  std::optional<Error> error_;
};

void read_ranges(Reader& r, const json& j, const std::string& path, std::vector<SizeRange>* out) {
  if (!j.is_array()) return r.fail(path, std::string("expected an array, got ") + j.type_name());
  for (size_t i = 0; i < j.size() && r.ok(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    if (!r.object(j[i], at, {"min_bytes", "max_bytes", "algo", "segment_bytes"},
                  {"min_bytes", "max_bytes", "algo"}))
      return;
    SizeRange range;
    std::string algo;
    r.read(j[i], "min_bytes", at, &range.min_bytes);
    r.read(j[i], "max_bytes", at, &range.max_bytes);
    r.read(j[i], "segment_bytes", at, &range.segment_bytes);
    r.read(j[i], "algo", at, &algo);
    if (!r.ok()) return;
    auto a = parse_choice(algo);
    if (!a)
      return r.fail(at + ".algo", "unknown algorithm '" + algo +
                                      "'; allowed: " + strings::join(algorithm_names(), ", ") +
                                      " (NCCL's with _ll, _ll128 or _simple for a protocol)");
    range.algo = a->first;
    range.protocol = a->second;
    out->push_back(range);
  }
}

void read_training(Reader& r, const json& j, TrainingPlan* t) {
  if (!r.object(j, "training",
                {"per_rank_batch", "global_batch", "scaling", "lr_scale", "warmup_steps",
                 "bucket_bytes", "overlap", "precision", "kernels"},
                {"per_rank_batch", "global_batch", "scaling"}))
    return;
  r.read(j, "per_rank_batch", "training", &t->per_rank_batch);
  r.read(j, "global_batch", "training", &t->global_batch);
  r.read(j, "lr_scale", "training", &t->lr_scale);
  r.read(j, "warmup_steps", "training", &t->warmup_steps);
  r.read(j, "bucket_bytes", "training", &t->bucket_bytes);
  r.read(j, "overlap", "training", &t->overlap);
  r.read(j, "precision", "training", &t->precision);  // absent in older plans: fp32
  if (r.ok() && t->precision != "fp32" && t->precision != "bf16")
    return r.fail("training.precision", "expected fp32 or bf16, got '" + t->precision + "'");
  if (j.contains("kernels")) {
    const json& k = j["kernels"];
    if (!k.is_object() || k.size() > 100000)
      return r.fail("training.kernels", "expected an object of node name -> kernel name");
    for (const auto& [node, kernel] : k.items()) {
      if (node.empty() || node.size() > 200 || !kernel.is_string() ||
          kernel.get<std::string>().empty() || kernel.get<std::string>().size() > 64)
        return r.fail("training.kernels", "expected node name -> kernel name, got '" +
                                              node.substr(0, 64) + "': " + kernel.dump());
      if (!r.text("training.kernels", node) ||
          !r.text("training.kernels", kernel.get<std::string>()))
        return;
      t->kernels[node] = kernel.get<std::string>();
    }
  }
  std::string scaling;
  r.read(j, "scaling", "training", &scaling);
  if (!r.ok()) return;
  if (scaling != "weak" && scaling != "strong")
    return r.fail("training.scaling", "expected weak or strong, got '" + scaling + "'");
  t->scaling = *parse_scaling(scaling);
}

void read_placement(Reader& r, const json& j, std::vector<RankPlacement>* out) {
  if (!j.is_array()) return r.fail("placement", "expected an array");
  for (size_t i = 0; i < j.size() && r.ok(); ++i) {
    const std::string at = "placement[" + std::to_string(i) + "]";
    if (!r.object(j[i], at, {"local_rank", "cpus", "gpu", "nic"}, {"local_rank"})) return;
    RankPlacement p;
    r.read(j[i], "local_rank", at, &p.local_rank);
    r.read(j[i], "gpu", at, &p.gpu);
    r.read(j[i], "nic", at, &p.nic);
    if (j[i].contains("cpus")) {
      const json& cpus = j[i]["cpus"];
      if (!cpus.is_array()) return r.fail(at + ".cpus", "expected an array of CPU indexes");
      for (const json& c : cpus) {
        if (!c.is_number_integer())
          return r.fail(at + ".cpus", "expected integers, got " + c.dump());
        p.cpus.push_back(c.get<int>());
      }
    }
    out->push_back(std::move(p));
  }
}

void read_parallel(Reader& r, const json& j, ParallelLayout* p) {
  if (!r.object(j, "parallel",
                {"replicas", "stages", "partition", "microbatches", "schedule", "recompute",
                 "offload", "reason", "memory_bytes", "predicted_sps", "measured_sps"},
                {"replicas", "stages"}))
    return;
  r.read(j, "replicas", "parallel", &p->replicas);
  r.read(j, "stages", "parallel", &p->stages);
  r.read(j, "microbatches", "parallel", &p->microbatches);
  r.read(j, "reason", "parallel", &p->reason);
  r.read(j, "memory_bytes", "parallel", &p->memory_bytes);
  r.read(j, "predicted_sps", "parallel", &p->predicted_sps);
  r.read(j, "measured_sps", "parallel", &p->measured_sps);
  if (j.contains("partition")) {
    const json& names = j["partition"];
    if (!names.is_array()) return r.fail("parallel.partition", "expected a list of node names");
    for (const json& n : names) {
      if (!n.is_string() || n.get<std::string>().empty() || n.get<std::string>().size() > 200)
        return r.fail("parallel.partition", "expected node names, got " + n.dump());
      if (!r.text("parallel.partition", n.get<std::string>())) return;
      p->partition.push_back(n.get<std::string>());
    }
  }
  std::string schedule = std::string(schedule_name(p->schedule));
  std::string recompute = std::string(recompute_name(p->recompute));
  r.read(j, "schedule", "parallel", &schedule);
  r.read(j, "recompute", "parallel", &recompute);
  std::string offload = std::string(offload_name(p->offload));  // absent in older plans: none
  r.read(j, "offload", "parallel", &offload);
  if (!r.ok()) return;
  auto s = parse_schedule(schedule);
  if (!s)
    return r.fail("parallel.schedule", "expected gpipe, 1f1b or async, got '" + schedule + "'");
  auto rc = parse_recompute(recompute);
  if (!rc) return r.fail("parallel.recompute", "expected none or stage, got '" + recompute + "'");
  auto off = parse_offload(offload);
  if (!off) return r.fail("parallel.offload", "expected none or optimizer, got '" + offload + "'");
  p->schedule = *s;
  p->recompute = *rc;
  p->offload = *off;
}

void read_plan(Reader& r, const json& j, Plan* plan) {
  if (!r.object(
          j, "",
          {"version", "collectives", "training", "placement", "job", "parallel", "provenance"},
          {"version", "collectives", "training", "job"}))
    return;
  r.read(j, "version", "", &plan->version);
  if (r.ok() && plan->version != kPlanVersion)
    return r.fail("version", "this dltune reads plan version " + std::to_string(kPlanVersion) +
                                 ", got " + std::to_string(plan->version));
  const json& colls = j["collectives"];
  if (!colls.is_object()) return r.fail("collectives", "expected an object");
  for (const auto& [name, ranges] : colls.items()) {
    auto c = parse_collective(name);
    if (!c)
      return r.fail("collectives." + name,
                    "unknown collective; allowed: " + strings::join(collective_names(), ", "));
    read_ranges(r, ranges, "collectives." + name, &plan->collectives[*c]);
  }
  read_training(r, j["training"], &plan->training);
  if (j.contains("placement")) read_placement(r, j["placement"], &plan->placement);
  if (r.object(j["job"], "job", {"nodes", "ranks_per_node", "threads_per_rank"},
               {"nodes", "ranks_per_node"})) {
    r.read(j["job"], "nodes", "job", &plan->job.nodes);
    r.read(j["job"], "ranks_per_node", "job", &plan->job.ranks_per_node);
    r.read(j["job"], "threads_per_rank", "job", &plan->job.threads_per_rank);  // older: 1
  }
  if (j.contains("parallel")) {
    read_parallel(r, j["parallel"], &plan->parallel);
  } else {  // a plan written before layouts: data parallel over every rank
    plan->parallel.replicas = plan->job.nodes * plan->job.ranks_per_node;
  }
  if (!j.contains("provenance")) return;
  const json& p = j["provenance"];
  if (!r.object(p, "provenance",
                {"source", "reason", "predicted_sps", "measured_sps", "recipe", "confidence",
                 "regret", "collective_regret", "budget", "run_steps", "tuned_lr"},
                {"source"}))
    return;
  Provenance& pv = plan->provenance;
  std::string source;
  r.read(p, "source", "provenance", &source);
  r.read(p, "reason", "provenance", &pv.reason);
  r.read(p, "predicted_sps", "provenance", &pv.predicted_sps);
  r.read(p, "measured_sps", "provenance", &pv.measured_sps);
  r.read(p, "recipe", "provenance", &pv.recipe);
  r.read(p, "regret", "provenance", &pv.regret);
  r.read(p, "collective_regret", "provenance", &pv.collective_regret);
  r.read(p, "run_steps", "provenance", &pv.run_steps);
  if (r.ok() && pv.run_steps < 0)
    r.fail("provenance.run_steps", "expected a step count >= 0, got " + p["run_steps"].dump());
  r.read(p, "tuned_lr", "provenance", &pv.tuned_lr);
  if (r.ok() && !(std::isfinite(pv.tuned_lr) && pv.tuned_lr >= 0))
    r.fail("provenance.tuned_lr", "expected a learning rate >= 0, got " + p["tuned_lr"].dump());
  // Absent means unknown (-1 in memory); a share that is there is never negative.
  for (const auto& [key, value] : {std::pair<const char*, double>{"regret", pv.regret},
                                   {"collective_regret", pv.collective_regret}}) {
    if (r.ok() && p.contains(key) && !(value >= 0))
      r.fail(std::string("provenance.") + key,
             "expected a share >= 0 (leave it out when unknown), got " + p[key].dump());
  }
  if (p.contains("confidence") &&
      r.object(p["confidence"], "provenance.confidence",
               {"rival", "ratio", "lo", "hi", "rounds", "significant"}, {"ratio"})) {
    const json& c = p["confidence"];
    Confidence k;
    r.read(c, "rival", "provenance.confidence", &k.rival);
    r.read(c, "ratio", "provenance.confidence", &k.ratio);
    r.read(c, "lo", "provenance.confidence", &k.lo);
    if (c.contains("hi") && !c["hi"].is_null()) r.read(c, "hi", "provenance.confidence", &k.hi);
    r.read(c, "rounds", "provenance.confidence", &k.rounds);
    r.read(c, "significant", "provenance.confidence", &k.significant);
    pv.confidence = k;
  }
  if (p.contains("budget") &&
      r.object(p["budget"], "provenance.budget", {"budget_s", "tuning_s", "cut"}, {})) {
    r.read(p["budget"], "budget_s", "provenance.budget", &pv.budget_s);
    r.read(p["budget"], "tuning_s", "provenance.budget", &pv.tuning_s);
    r.read(p["budget"], "cut", "provenance.budget", &pv.budget_cut);
  }
  if (!r.ok()) return;
  for (PlanSource s : {PlanSource::kTuned, PlanSource::kCache, PlanSource::kDefault})
    if (plan_source_name(s) == source) {
      plan->provenance.source = s;
      return;
    }
  r.fail("provenance.source", "expected tuned, cache or default, got '" + source + "'");
}

// The provenance; the optional fields only when set, so that plans without them read as before.
// "Set" means "not the default", never "plausible": any plan parse_plan accepts, even one
// check_plan_plausible refuses (a negative budget), must serialise back to itself.
json provenance_json(const Provenance& p) {
  json j = {{"source", plan_source_name(p.source)},
            {"reason", p.reason},
            {"predicted_sps", p.predicted_sps},
            {"measured_sps", p.measured_sps}};
  if (!p.recipe.empty()) j["recipe"] = p.recipe;
  if (p.confidence) {
    const Confidence& c = *p.confidence;
    j["confidence"] = {{"rival", c.rival},   {"ratio", c.ratio},
                       {"lo", c.lo},         {"hi", c.hi != 0 ? json(c.hi) : json(nullptr)},
                       {"rounds", c.rounds}, {"significant", c.significant}};
  }
  if (p.regret >= 0) j["regret"] = p.regret;
  if (p.collective_regret >= 0) j["collective_regret"] = p.collective_regret;
  if (p.run_steps > 0) j["run_steps"] = p.run_steps;
  if (p.tuned_lr > 0) j["tuned_lr"] = p.tuned_lr;
  if (p.budget_s != 0 || p.tuning_s != 0 || !p.budget_cut.empty()) {
    j["budget"] = {{"budget_s", p.budget_s}, {"tuning_s", p.tuning_s}, {"cut", p.budget_cut}};
  }
  return j;
}

}  // namespace

json plan_to_json(const Plan& plan) {
  json colls = json::object();
  for (const auto& [c, ranges] : plan.collectives) {
    json list = json::array();
    for (const SizeRange& r : ranges)
      list.push_back({{"min_bytes", r.min_bytes},
                      {"max_bytes", r.max_bytes},
                      {"algo", choice_name(r.algo, r.protocol)},
                      {"segment_bytes", r.segment_bytes}});
    colls[std::string(collective_name(c))] = list;
  }
  const TrainingPlan& t = plan.training;
  json placement = json::array();
  for (const RankPlacement& p : plan.placement)
    placement.push_back(
        {{"local_rank", p.local_rank}, {"cpus", p.cpus}, {"gpu", p.gpu}, {"nic", p.nic}});
  json out = {{"version", plan.version},
              {"collectives", colls},
              {"training",
               {{"per_rank_batch", t.per_rank_batch},
                {"global_batch", t.global_batch},
                {"scaling", scaling_name(t.scaling)},
                {"lr_scale", t.lr_scale},
                {"warmup_steps", t.warmup_steps},
                {"bucket_bytes", t.bucket_bytes},
                {"overlap", t.overlap},
                {"precision", t.precision},
                {"kernels", t.kernels}}},
              {"placement", placement},
              {"job",
               {{"nodes", plan.job.nodes},
                {"ranks_per_node", plan.job.ranks_per_node},
                {"threads_per_rank", plan.job.threads_per_rank}}},
              {"parallel",
               {{"replicas", plan.parallel.replicas},
                {"stages", plan.parallel.stages},
                {"partition", plan.parallel.partition},
                {"microbatches", plan.parallel.microbatches},
                {"schedule", schedule_name(plan.parallel.schedule)},
                {"recompute", recompute_name(plan.parallel.recompute)},
                {"reason", plan.parallel.reason},
                {"memory_bytes", plan.parallel.memory_bytes},
                {"predicted_sps", plan.parallel.predicted_sps},
                {"measured_sps", plan.parallel.measured_sps}}},
              {"provenance", provenance_json(plan.provenance)}};
  // Only when offloaded: a plan without offload keeps the bytes it had before the key existed
  // (stored and signed plans compare equal).
  if (plan.parallel.offload != Offload::kNone)
    out["parallel"]["offload"] = offload_name(plan.parallel.offload);
  return out;
}

Result<Plan> plan_from_json(const json& j) {
  Reader r;
  Plan plan;
  read_plan(r, j, &plan);
  if (!r.ok()) return r.error().wrap("invalid plan");
  if (Status s = validate_plan(plan); !s.ok()) return s.error().wrap("invalid plan");
  return plan;
}

std::string serialize_plan(const Plan& plan) { return plan_to_json(plan).dump(2); }

Result<Plan> parse_plan(std::string_view text) {
  // Plans come from databases and files others wrote: bounded before anything recurses.
  auto j = parse_json_bounded(text, {.max_bytes = size_t{4} << 20, .max_depth = 16});
  if (!j) return std::move(j).error().wrap("invalid plan");
  return plan_from_json(*j);
}

}  // namespace dltune::recipes
