// The end of `dltune launch`: summary.json from the run's facts, its warnings, and the summary
// a person reads (launch_outcome.h).
//
// Every per-step figure comes from the same timed steps (all but the first step, as the
// trainer times them): the step time is the global batch over the throughput, and its split
// into compute, exposed communication and other is of that same time. Start-up, the first step,
// evaluation and checkpoints are reported once, beside it, never spread over the steps.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/strings.h"
#include "launcher/flow/launch_job.h"
#include "launcher/flow/text_format.h"
#include "launcher/report/launch_outcome.h"
#include "tuner/db/admin.h"
#include "tuner/plan_confidence.h"

namespace dltune::launcher {
namespace {

using json = nlohmann::json;

using text::bytes_text;
using text::fixed;
using text::flag;
using text::num;
using text::thousands;

json or_null(bool known, double v) { return known ? json(v) : json(nullptr); }

// The sweep's median for `algo` at the smallest measured size at or above `bytes`, else the
// largest below it when that is at least a quarter of `bytes` (further down, latency dominates
// and a linear scaling would be meaningless), scaled linearly to `bytes`.
std::optional<double> measured_us(const std::vector<tuner::db::Measurement>& rows,
                                  const std::string& algo, uint64_t segment, uint64_t bytes) {
  const tuner::db::Measurement* above = nullptr;
  const tuner::db::Measurement* below = nullptr;
  for (const auto& m : rows) {
    if (m.failed || m.algorithm != algo || m.collective != "allreduce" || m.bytes == 0) continue;
    if (m.segment_bytes != segment) continue;
    if (m.bytes >= bytes && (above == nullptr || m.bytes < above->bytes)) above = &m;
    if (m.bytes < bytes && (below == nullptr || m.bytes > below->bytes)) below = &m;
  }
  if (below != nullptr && below->bytes * 4 < bytes) below = nullptr;
  const tuner::db::Measurement* best = above != nullptr ? above : below;
  if (best == nullptr) return std::nullopt;
  return best->median_us * static_cast<double>(bytes) / static_cast<double>(best->bytes);
}

// The pieces a step allreduces: full buckets and the remainder, as (bytes, count).
std::vector<std::pair<uint64_t, double>> pieces(uint64_t gradient, uint64_t bucket) {
  std::vector<std::pair<uint64_t, double>> out;
  if (gradient == 0) return out;
  bucket = std::max<uint64_t>(bucket, 1);
  if (gradient / bucket > 0) out.emplace_back(bucket, static_cast<double>(gradient / bucket));
  if (gradient % bucket > 0) out.emplace_back(gradient % bucket, 1.0);
  return out;
}

std::string candidate_name(const recipes::SizeRange& r) {
  return std::string(recipes::algorithm_name(r.algo)) +
         (r.segment_bytes > 0 ? "/" + std::to_string(r.segment_bytes) : "");
}

// Allreduce seconds per step from the sweep: every bucket with the plan's algorithm for its
// size. Error: why it cannot be estimated.
Result<double> sweep_allreduce_s(const RunFacts& f) {
  if (f.ranks < 2) return 0.0;
  if (f.gradient_bytes == 0) return invalid_input("the model's gradient size is unknown");
  if (f.choice.collective_measurements.empty()) {
    return invalid_input("no collective sweep is stored for this machine and job shape");
  }
  double us = 0;
  for (const auto& [bytes, count] : pieces(f.gradient_bytes, f.choice.plan.training.bucket_bytes)) {
    auto rule = f.choice.plan.algorithm_for(recipes::Collective::kAllreduce, bytes);
    const std::string algo = rule ? std::string(recipes::algorithm_name(rule->algo)) : "ring";
    auto t =
        measured_us(f.choice.collective_measurements, algo, rule ? rule->segment_bytes : 0, bytes);
    if (!t) {
      uint64_t top = 0;
      for (const auto& m : f.choice.collective_measurements) top = std::max(top, m.bytes);
      return invalid_input("the sweep measured " + algo + " only up to " + bytes_text(top) +
                           ", below this job's " + bytes_text(bytes) + " buckets");
    }
    us += count * *t;
  }
  return us * 1e-6;
}

// The plan's estimated collective regret at this job's buckets (plan_confidence.h); < 0
// unknown.
double job_collective_regret(const RunFacts& f) {
  if (f.ranks < 2 || f.choice.collective_measurements.empty()) return -1;
  std::vector<tuner::CollectivePoint> points;
  for (const auto& m : f.choice.collective_measurements) {
    if (m.failed || m.collective != "allreduce") continue;
    points.push_back({m.bytes,
                      m.algorithm + (m.segment_bytes > 0 ? "/" + std::to_string(m.segment_bytes)
                                                         : std::string()),
                      m.median_us});
  }
  const recipes::Plan& plan = f.choice.plan;
  return tuner::collective_regret(
      points,
      [&](uint64_t b) {
        auto r = plan.algorithm_for(recipes::Collective::kAllreduce, b);
        return r ? candidate_name(*r) : std::string("ring");
      },
      pieces(f.gradient_bytes, plan.training.bucket_bytes));
}

// How many of the job's nodes share one machine's cores (1: every node its own machine).
int machine_nodes(const RunFacts& f) {
  return std::clamp(f.nodes_per_machine, 1, std::max(1, f.nodes));
}

// Steps the winner of the trials ran, summed over its rounds (0 when not tuned now).
int64_t winner_trial_steps(const RunFacts& f) {
  const json& o = f.choice.recipe_outcome;
  if (!o.is_object() || !o.contains("trials") || !o["trials"].contains("trials")) return 0;
  const auto winner = o.value("winner", int64_t{-1});
  int64_t steps = 0;
  for (const json& t : o["trials"]["trials"]) {
    if (t.value("candidate", int64_t{-2}) == winner) steps += t.value("steps", int64_t{0});
  }
  return steps;
}

// The warnings about the 1-rank baseline and the scaling efficiency it gives (run_warnings()'s
// first part): not measured, too wide, slower than one rank, above 100 %.
void baseline_warnings(const RunFacts& f, const json& s, std::vector<std::string>& w) {
  if (!f.baseline_error.empty()) {
    w.push_back("scaling efficiency not measured: " + f.baseline_error);
  } else if (f.baseline_sps > 0 && !(f.baseline_rel_ci <= kBaselineRelCi)) {
    const std::string known = std::isfinite(f.baseline_rel_ci)
                                  ? "only known to +-" + fixed(100 * f.baseline_rel_ci, 1) + " %"
                                  : "of unknown precision";
    w.push_back("the scaling efficiency's 1-rank baseline is " + known + " after " +
                std::to_string(f.baseline_steps) + " steps in " + fixed(f.baseline_seconds, 1) +
                " s (it may take about 10 % of the training's time; the machine was noisy or the "
                "run short; the efficiency is as uncertain)");
  }
  const double sps = num(s, "throughput_sps");
  if (f.ranks > 1 && f.baseline_sps > 0 && sps > 0 && sps < f.baseline_sps) {
    w.push_back(std::to_string(f.ranks) + " ranks trained at " + thousands(sps) +
                " samples/s, slower than 1 rank alone (" + thousands(f.baseline_sps) +
                " samples/s): on this machine the communication and shared resources cost more "
                "than the extra ranks add. Run with -n 1, or give each rank more work per step "
                "(a larger training.batch.per_rank) so that the allreduce weighs less");
  }
  if (f.ranks > 1 && f.baseline_sps > 0 &&
      sps > kSuperlinearEfficiency * f.ranks * f.baseline_sps) {
    w.push_back("the scaling efficiency is " + fixed(100 * sps / (f.ranks * f.baseline_sps), 0) +
                " %, above 100 %: " + std::to_string(f.ranks) +
                " ranks with a rank's work each cannot beat " + std::to_string(f.ranks) +
                " times one rank alone, so the 1-rank baseline" +
                (f.baseline_measured_at > 0
                     ? ", reused from the database (measured " +
                           tuner::db::utc_time(f.baseline_measured_at) +
                           "), was slowed by other load then; measure it again on an idle machine "
                           "(--set launch.baseline=measure) for a figure to trust"
                     : ", which ran after the job, was slowed by other load on this machine; "
                       "rerun on an idle machine for a figure to trust"));
  }
}

// The summary's "warnings" (make_summary()'s contract); `s` holds the figures made so far.
std::vector<std::string> run_warnings(const RunFacts& f, const MetricsLog& log, const json& s) {
  std::vector<std::string> w;
  baseline_warnings(f, s, w);
  const double sps = num(s, "throughput_sps");
  if (s.value("ranks_shared_cores", false)) {
    const int npm = machine_nodes(f);
    const int per_machine = f.ranks / std::max(1, f.nodes) * npm;
    w.push_back(std::to_string(per_machine) +
                (npm > 1 ? " ranks per machine (" + std::to_string(npm) + " nodes each) shared "
                         : std::string(" ranks per node shared ")) +
                std::to_string(f.cores_per_node) +
                " cores (binding: " + (f.binding.empty() ? std::string("auto") : f.binding) +
                "): each rank got less than a core, so throughput and scaling efficiency are "
                "below what one rank per core gives (mpirun would have refused without "
                "--oversubscribe); use -n " +
                std::to_string(std::max(1, f.cores_per_node / npm * f.nodes)) + " or fewer");
  }
  const int64_t trial_steps = winner_trial_steps(f);
  if (f.choice.source == "tuned" && trial_steps > 0 && trial_steps < kTrialMinTrustedSteps) {
    w.push_back("the plan rests on trials of only " + std::to_string(trial_steps) +
                " steps of the winner, fewer than the " + std::to_string(kTrialMinTrustedSteps) +
                " a step time takes to settle after the warm-up: its choice is uncertain (a "
                "larger tune.budget measures longer)");
  }
  const double trial = f.choice.plan.provenance.measured_sps;
  if (f.choice.source == "tuned" && trial > 0 && sps > 0 &&
      (trial > kTrialMismatch * sps || sps > kTrialMismatch * trial)) {
    w.push_back("the trials measured " + thousands(trial) +
                " samples/s for this plan, training ran at " + thousands(sps) +
                ": trials that short or that noisy rank the candidates poorly (a larger "
                "tune.budget measures longer; --retune measures again)");
  }
  const json& ar = s["allreduce"];
  if (f.ranks > 1 && ar["bound_s_per_step"].is_null()) {
    w.push_back("the allreduce bound could not be computed: " + ar.value("bound_note", ""));
  }
  if (f.ranks > 1 && ar["sweep_s_per_step"].is_null() &&
      !f.choice.collective_measurements.empty()) {
    w.push_back("the allreduce time could not be estimated: " + ar.value("sweep_note", "") +
                " (--retune with a larger tune.budget measures the job's sizes)");
  }
  if (f.ranks > 1 && ar["collective_regret"].is_number() &&
      ar["collective_regret"].get<double>() > kCollectiveRegretWarn) {
    w.push_back(
        "the collective choices are uncertain: by the sweep's own measurements an "
        "exhaustive search could make this job's allreduce " +
        fixed(1 + ar["collective_regret"].get<double>(), 1) +
        "x faster (the sweep was short or the machine noisy); --retune with a larger "
        "tune.budget, or `dltune tune --collectives --strategy exhaustive`, measures them "
        "again");
  }
  const double first = log.steps.empty() ? 0 : num(log.steps.front(), "loss");
  const double last = num(s, "final_loss");
  const int64_t steps = s.value("steps", int64_t{0});
  const double chance = f.classes >= 2 ? std::log(static_cast<double>(f.classes)) : 0;
  const bool flat =
      steps >= kNoLearningMinSteps && first > 0 && last >= kNoLearningLossShare * first;
  const bool at_chance =
      steps >= kChanceMinSteps && chance > 0 && last >= kChanceLossShare * chance;
  if (flat || at_chance) {
    const double acc = num(s, "heldout_accuracy", -1);
    const auto& tp = s["plan"]["training"];
    const double lr_scale = num(tp, "lr_scale", 1);
    std::string what =
        "the model did not learn: the loss went from " + fixed(first, 4) + " to " + fixed(last, 4);
    if (at_chance) {
      what += ", chance for " + std::to_string(f.classes) + " classes is ln " +
              std::to_string(f.classes) + " = " + fixed(chance, 4);
    }
    if (acc >= 0) what += " (held-out accuracy " + fixed(100 * acc, 1) + " %)";
    what += "; at lr x" + fixed(lr_scale, 2) + " for global batch " +
            std::to_string(tp.value("global_batch", 0));
    if (lr_scale < kLowLrScale) {
      what +=
          " the learning rate may be too low: raise optimizer.lr, lower "
          "optimizer.lr_reference_batch towards the global batch, or train longer "
          "(training.steps)";
    } else if (steps < kNoLearningMinSteps) {
      what += ", " + std::to_string(steps) +
              " steps may be too few to leave chance: train longer (training.steps), and if "
              "it stays there, lower optimizer.lr or lengthen the warmup";
    } else {
      what +=
          " the learning rate may be too high: lower optimizer.lr or the batch, "
          "lengthen the warmup, or scale lr less with the global batch "
          "(optimizer.lr_scaling: sqrt or none)";
    }
    w.push_back(what);
  }
  return w;
}

json step_time_json(const RunFacts& f) {
  const json& w = f.worker;
  const double steps = std::max(1.0, num(w, "steps"));
  const double timed = std::max(1.0, num(w, "timed_steps", steps));
  const double run = std::max(1.0, num(w, "steps_run", steps));
  const double sps = num(w, "throughput_sps"), batch = num(w, "global_batch");
  const double compute = num(w, "compute_s") / timed, comm = num(w, "comm_s") / timed;
  // The mean timed step, as the throughput counts it; a worker that reported no throughput
  // leaves only its wall time over its steps.
  const double total = sps > 0 && batch > 0 ? batch / sps : num(w, "wall_seconds") / run;
  const double outside = std::max(0.0, num(w, "wall_seconds") - total * timed);
  return {{"compute_s", compute},
          {"exposed_comm_s", comm},
          {"other_s", std::max(0.0, total - compute - comm)},
          {"total_s", total},
          {"timed_steps", static_cast<int64_t>(timed)},
          {"outside_steps_s", outside}};
}

// The worker's checkpoints (engine/worker/main.cc): how many, what training waited for them
// per step run and as a share of the mean step, what writing one took and whether it was in the
// background; null when the worker reported none (a worker of an older dltune).
json checkpoints_json(const json& worker, const json& step_time) {
  const json c = worker.value("checkpoints", json());
  if (!c.is_object()) return nullptr;
  const double count = num(c, "count"), run = std::max(1.0, num(worker, "steps_run", 1.0));
  const double per_step = num(c, "blocked_s") / run, total = num(step_time, "total_s");
  return {{"count", static_cast<int64_t>(count)},
          {"background", flag(c, "background")},
          {"blocked_s", num(c, "blocked_s")},
          {"blocked_s_per_step", per_step},
          {"share_of_step", total > 0 ? json(per_step / total) : json(nullptr)},
          {"write_s_each", count > 0 ? json(num(c, "write_s") / count) : json(nullptr)}};
}

// The worker's memory report (engine/worker/main.cc memory_report()) in brief: the rank whose
// estimate is largest (the one that decides whether the layout fits), its estimate and its
// measured peak, and the largest error over the ranks. null when the worker reported none.
json memory_json(const json& worker) {
  const json m = worker.value("memory", json::object());
  const json ranks = m.value("ranks", json::array());
  if (!ranks.is_array() || ranks.empty()) return nullptr;
  const json* top = nullptr;
  for (const json& r : ranks)
    if (top == nullptr || num(r, "estimate_bytes") > num(*top, "estimate_bytes")) top = &r;
  const bool measured = top->contains("measured_bytes");
  return {{"rank", top->value("rank", 0)},
          {"stage", top->value("stage", 0)},
          {"estimate_bytes", num(*top, "estimate_bytes")},
          {"measured_bytes", or_null(measured, num(*top, "measured_bytes"))},
          {"measured", m.value("measured", "")},
          {"max_error", or_null(m.contains("max_error"), num(m, "max_error"))}};
}

json allreduce_json(const RunFacts& f, const json& step_time) {
  json ar;
  ar["gradient_bytes"] = f.gradient_bytes;
  ar["bucket_bytes"] = f.choice.plan.training.bucket_bytes;
  auto sweep = sweep_allreduce_s(f);
  ar["sweep_s_per_step"] = sweep ? json(*sweep) : json(nullptr);
  ar["sweep_note"] = f.ranks < 2 ? "one rank: nothing to reduce"
                     : sweep     ? ""
                                 : sweep.error().message();
  // The memory-traffic bound on one node: each rank's slice needs the other ranks' (p-1)/p
  // of the gradient brought in, and its result taken out to them, so 2 (p-1)/p N bytes cross
  // each core; a core's copy at copy_gbs moves 2 x copy_gbs (every byte is read and written),
  // hence (p-1)/p N / copy_gbs. Across nodes the network is a second level with its own
  // measured bandwidth (launch_prediction.h's allreduce_bound): the bound is the slower level's.
  const int per_node = f.ranks / std::max(1, f.nodes);
  const AllreduceBound bound =
      allreduce_bound(f.gradient_bytes, f.nodes, per_node, f.copy_gbs, f.choice.level_fits);
  ar["bound_levels"] = {{"memory_s", bound.intra_s},
                        {"network_s", or_null(bound.inter_known, bound.inter_s)},
                        {"network_node_gbps", bound.node_gbps}};
  if (f.ranks < 2) {
    ar["bound_s_per_step"] = 0.0;
    ar["bound_note"] = "one rank: nothing to reduce";
  } else if (f.gradient_bytes == 0) {
    ar["bound_s_per_step"] = nullptr;
    ar["bound_note"] = "the model's gradient size is unknown";
  } else if (!(f.copy_gbs > 0)) {
    ar["bound_s_per_step"] = nullptr;
    ar["bound_note"] = "this machine's copy bandwidth could not be measured";
  } else {
    ar["bound_s_per_step"] = bound.bound_s;
    ar["bound_note"] = "";
  }
  // A measured time below its lower bound means the bound's copy bandwidth was measured low
  // (it moves with the machine's load): say so rather than print the two side by side.
  if (sweep && ar["bound_s_per_step"].is_number() && *sweep > 0 &&
      *sweep < ar["bound_s_per_step"].get<double>()) {
    ar["bound_note"] =
        "the sweep measured the allreduce below this bound, so the copy bandwidth it rests on "
        "was measured low (it varies with the machine's load)";
  }
  ar["copy_gbs"] = f.copy_gbs;
  // Exposed communication beyond the allreduce itself: waiting for the slowest rank.
  const double exposed = num(step_time, "exposed_comm_s");
  ar["wait_s_per_step"] = sweep && exposed > *sweep ? json(exposed - *sweep) : json(nullptr);
  const double regret = job_collective_regret(f);
  ar["collective_regret"] = or_null(regret >= 0, regret);
  return ar;
}

json confidence_json(const recipes::Provenance& pv) {
  if (!pv.confidence) return nullptr;
  const recipes::Confidence& c = *pv.confidence;
  return {{"rival", c.rival},
          {"ratio", c.ratio},
          {"lo", or_null(c.hi > 0, c.lo)},
          {"hi", or_null(c.hi > 0, c.hi)},
          {"rounds", c.rounds},
          {"significant", c.significant}};
}

}  // namespace

json make_summary(const RunFacts& f, const MetricsLog& log, const RunDir& dir) {
  const auto& w = f.worker;
  const double sps = num(w, "throughput_sps");
  json s;
  s["recipe"] = f.recipe;
  s["ranks"] = f.ranks;
  s["nodes"] = f.nodes;
  s["backend"] = f.backend;
  s["steps"] = log.steps.empty() ? static_cast<int64_t>(num(w, "steps"))
                                 : static_cast<int64_t>(num(log.steps.back(), "step")) + 1;
  s["throughput_sps"] = sps;
  s["baseline_1rank_sps"] = f.baseline_sps;
  s["baseline_1rank_steps"] = f.baseline_steps;
  s["baseline_1rank_rel_ci"] = or_null(std::isfinite(f.baseline_rel_ci), f.baseline_rel_ci);
  s["baseline_1rank_bind"] = f.baseline_bind;
  s["baseline_1rank_seconds"] = f.baseline_seconds;
  s["baseline_1rank_budget_s"] = f.baseline_budget_s;
  s["baseline_1rank"] = f.ranks < 2 && f.baseline_mode != "off" ? "one rank" : f.baseline_mode;
  if (f.baseline_sps > 0) {
    const bool reused = f.baseline_measured_at > 0;
    s["baseline_1rank_source"] = reused ? "database" : "measured";
    if (reused) {
      s["baseline_1rank_measured_at"] = tuner::db::utc_time(f.baseline_measured_at);
      s["baseline_1rank_measured_on"] = f.baseline_measured_on;
    }
  }
  s["scaling_efficiency"] = or_null(f.baseline_sps > 0, sps / (f.ranks * f.baseline_sps));
  s["final_loss"] = num(w, "final_loss");
  // Unknown figures are null, never a -1 that a script could take for a value.
  const double acc = num(w, "heldout_accuracy", -1), loss = num(w, "heldout_loss", -1);
  s["heldout_accuracy"] = or_null(acc >= 0, acc);
  s["heldout_loss"] = or_null(loss >= 0, loss);
  if (f.unigram_entropy_bits >= 0) {
    s["heldout_bits_per_byte"] = or_null(loss >= 0, loss / std::log(2.0));
    s["unigram_entropy_bits"] = f.unigram_entropy_bits;
  }
  s["global_batch"] = num(w, "global_batch");
  s["step_time"] = step_time_json(f);
  s["checkpoints"] = checkpoints_json(w, s["step_time"]);
  s["allreduce"] = allreduce_json(f, s["step_time"]);
  s["memory"] = memory_json(w);
  const recipes::Provenance& pv = f.choice.plan.provenance;
  s["threads_per_rank"] = f.choice.plan.job.threads_per_rank;
  s["threads_reason"] = f.threads_reason;
  s["shape_search"] = f.shape_search;
  s["precision"] = f.choice.plan.training.precision;
  s["plan_source"] = f.choice.source;
  s["plan"] = recipes::plan_to_json(f.choice.plan);
  s["plan_reason"] = pv.reason;
  s["predicted_sps"] = pv.predicted_sps;
  s["prediction"] = prediction_json(f.prediction);
  s["trial_measured_sps"] = pv.measured_sps;
  s["confidence"] = confidence_json(pv);
  s["regret"] = or_null(pv.regret >= 0, pv.regret);
  s["budget"] = {{"budget_s", f.choice.budget_s > 0 ? f.choice.budget_s : pv.budget_s},
                 {"cut", pv.budget_cut}};
  s["database"] = {{"path", f.choice.db_path},
                   {"from_site", f.choice.from_site},
                   {"site", f.choice.site},
                   {"signed_by", f.choice.signed_by}};
  s["notes"] = f.choice.notes;
  s["ranks_shared_cores"] =
      f.cores_per_node > 0 && f.ranks / std::max(1, f.nodes) * machine_nodes(f) > f.cores_per_node;
  s["tuning_seconds"] = f.choice.tuning_s;
  s["wall_seconds"] = f.wall_seconds;
  s["resumed_from"] = f.resumed_from;
  s["restarts"] = restarts_json(f.restarts);
  s["reshaped"] = f.reshaped;
  s["run_dir"] = dir.path;
  s["warnings"] = run_warnings(f, log, s);
  return s;
}

}  // namespace dltune::launcher
