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
#include "tuner/plan_confidence.h"

namespace dltune::launcher {
namespace {

using json = nlohmann::json;

using text::fixed;
using text::num;

// 4249.3 -> "4,249"
std::string thousands(double v) {
  std::string s = std::to_string(std::llround(v));
  const size_t start = s[0] == '-' ? 1 : 0;
  for (int i = static_cast<int>(s.size()) - 3; i > static_cast<int>(start); i -= 3) {
    s.insert(static_cast<size_t>(i), ",");
  }
  return s;
}

std::string bytes_text(double b) {
  return strings::format_bytes(static_cast<uint64_t>(std::max(0.0, b)));
}

std::string ms(double seconds) { return fixed(1e3 * seconds, 2) + " ms"; }

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

// The summary's "warnings" (make_summary()'s contract); `s` holds the figures made so far.
std::vector<std::string> run_warnings(const RunFacts& f, const MetricsLog& log, const json& s) {
  std::vector<std::string> w;
  if (!f.baseline_error.empty()) {
    w.push_back("scaling efficiency not measured: " + f.baseline_error);
  } else if (f.baseline_sps > 0 && !(f.baseline_rel_ci <= kBaselineRelCi)) {
    w.push_back("the scaling efficiency's 1-rank baseline is only known to +-" +
                fixed(100 * f.baseline_rel_ci, 1) + " % after " + std::to_string(f.baseline_steps) +
                " steps (the machine was noisy; the efficiency is as uncertain)");
  }
  const double sps = num(s, "throughput_sps");
  if (f.ranks > 1 && f.baseline_sps > 0 && sps > 0 && sps < f.baseline_sps) {
    w.push_back(std::to_string(f.ranks) + " ranks trained at " + thousands(sps) +
                " samples/s, slower than 1 rank alone (" + thousands(f.baseline_sps) +
                " samples/s): on this machine the communication and shared resources cost more "
                "than the extra ranks add. Run with -n 1, or give each rank more work per step "
                "(a larger training.batch.per_rank) so that the allreduce weighs less");
  }
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
  if (s.value("steps", int64_t{0}) >= kNoLearningMinSteps && first > 0 &&
      last >= kNoLearningLossShare * first) {
    const double acc = num(s, "heldout_accuracy", -1);
    const auto& tp = s["plan"]["training"];
    w.push_back("the model did not learn: the loss went from " + fixed(first, 4) + " to " +
                fixed(last, 4) +
                (acc >= 0 ? " (held-out accuracy " + fixed(100 * acc, 1) + " %)" : "") +
                "; at lr x" + fixed(num(tp, "lr_scale"), 2) + " for global batch " +
                std::to_string(tp.value("global_batch", 0)) +
                " the learning rate may be too high: lower optimizer.lr or the batch, "
                "lengthen the warmup, or scale lr less with the global batch "
                "(optimizer.lr_scaling: sqrt or none)");
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
  s["allreduce"] = allreduce_json(f, s["step_time"]);
  s["memory"] = memory_json(w);
  const recipes::Provenance& pv = f.choice.plan.provenance;
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
  s["run_dir"] = dir.path;
  s["warnings"] = run_warnings(f, log, s);
  return s;
}

std::vector<std::pair<std::string, std::string>> summary_rows(const json& s) {
  std::vector<std::pair<std::string, std::string>> rows;
  auto row = [&](const std::string& k, const std::string& v) { rows.emplace_back(k, v); };
  row("throughput", thousands(num(s, "throughput_sps")) + " samples/s (global batch " +
                        thousands(num(s, "global_batch")) + ")");
  if (s["scaling_efficiency"].is_number()) {
    const auto& ci = s["baseline_1rank_rel_ci"];
    row("scaling efficiency",
        fixed(100 * s["scaling_efficiency"].get<double>(), 0) +
            " % (1 rank: " + fixed(num(s, "baseline_1rank_sps"), 0) + " samples/s" +
            (ci.is_number() ? " +-" + fixed(100 * ci.get<double>(), 1) + " %" : "") + ", " +
            std::to_string(s.value("baseline_1rank_steps", int64_t{0})) +
            " steps bound as the job's rank 0)");
  }
  const auto& st = s["step_time"];
  row("step time", ms(num(st, "total_s")) + " = compute " + ms(num(st, "compute_s")) +
                       " + exposed communication " + ms(num(st, "exposed_comm_s")) + " + other " +
                       ms(num(st, "other_s")) + " (optimizer, loss allreduce), the mean of " +
                       std::to_string(st.value("timed_steps", int64_t{0})) + " timed steps");
  row("outside the steps", fixed(num(st, "outside_steps_s"), 1) +
                               " s once (start-up, the first step, evaluation, checkpoints)");
  const auto& ar = s["allreduce"];
  // A pipeline with one replica reduces nothing; with several, each stage its own gradients.
  const auto& par = s["plan"]["parallel"];
  const bool pipelined = par.is_object() && par.value("stages", 1) > 1;
  if (s.value("ranks", 1) < 2) {
    row("allreduce", "none: one rank has nothing to reduce");
  } else if (pipelined) {
    row("allreduce", par.value("replicas", 1) > 1
                         ? "each stage's gradients among its " +
                               std::to_string(par.value("replicas", 1)) + " replicas (at most " +
                               bytes_text(num(ar, "gradient_bytes")) +
                               " per step for the whole model)"
                         : "none (one replica of a " + std::to_string(par.value("stages", 1)) +
                               "-stage pipeline)");
  } else {
    std::string a = bytes_text(num(ar, "gradient_bytes")) + " per step in " +
                    bytes_text(num(ar, "bucket_bytes")) + " buckets: ";
    a += ar["sweep_s_per_step"].is_number()
             ? ms(ar["sweep_s_per_step"].get<double>()) + " estimated from the sweep"
             : "not estimated (" + ar.value("sweep_note", "") + ")";
    a += ar["bound_s_per_step"].is_number()
             ? ", bound " + ms(ar["bound_s_per_step"].get<double>()) + " (copy bandwidth " +
                   fixed(num(ar, "copy_gbs"), 1) + " GB/s" +
                   (ar.value("bound_note", "").empty() ? "" : "; " + ar.value("bound_note", "")) +
                   ")"
             : ", no bound (" + ar.value("bound_note", "") + ")";
    const json& lv = ar.value("bound_levels", json::object());
    if (lv.contains("network_s") && lv["network_s"].is_number()) {
      a += " (network " + ms(lv["network_s"].get<double>()) + " at " +
           fixed(num(lv, "network_node_gbps"), 2) + " GB/s a node, memory " +
           ms(num(lv, "memory_s")) + ")";
    }
    if (ar["wait_s_per_step"].is_number() &&
        ar["wait_s_per_step"].get<double>() > num(ar, "sweep_s_per_step")) {
      a += "; the rest of the exposed " + ms(num(st, "exposed_comm_s")) +
           " was waiting for the slowest rank (" + ms(ar["wait_s_per_step"].get<double>()) + ")";
    }
    row("allreduce", a);
  }
  if (const json m = s.value("memory", json()); m.is_object()) {
    std::string text = bytes_text(num(m, "estimate_bytes")) + " per rank estimated (rank " +
                       std::to_string(m.value("rank", 0)) + ", stage " +
                       std::to_string(m.value("stage", 0)) + ")";
    if (m["measured_bytes"].is_number()) {
      text += ", " + bytes_text(num(m, "measured_bytes")) + " measured (" +
              m.value("measured", "") + "); the model's error at most " +
              fixed(100 * num(m, "max_error"), 1) + " % over the ranks measured";
    } else {
      text += "; not measured (the resident high-water mark could not be restarted)";
    }
    row("memory", text);
  }
  const double acc = num(s, "heldout_accuracy", -1);
  if (s.contains("unigram_entropy_bits") && s["heldout_bits_per_byte"].is_number()) {
    row("held-out loss", fixed(s["heldout_bits_per_byte"].get<double>(), 3) +
                             " bits per byte (the file's unigram entropy: " +
                             fixed(num(s, "unigram_entropy_bits"), 3) + "); next-byte accuracy " +
                             fixed(100 * acc, 1) + " %");
  } else {
    row("loss / accuracy", fixed(num(s, "final_loss"), 4) + " / " +
                               (acc >= 0 ? fixed(100 * acc, 1) + " % held-out" : "not measured"));
  }
  std::string src = s.value("plan_source", "");
  const auto& db = s["database"];
  const std::string where = db.value("path", "");
  if (!s.value("resumed_from", "").empty()) {
    src = "the run directory's plan.json (resumed; it was " + src + ")";
  } else if (src == "cache") {
    src = "cached in " + where + " (no tuning; --retune measures again)";
    if (db.value("from_site", false)) src += " (site database '" + db.value("site", "") + "')";
    if (db.value("signed_by", "") == tuner::db::kUnsigned) {
      src += "; imported unsigned: no trusted key vouches for it";
    }
  } else if (src == "tuned") {
    const double budget = num(s["budget"], "budget_s");
    src = "tuned in " + fixed(num(s, "tuning_seconds"), 1) + " s" +
          (budget > 0 ? " of a " + fixed(budget, 0) + " s budget" : std::string()) +
          ", stored in " + where;
  } else if (src == "default") {
    src = "the recipe's own settings (not tuned)";
  }
  row("plan", src);
  const auto& tp = s["plan"]["training"];
  row("  training", "per-rank batch " + std::to_string(tp.value("per_rank_batch", 0)) +
                        ", global " + std::to_string(tp.value("global_batch", 0)) + ", " +
                        tp.value("scaling", "") + " scaling, lr x" + fixed(num(tp, "lr_scale"), 2) +
                        ", bucket " + bytes_text(num(tp, "bucket_bytes")) + ", overlap " +
                        (tp.value("overlap", false) ? "on" : "off"));
  if (pipelined) row("  layout", par.value("reason", ""));
  if (!s.value("plan_reason", "").empty()) row("  why", s.value("plan_reason", ""));
  std::string conf;
  if (s["regret"].is_number()) {
    conf += "an exhaustive search of the training choices would gain at most ~" +
            fixed(100 * s["regret"].get<double>(), 0) + " % throughput";
  }
  if (ar.contains("collective_regret") && ar["collective_regret"].is_number()) {
    conf += std::string(conf.empty() ? "" : "; ") + "of the collectives, ~" +
            fixed(100 * ar["collective_regret"].get<double>(), 0) +
            " % of the allreduce time (from the sweep's fitted models)";
  }
  if (!conf.empty()) row("  regret (est.)", conf);
  if (!s["budget"].value("cut", "").empty()) row("  budget cut", s["budget"].value("cut", ""));
  if (num(s, "trial_measured_sps") > 0) {
    row("  trials", thousands(num(s, "trial_measured_sps")) +
                        " samples/s in the last trial; training ran at " +
                        thousands(num(s, "throughput_sps")));
  }
  // The models' prediction, made before the run (launch_prediction.h), beside what it measured.
  const json& p = s.value("prediction", json::object());
  if (p.contains("step_ms")) {
    row("predicted",
        thousands(num(p, "throughput_sps")) + " samples/s, step " + fixed(num(p, "step_ms"), 2) +
            " ms = compute " + fixed(num(p, "compute_ms"), 2) + " ms + exposed communication " +
            fixed(num(p, "exposed_comm_ms"), 2) + " ms (" + p.value("algorithm", "") +
            "); measured " + thousands(num(s, "throughput_sps")) + " samples/s, step " +
            ms(num(st, "compute_s") + num(st, "exposed_comm_s")));
    // Nodes that are one machine share its cores: the prediction above counted on it.
    if (p.contains("machines_note")) row("  machines", p.value("machines_note", ""));
  }
  for (const auto& w : s.value("warnings", json::array())) row("warning", w.get<std::string>());
  row("wall time", fixed(num(s, "wall_seconds"), 1) + " s");
  row("run directory", s.value("run_dir", ""));
  return rows;
}

std::string wrap_words(const std::string& text, size_t width, size_t indent) {
  std::string out, line;
  const std::string pad(indent, ' ');
  for (const std::string& word : strings::split(text, ' ')) {
    if (word.empty()) continue;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += (out.empty() ? "" : "\n" + pad) + line;
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;  // a word longer than the line stays whole
  }
  if (!line.empty()) out += (out.empty() ? "" : "\n" + pad) + line;
  return out;
}

std::string format_summary(const json& s, int width) {
  std::string o = "summary: " + s.value("recipe", "") + " on " +
                  std::to_string(s.value("ranks", 0)) + " rank(s), " +
                  std::to_string(s.value("nodes", 0)) + " node(s)\n";
  constexpr size_t kLabel = 21;  // "  " + the label column
  const size_t value_width = width > static_cast<int>(kLabel) + 20
                                 ? static_cast<size_t>(width) - kLabel
                                 : std::string::npos;
  for (const auto& [k, row] : summary_rows(s)) {
    std::string label = "  " + k;
    label.resize(std::max(kLabel, label.size() + 1), ' ');
    // A cached plan's text and the database paths came from outside: printable only.
    const std::string v = strings::printable(row, "");
    o += label + (value_width == std::string::npos ? v : wrap_words(v, value_width, kLabel)) + "\n";
  }
  return strings::printable(o);
}

}  // namespace dltune::launcher
