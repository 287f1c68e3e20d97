#include "launcher/report/launch_outcome.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include "common/json_input.h"
#include "common/paths.h"
#include "common/strings.h"
#include "launcher/flow/launch_job.h"
#include "launcher/flow/launch_progress.h"
#include "launcher/flow/text_format.h"
#include "launcher/report/report.h"

namespace dltune::launcher {
namespace {

using Clock = std::chrono::steady_clock;

using text::fixed;
using text::num;

// A tuning curve's name: the algorithm and ring segment size, as the plan names its choice.
std::string curve_name(const std::string& algo, uint64_t segment) {
  return segment > 0 ? algo + " (segments " + strings::format_bytes(segment) + ")" : algo;
}

// The sweep's allreduce measurements as one curve per algorithm and segment size, each
// sorted by size.
std::vector<report::TuningCurve> tuning_curves(const std::vector<tuner::db::Measurement>& rows) {
  std::map<std::string, report::TuningCurve> curves;
  for (const auto& m : rows) {
    if (m.failed || m.collective != "allreduce") continue;
    const std::string name = curve_name(m.algorithm, m.segment_bytes);
    auto& c = curves[name];
    c.algo = name;
    c.bytes_us.emplace_back(static_cast<double>(m.bytes), m.median_us);
  }
  std::vector<report::TuningCurve> out;
  for (auto& [name, c] : curves) {
    std::sort(c.bytes_us.begin(), c.bytes_us.end());
    out.push_back(std::move(c));
  }
  return out;
}

// A curve's time at `b` bytes, interpolated between its measured sizes (log-log); below them
// the smallest's, above them scaled linearly from the largest up to 4x its size, else -1.
double curve_us(const std::vector<std::pair<double, double>>& p, double b) {
  if (b <= p.front().first) return p.front().second * (p.size() > 1 ? 1.0 : b / p.front().first);
  if (b >= p.back().first)
    return p.back().first * 4 >= b ? p.back().second * b / p.back().first : -1;
  for (size_t k = 1; k < p.size(); ++k) {
    if (b > p[k].first) continue;
    const double t = std::log(b / p[k - 1].first) / std::log(p[k].first / p[k - 1].first);
    return std::exp(std::log(p[k - 1].second) +
                    t * (std::log(p[k].second) - std::log(p[k - 1].second)));
  }
  return -1;  // not reached: p.back().first > b
}

// The sizes this job allreduces: full buckets and the remainder, with the plan's choice and
// its time on the chosen curve of `tuning` (est_us -1, unknown, without one). None for one
// replica (a lone pipeline allreduces nothing; issue 42: its report plotted "the plan's
// choice" where the summary said there was none).
std::vector<report::JobSize> job_sizes(const RunFacts& f,
                                       const std::vector<report::TuningCurve>& tuning) {
  const uint64_t grad = f.gradient_bytes;
  const uint64_t bucket = std::max<uint64_t>(f.choice.plan.training.bucket_bytes, 1);
  std::vector<std::pair<uint64_t, double>> sizes;
  if (f.choice.plan.parallel.replicas > 1 && grad > 0) {  // replicas x stages = the ranks
    if (grad / bucket > 0) sizes.emplace_back(bucket, static_cast<double>(grad / bucket));
    if (grad % bucket > 0) sizes.emplace_back(grad % bucket, 1.0);
  }
  std::vector<report::JobSize> out;
  for (const auto& [bytes, count] : sizes) {
    report::JobSize j;
    j.bytes = bytes;
    j.per_step = count;
    auto rule = f.choice.plan.algorithm_for(recipes::Collective::kAllreduce, bytes);
    j.algo = rule
                 ? curve_name(std::string(recipes::algorithm_name(rule->algo)), rule->segment_bytes)
                 : "ring";
    for (const auto& c : tuning) {
      if (c.algo != j.algo || c.bytes_us.empty()) continue;
      j.est_us = curve_us(c.bytes_us, static_cast<double>(bytes));
    }
    out.push_back(j);
  }
  return out;
}

// The tuner's confidence: every other candidate of the trials (from the recipe outcome's
// "alternatives"), when they ran now; none otherwise.
void add_rivals(const nlohmann::json& o, report::ReportData& d) {
  if (!o.is_object() || !o.contains("alternatives")) return;
  d.winner = o.value("winner_label", "");
  for (const auto& a : o["alternatives"]) {
    report::Rival r;
    r.label = a.value("label", "");
    const bool failed = a.value("failed", false), skipped = a.value("skipped", false);
    r.ratio = failed || skipped ? 0.0 : a.value("ratio", 0.0);
    r.lo = a.value("lo", 0.0);
    r.hi = a.value("hi", 0.0);
    r.rounds = a.value("rounds", 0);
    r.note = failed ? "failed" : skipped ? "not measured: budget" : "";
    d.rivals.push_back(r);
  }
}

}  // namespace

// ---- the outcome

MetricsLog read_metrics(const std::string& path) {
  MetricsLog log;
  std::ifstream in(path);
  std::map<int64_t, nlohmann::json> steps, evals;
  std::string line;
  while (std::getline(in, line)) {
    auto j = parse_json_bounded(line).value_or(nlohmann::json());
    if (!j.is_object()) continue;
    const std::string ev = j.value("event", "");
    const auto step = static_cast<int64_t>(num(j, "step", -1));
    if (ev == "step") steps[step] = j;
    if (ev == "eval") evals[step] = j;
  }
  for (auto& [s, j] : steps) log.steps.push_back(std::move(j));
  for (auto& [s, j] : evals) log.evals.push_back(std::move(j));
  return log;
}

double measure_copy_gbs(uint64_t bytes) {
  bytes = std::clamp<uint64_t>(bytes, 1 << 16, uint64_t{256} << 20);
  std::unique_ptr<char[]> a(new char[bytes]), b(new char[bytes]);
  std::memset(a.get(), 1, bytes);
  std::memset(b.get(), 2, bytes);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.get(), a.get(), bytes);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best > 0 ? static_cast<double>(bytes) / best / 1e9 : 0;
}

