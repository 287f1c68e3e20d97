// The summary a person reads at the end of `dltune launch` (launch_outcome.h): summary.json's
// figures as (label, value) rows, printed with the values wrapped under their column.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "launcher/flow/plan_kernels.h"
#include "launcher/flow/reshape.h"
#include "launcher/flow/text_format.h"
#include "launcher/report/launch_outcome.h"
#include "tuner/db/records.h"

namespace dltune::launcher {
namespace {

using json = nlohmann::json;
using Rows = std::vector<std::pair<std::string, std::string>>;

using text::bytes_text;
using text::fixed;
using text::flag;
using text::ms;
using text::num;
using text::thousands;

// Where the 1-rank baseline's figure came from: ", 160 steps in 3.5 s", or ", from the database:
// measured 2026-11-30T16:02:11Z on node01 (launch.baseline=measure measures it again)".
std::string baseline_origin(const json& s) {
  if (s.value("baseline_1rank_source", "") == "database") {
    const std::string host = s.value("baseline_1rank_measured_on", "");
    return ", from the database: measured " + s.value("baseline_1rank_measured_at", "") +
           (host.empty() ? "" : " on " + host) + " (launch.baseline=measure measures it again)";
  }
  return ", " + std::to_string(s.value("baseline_1rank_steps", int64_t{0})) + " steps in " +
         fixed(num(s, "baseline_1rank_seconds"), 1) + " s";
}

// The throughput, scaling efficiency (where a 1-rank baseline ran) and step time rows.
void throughput_rows(const json& s, Rows& rows) {
  rows.emplace_back("compute", std::to_string(s.value("ranks", 0)) + " rank(s) x " +
                                   std::to_string(s.value("threads_per_rank", 1)) + " thread(s), " +
                                   s.value("precision", std::string("fp32")));
  const json& shape = s.contains("shape_search") ? s["shape_search"] : json();
  if (shape.is_object() && !shape.value("why", "").empty())
    rows.emplace_back("ranks x threads", shape.value("why", ""));
  rows.emplace_back("throughput", thousands(num(s, "throughput_sps")) +
                                      " samples/s (global batch " +
                                      thousands(num(s, "global_batch")) + ")");
  if (s["scaling_efficiency"].is_number()) {
    const auto& ci = s["baseline_1rank_rel_ci"];
    rows.emplace_back("scaling efficiency",
                      fixed(100 * s["scaling_efficiency"].get<double>(), 0) +
                          " % (1 rank: " + fixed(num(s, "baseline_1rank_sps"), 0) + " samples/s" +
                          (ci.is_number() ? " +-" + fixed(100 * ci.get<double>(), 1) + " %" : "") +
                          baseline_origin(s) + ", bound as the job's rank 0)");
  } else if (s.value("baseline_1rank", "") == "off") {
    rows.emplace_back("scaling efficiency", "not measured (launch.baseline: off)");
  }
  const auto& st = s["step_time"];
  rows.emplace_back("step time",
                    ms(num(st, "total_s")) + " = compute " + ms(num(st, "compute_s")) +
                        " + exposed communication " + ms(num(st, "exposed_comm_s")) + " + other " +
                        ms(num(st, "other_s")) + " (optimizer, loss allreduce), the mean of " +
                        std::to_string(st.value("timed_steps", int64_t{0})) + " timed steps");
  rows.emplace_back("outside the steps",
                    fixed(num(st, "outside_steps_s"), 1) +
                        " s once (start-up, the first step, evaluation, checkpoints)");
  const json& ck = s.contains("checkpoints") ? s["checkpoints"] : json();
  if (ck.is_object() && num(ck, "count") > 0) {
    const json& share = ck.contains("share_of_step") ? ck["share_of_step"] : json();
    rows.emplace_back(
        "checkpoints",
        std::to_string(static_cast<int64_t>(num(ck, "count"))) + " written " +
            (flag(ck, "background") ? "in the background" : "while training waited") + " (" +
            ms(num(ck, "write_s_each")) + " each); training waited " +
            ms(num(ck, "blocked_s_per_step")) + " per step" +
            (share.is_number() ? " (" + fixed(100 * share.get<double>(), 2) + " % of a step)"
                               : std::string()));
  }
}

// The allreduce row's text for data parallelism: the gradients' volume, the sweep's estimate,
// the bound (and its levels), and the exposed time spent waiting for the slowest rank.
std::string data_parallel_allreduce(const json& s) {
  const auto& ar = s["allreduce"];
  const auto& st = s["step_time"];
  std::string a = bytes_text(num(ar, "gradient_bytes")) + " per step in " +
                  bytes_text(num(ar, "bucket_bytes")) + " buckets: ";
  a += ar["sweep_s_per_step"].is_number()
           ? ms(ar["sweep_s_per_step"].get<double>()) + " estimated from the sweep"
           : "not estimated (" + ar.value("sweep_note", "") + ")";
  a += ar["bound_s_per_step"].is_number()
           ? ", bound " + ms(ar["bound_s_per_step"].get<double>()) + " (copy bandwidth " +
                 fixed(num(ar, "copy_gbs"), 1) + " GB/s" +
                 (ar.value("bound_note", "").empty() ? "" : "; " + ar.value("bound_note", "")) + ")"
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
  return a;
}

// The allreduce row's text: none for one rank; a pipeline with one replica reduces nothing,
// with several each stage its own gradients; else data parallelism's (above).
std::string allreduce_text(const json& s, const json& par, bool pipelined) {
  if (s.value("ranks", 1) < 2) return "none: one rank has nothing to reduce";
  if (!pipelined) return data_parallel_allreduce(s);
  const auto& ar = s["allreduce"];
  return par.value("replicas", 1) > 1
             ? "each stage's gradients among its " + std::to_string(par.value("replicas", 1)) +
                   " replicas (at most " + bytes_text(num(ar, "gradient_bytes")) +
                   " per step for the whole model)"
             : "none (one replica of a " + std::to_string(par.value("stages", 1)) +
                   "-stage pipeline)";
}

// The memory row's text: the model's estimate for the largest rank and, where the peak was
// measured, the measurement and the model's largest error.
std::string memory_row_text(const json& m) {
  std::string text = bytes_text(num(m, "estimate_bytes")) + " per rank estimated (rank " +
                     std::to_string(m.value("rank", 0)) + ", stage " +
                     std::to_string(m.value("stage", 0)) + ")";
  if (m["measured_bytes"].is_number()) {
    text += ", " + bytes_text(num(m, "measured_bytes")) + " measured (" + m.value("measured", "") +
            "); the model's error at most " + fixed(100 * num(m, "max_error"), 1) +
            " % over the ranks measured";
  } else {
    text += "; not measured (the resident high-water mark could not be restarted)";
  }
  return text;
}

// The held-out loss row: bits per byte beside the unigram entropy for byte data, else the final
// loss and the held-out accuracy.
void loss_row(const json& s, Rows& rows) {
  const double acc = num(s, "heldout_accuracy", -1);
  if (s.contains("unigram_entropy_bits") && s["heldout_bits_per_byte"].is_number()) {
    // Both units, labelled: the progress line shows the loss in nats (issue 42).
    rows.emplace_back("held-out loss",
                      fixed(num(s, "heldout_loss"), 4) +
                          " nats = " + fixed(s["heldout_bits_per_byte"].get<double>(), 3) +
                          " bits per byte (the file's unigram entropy: " +
                          fixed(num(s, "unigram_entropy_bits"), 3) +
                          " bits); final training loss " + fixed(num(s, "final_loss"), 4) +
                          " nats; next-byte accuracy " + fixed(100 * acc, 1) + " %");
  } else {
    rows.emplace_back("loss / accuracy",
                      fixed(num(s, "final_loss"), 4) + " / " +
                          (acc >= 0 ? fixed(100 * acc, 1) + " % held-out" : "not measured"));
  }
}

// Where the plan came from: a resumed run's plan.json, the database's cache, a tuning, or the
// recipe's own settings.
std::string plan_source_text(const json& s) {
  std::string src = s.value("plan_source", "");
  const auto& db = s["database"];
  const std::string where = db.value("path", "");
  if (s.contains("reshaped") && s["reshaped"].is_object()) {
    src = "planned again for a new shape (the rows below say how)";
  } else if (!s.value("resumed_from", "").empty()) {
    src = "the run directory's plan.json (resumed; it was " + src + ")";
  } else if (src == "cache") {
    src = "cached in " + where + " (no tuning; --retune measures again)";
    // The run's length is not in the tuning key: a plan tuned for another length says so.
    const int64_t tuned_for = s["plan"]["provenance"].value("run_steps", int64_t{0});
    const int64_t steps = s.value("steps", int64_t{0});
    if (tuned_for > 0 && steps > 0 && tuned_for != steps)
      src += "; tuned for a run of " + std::to_string(tuned_for) + " steps";
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
  return src;
}

// The plan's indented detail rows: its training settings, the pipeline layout, why it was
// chosen, the estimated regret, what the budget cut, and the trials' throughput.
void plan_rows(const json& s, const json& par, bool pipelined, Rows& rows) {
  const auto& tp = s["plan"]["training"];
  rows.emplace_back("  training",
                    "per-rank batch " + std::to_string(tp.value("per_rank_batch", 0)) +
                        ", global " + std::to_string(tp.value("global_batch", 0)) + ", " +
                        tp.value("scaling", "") + " scaling, lr x" + fixed(num(tp, "lr_scale"), 2) +
                        ", bucket " + bytes_text(num(tp, "bucket_bytes")) + ", overlap " +
                        (tp.value("overlap", false) ? "on" : "off"));
  if (const json k = tp.value("kernels", json()); k.is_object() && !k.empty()) {
    std::map<std::string, std::string> kernels;
    for (const auto& [node, kernel] : k.items())
      if (kernel.is_string()) kernels[node] = kernel.get<std::string>();
    rows.emplace_back("  kernels", kernels_text(kernels));
  }
  if (pipelined) rows.emplace_back("  layout", par.value("reason", ""));
  if (!s.value("plan_reason", "").empty()) rows.emplace_back("  why", s.value("plan_reason", ""));
  const auto& ar = s["allreduce"];
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
  if (!conf.empty()) rows.emplace_back("  regret (est.)", conf);
  if (!s["budget"].value("cut", "").empty())
    rows.emplace_back("  budget cut", s["budget"].value("cut", ""));
  if (num(s, "trial_measured_sps") > 0) {
    rows.emplace_back("  trials", thousands(num(s, "trial_measured_sps")) +
                                      " samples/s in the last trial; training ran at " +
                                      thousands(num(s, "throughput_sps")));
  }
}

// The models' prediction, made before the run (launch_prediction.h), beside what it measured.
void prediction_rows(const json& s, Rows& rows) {
  const json& p = s.value("prediction", json::object());
  if (!p.contains("step_ms")) return;
  const auto& st = s["step_time"];
  // The interval its inputs' spreads give, where the prediction has one.
  std::string interval;
  if (const json& r = p.value("throughput_sps_range", json());
      r.is_array() && r.size() == 2 && r[0].is_number() && r[1].is_number() &&
      thousands(r[0].get<double>()) != thousands(r[1].get<double>())) {
    interval = " (" + thousands(r[0].get<double>()) + "-" + thousands(r[1].get<double>()) + ")";
  }
  rows.emplace_back("predicted",
                    thousands(num(p, "throughput_sps")) + interval + " samples/s, step " +
                        fixed(num(p, "step_ms"), 2) + " ms = compute " +
                        fixed(num(p, "compute_ms"), 2) + " ms + exposed communication " +
                        fixed(num(p, "exposed_comm_ms"), 2) + " ms (" + p.value("algorithm", "") +
                        "); measured " + thousands(num(s, "throughput_sps")) + " samples/s, step " +
                        ms(num(st, "compute_s") + num(st, "exposed_comm_s")));
  if (!interval.empty()) rows.emplace_back("  interval", p.value("interval_note", ""));
  // The overlap it assumed: how compute and communication slow each other while both run.
  if (const json& o = p.value("overlap", json::object()); o.contains("interference")) {
    rows.emplace_back("  overlap", o.value("interference", "") + "; compute " +
                                       fixed(num(o, "compute_slowed_ms"), 2) + " ms slower for it");
  }
  // Nodes that are one machine share its cores: the prediction above counted on it.
  if (p.contains("machines_note")) rows.emplace_back("  machines", p.value("machines_note", ""));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> summary_rows(const json& s) {
  Rows rows;
  throughput_rows(s, rows);
  const auto& par = s["plan"]["parallel"];
  const bool pipelined = par.is_object() && par.value("stages", 1) > 1;
  rows.emplace_back("allreduce", allreduce_text(s, par, pipelined));
  if (const json m = s.value("memory", json()); m.is_object())
    rows.emplace_back("memory", memory_row_text(m));
  loss_row(s, rows);
  rows.emplace_back("plan", plan_source_text(s));
  plan_rows(s, par, pipelined, rows);
  prediction_rows(s, rows);
  if (s.contains("reshaped") && s["reshaped"].is_object())
    rows.emplace_back("new shape", reshape_text(s["reshaped"]));
  // Each restart (launch.restarts): when, which rank and why, where it continued from.
  const json restarts = s.value("restarts", json::array());
  for (size_t i = 0; restarts.is_array() && i < restarts.size(); ++i) {
    rows.emplace_back("restart " + std::to_string(i + 1), restart_text(restarts[i]));
  }
  for (const auto& w : s.value("warnings", json::array()))
    rows.emplace_back("warning", w.get<std::string>());
  rows.emplace_back("wall time", fixed(num(s, "wall_seconds"), 1) + " s");
  rows.emplace_back("run directory", s.value("run_dir", ""));
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
