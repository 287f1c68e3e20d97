#include "launcher/flow/launch_layout.h"

#include <algorithm>

#include "common/json_input.h"
#include "common/paths.h"
#include "launcher/backend/rank_program.h"
#include "launcher/backend/temp_dir.h"

namespace dltune::launcher {

namespace {

Result<nlohmann::json> query_once(const LayoutQuery& q, bool measure) {
  auto tmp = TempDir::create_in_tmp("dltune-layout");
  if (!tmp) return tmp.error();
  const std::string out = tmp->path() + "/layout.json";
  std::vector<std::string> argv = {q.worker, "layout", "--ranks", std::to_string(q.ranks),
                                   "--out",  out};
  auto add = [&](const char* flag, const std::string& v) {
    if (!v.empty()) argv.insert(argv.end(), {flag, v});
  };
  auto add_n = [&](const char* flag, int64_t v) {
    if (v > 0) argv.insert(argv.end(), {flag, std::to_string(v)});
  };
  add("--recipe", q.recipe_path);
  add("--model", q.model);
  add("--input", q.input);
  add_n("--ranks-per-node", q.ranks_per_node);
  add_n("--batch", q.batch);
  add_n("--stages", q.stages);
  add_n("--microbatches", q.microbatches);
  add("--schedule", q.schedule);
  add("--recompute", q.recompute);
  add("--offload", q.offload);
  add("--optimizer", q.optimizer);
  if (q.per_replica) argv.push_back("--per-replica");
  if (q.unlimited) argv.push_back("--unlimited");
  if (measure) argv.push_back("--measure");
  auto rc = cli::run_to_completion(argv, "layout");
  if (!rc) return rc.error();
  auto text = paths::read_file(out);
  if (!text)
    return internal_error("dltune-worker layout ended with code " + std::to_string(*rc) +
                          " and wrote no answer");
  auto j = parse_json_bounded(*text, {.max_bytes = 16 << 20, .max_depth = 16});
  if (!j) return j.error().wrap("dltune-worker layout's answer");
  if (j->contains("error")) {
    const std::string msg = (*j)["error"].is_string() ? (*j)["error"].get<std::string>() : "";
    return invalid_input(msg.empty() ? "no layout fits" : msg);
  }
  if (*rc != 0 || !j->contains("candidates") || (*j)["candidates"].empty())
    return internal_error("dltune-worker layout ended with code " + std::to_string(*rc));
  return *j;
}

// A candidate's "layout" object of the worker's answer. Throws nlohmann::json::exception when
// a field is missing or mistyped.
recipes::ParallelLayout layout_from_json(const nlohmann::json& l) {
  recipes::ParallelLayout p;
  p.replicas = l.at("replicas").get<int>();
  p.stages = l.at("stages").get<int>();
  p.partition = l.at("partition").get<std::vector<std::string>>();
  p.microbatches = l.at("microbatches").get<int>();
  p.schedule = recipes::parse_schedule(l.at("schedule").get<std::string>())
                   .value_or(recipes::PipelineSchedule::kOneFOneB);
  p.recompute = recipes::parse_recompute(l.at("recompute").get<std::string>())
                    .value_or(recipes::Recompute::kNone);
  p.offload = recipes::parse_offload(l.value("offload", std::string("none")))
                  .value_or(recipes::Offload::kNone);
  p.reason = l.at("reason").get<std::string>();
  p.memory_bytes = l.at("memory_bytes").get<int64_t>();
  p.predicted_sps = l.at("predicted_sps").get<double>();
  return p;
}

}  // namespace

Result<nlohmann::json> query_layouts(const LayoutQuery& q) {
  auto j = query_once(q, false);
  if (!j || q.measure == LayoutQuery::Measure::kNever) return j;
  const nlohmann::json& c = (*j)["candidates"];
  auto stages = [](const nlohmann::json& k) {
    return k.contains("layout") ? k["layout"].value("stages", 1) : 1;
  };
  const bool pipelines =
      std::any_of(c.begin(), c.end(), [&](const auto& k) { return stages(k) > 1; });
  const bool data = std::any_of(c.begin(), c.end(), [&](const auto& k) { return stages(k) == 1; });
  // A pipeline's cuts are placed by the costs too, so a lone pipeline is timed as well: its
  // stages balanced by time, its throughput predicted from this machine's.
  if (!pipelines) return j;
  if (q.measure == LayoutQuery::Measure::kForChoice && data) return j;
  return query_once(q, true);
}

TrialLayouts tuning_layouts(const nlohmann::json& answer) {
  TrialLayouts out;
  out.data_parallel_fits = false;
  if (!answer.contains("candidates") || !answer["candidates"].is_array()) return out;
  for (const nlohmann::json& c : answer["candidates"]) {
    try {
      const recipes::ParallelLayout l = layout_from_json(c.at("layout"));
      // Data parallelism that fits only with the optimizer state offloaded (GPU) is a layout
      // of its own: plain data parallelism does not fit.
      const bool offloaded = l.offload != recipes::Offload::kNone;
      if (!l.pipelined() && !offloaded) out.data_parallel_fits = true;
      if ((l.pipelined() || offloaded) && c.value("measure", false)) out.layouts.push_back(l);
    } catch (const nlohmann::json::exception&) {
    }
  }
  return out;
}

Status apply_layout(const LayoutQuery& base, recipes::Plan* plan) {
  if (plan->parallel.stages > 1) return ok_status();
  recipes::TrainingPlan& t = plan->training;
  LayoutQuery q = base;
  q.per_replica = t.scaling == recipes::Scaling::kWeak;
  q.batch = q.per_replica ? t.per_rank_batch : t.global_batch;
  auto j = query_layouts(q);
  if (!j) return j.error();
  try {
    const recipes::ParallelLayout p = layout_from_json((*j)["candidates"][0]["layout"]);
    if (p.stages == 1) {  // data parallel: keep the plan's batch; record the memory
      plan->parallel.microbatches = p.microbatches;
      plan->parallel.offload = p.offload;
      plan->parallel.memory_bytes = p.memory_bytes;
      plan->parallel.reason = p.reason;
      return recipes::validate_plan(*plan);
    }
    plan->parallel = p;
    if (q.per_replica)
      t.global_batch = t.per_rank_batch * p.replicas;
    else
      t.per_rank_batch = (t.global_batch + p.replicas - 1) / p.replicas;
  } catch (const nlohmann::json::exception& e) {
    return internal_error(std::string("dltune-worker layout's answer: ") + e.what());
  }
  return recipes::validate_plan(*plan);
}

}  // namespace dltune::launcher