Status write_report(const RunFacts& f, const MetricsLog& log, const nlohmann::json& s,
                    const RunDir& dir) {
  report::ReportData d;
  d.title = f.recipe + " on " + std::to_string(f.ranks) + " rank(s)";
  d.summary = summary_rows(s);
  for (const auto& j : log.steps) {
    d.steps.push_back({static_cast<long>(num(j, "step")), num(j, "loss"), num(j, "samples_per_s")});
  }
  for (const auto& j : log.evals) {
    d.evals.push_back({static_cast<long>(num(j, "step")), num(j, "heldout_accuracy")});
  }
  d.tuning = tuning_curves(f.choice.collective_measurements);
  d.job_sizes = job_sizes(f, d.tuning);
  const auto& st = s["step_time"];
  d.step_breakdown = {{"compute", 1e3 * num(st, "compute_s")},
                      {"exposed communication", 1e3 * num(st, "exposed_comm_s")},
                      {"other", 1e3 * num(st, "other_s")}};
  d.ranks = f.ranks;
  d.throughput_sps = num(s, "throughput_sps");
  d.baseline_sps = f.baseline_sps;
  d.baseline_reused = f.baseline_measured_at > 0;
  d.predicted_sps = num(s, "predicted_sps");
  d.scaling_efficiency =
      s["scaling_efficiency"].is_number() ? s["scaling_efficiency"].get<double>() : -1.0;
  add_rivals(f.choice.recipe_outcome, d);
  if (!d.winner.empty()) d.winner_sps = f.choice.plan.provenance.measured_sps;
  d.regret = s["regret"].is_number() ? s["regret"].get<double>() : -1.0;
  const auto& ar = s["allreduce"];
  d.collective_regret = ar.contains("collective_regret") && ar["collective_regret"].is_number()
                            ? ar["collective_regret"].get<double>()
                            : -1.0;
  d.budget_note = s["budget"].value("cut", "");
  for (const auto& c : f.prediction.curve) {
    d.predicted_scaling.push_back({c.nodes, c.ranks, c.throughput_sps, c.scaling_efficiency});
  }
  if (f.prediction.curve.empty()) {
    d.scaling_note = f.prediction.ok ? f.prediction.curve_note : f.prediction.why_not;
  } else {
    d.scaling_note = "The models' prediction for this job's per-rank work at " +
                     std::to_string(f.ranks / std::max(1, f.nodes)) +
                     " rank(s) per node: " + f.prediction.compute_note + "; " +
                     f.prediction.curve_note + ".";
  }
  return paths::write_file_atomic(dir.report(), report::render_report_html(d));
}

}  // namespace dltune::launcher
