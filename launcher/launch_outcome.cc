#include "launcher/launch_outcome.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include "common/paths.h"
#include "common/strings.h"
#include "launcher/launch_job.h"
#include "launcher/report/report.h"

namespace dltune::launcher {
namespace {

using Clock = std::chrono::steady_clock;

double num(const nlohmann::json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string bytes_text(double b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) {
    b /= 1024;
    ++u;
  }
  return fixed(b, b < 10 && u > 0 ? 1 : 0) + " " + unit[u];
}

// The sweep's median for `algo` at the smallest measured size at or above `bytes`, else the
// largest below it when that is at least a quarter of `bytes` (further down, latency dominates
// and a linear scaling would be meaningless), scaled linearly to `bytes`.
std::optional<double> measured_us(const std::vector<tuner::db::Measurement>& rows,
                                  const std::string& algo, uint64_t bytes) {
  const tuner::db::Measurement* above = nullptr;
  const tuner::db::Measurement* below = nullptr;
  for (const auto& m : rows) {
    if (m.failed || m.algorithm != algo || m.collective != "allreduce" || m.bytes == 0) continue;
    if (m.bytes >= bytes && (above == nullptr || m.bytes < above->bytes)) above = &m;
    if (m.bytes < bytes && (below == nullptr || m.bytes > below->bytes)) below = &m;
  }
  if (below != nullptr && below->bytes * 4 < bytes) below = nullptr;
  const tuner::db::Measurement* best = above != nullptr ? above : below;
  if (best == nullptr) return std::nullopt;
  return best->median_us * static_cast<double>(bytes) / static_cast<double>(best->bytes);
}

// Allreduce seconds per step predicted from the sweep: every gradient bucket with its algorithm.
std::optional<double> predicted_allreduce_s(const RunFacts& f) {
  if (f.ranks < 2 || f.gradient_bytes == 0) return 0.0;
  const uint64_t bucket = std::max<uint64_t>(f.choice.plan.training.bucket_bytes, 1);
  double us = 0;
  for (uint64_t done = 0; done < f.gradient_bytes; done += bucket) {
    const uint64_t b = std::min(bucket, f.gradient_bytes - done);
    auto rule = f.choice.plan.algorithm_for(recipes::Collective::kAllreduce, b);
    const std::string algo =
        rule ? std::string(recipes::algorithm_name(rule->algo)) : std::string("ring");
    auto t = measured_us(f.choice.collective_measurements, algo, b);
    if (!t) return std::nullopt;
    us += *t;
  }
  return us * 1e-6;
}

}  // namespace

// ---- MetricsFollower

MetricsFollower::MetricsFollower(std::string path, long total_steps, Progress* progress)
    : path_(std::move(path)), total_(total_steps), progress_(progress) {
  thread_ = std::thread([this] { loop(); });
}

MetricsFollower::~MetricsFollower() { stop(); }

void MetricsFollower::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void MetricsFollower::loop() {
  std::string pending;
  ProgressState state;
  state.total = total_;
  // Resumed runs append: start following at the current end of the file.
  std::streamoff offset = 0;
  if (std::ifstream probe(path_, std::ios::ate); probe) offset = probe.tellg();
  while (true) {
    const bool last = stop_.load();
    std::ifstream f(path_);
    if (f) {
      f.seekg(offset);
      std::string chunk((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      offset += static_cast<std::streamoff>(chunk.size());
      pending += chunk;
      size_t nl;
      bool updated = false;
      while ((nl = pending.find('\n')) != std::string::npos) {
        const std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) continue;
        const std::string ev = j.value("event", "");
        if (ev == "step") {
          state.step = static_cast<long>(num(j, "step")) + 1;
          state.loss = num(j, "loss", -1);
          state.samples_per_s = num(j, "samples_per_s");
          updated = true;
        } else if (ev == "eval") {
          state.accuracy = num(j, "heldout_accuracy", -1);
          updated = true;
        }
      }
      if (updated && progress_ != nullptr) progress_->update(state);
    }
    if (last) return;
    for (int i = 0; i < 4 && !stop_.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// ---- the outcome

MetricsLog read_metrics(const std::string& path) {
  MetricsLog log;
  std::ifstream in(path);
  std::map<int64_t, nlohmann::json> steps, evals;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
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

namespace {

// The summary's "warnings" (make_summary()'s contract); `s` holds the figures made so far.
std::vector<std::string> run_warnings(const RunFacts& f, const MetricsLog& log,
                                      const nlohmann::json& s) {
  std::vector<std::string> w;
  if (!f.baseline_error.empty()) {
    w.push_back("scaling efficiency not measured: " + f.baseline_error);
  } else if (f.baseline_sps > 0 && !(f.baseline_rel_ci <= kBaselineRelCi)) {
    w.push_back("the scaling efficiency's 1-rank baseline is only known to +-" +
                fixed(100 * f.baseline_rel_ci, 1) + " % after " + std::to_string(f.baseline_steps) +
                " steps (the machine was noisy; the efficiency is as uncertain)");
  }
  if (s.value("ranks_shared_cores", false)) {
    const int per_node = f.ranks / std::max(1, f.nodes);
    w.push_back(std::to_string(per_node) + " ranks per node shared " +
                std::to_string(f.cores_per_node) +
                " cores (binding: " + (f.binding.empty() ? std::string("auto") : f.binding) +
                "): each rank got less than a core, so throughput and scaling efficiency are "
                "below what one rank per core gives (mpirun would have refused without "
                "--oversubscribe)");
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

}  // namespace

nlohmann::json make_summary(const RunFacts& f, const MetricsLog& log, const RunDir& dir) {
  const auto& w = f.worker;
  const double sps = num(w, "throughput_sps");
  const double steps = std::max(1.0, num(w, "steps"));
  nlohmann::json s;
  s["recipe"] = f.recipe;
  s["ranks"] = f.ranks;
  s["nodes"] = f.nodes;
  s["backend"] = f.backend;
  s["steps"] = log.steps.empty() ? static_cast<int64_t>(num(w, "steps"))
                                 : static_cast<int64_t>(num(log.steps.back(), "step")) + 1;
  s["throughput_sps"] = sps;
  s["baseline_1rank_sps"] = f.baseline_sps;
  s["baseline_1rank_steps"] = f.baseline_steps;
  s["baseline_1rank_rel_ci"] = std::isfinite(f.baseline_rel_ci) ? nlohmann::json(f.baseline_rel_ci)
                                                                : nlohmann::json(nullptr);
  s["baseline_1rank_bind"] = f.baseline_bind;
  s["scaling_efficiency"] = f.baseline_sps > 0 ? nlohmann::json(sps / (f.ranks * f.baseline_sps))
                                               : nlohmann::json(nullptr);
  s["final_loss"] = num(w, "final_loss");
  s["heldout_accuracy"] = num(w, "heldout_accuracy", -1);
  s["heldout_loss"] = num(w, "heldout_loss", -1);
  if (f.unigram_entropy_bits >= 0) {
    const double loss = num(w, "heldout_loss", -1);
    s["heldout_bits_per_byte"] =
        loss >= 0 ? nlohmann::json(loss / std::log(2.0)) : nlohmann::json(nullptr);
    s["unigram_entropy_bits"] = f.unigram_entropy_bits;
  }
  s["global_batch"] = num(w, "global_batch");
  // compute: input copy, forward and backward, per timed step; the rest of a step's wall time
  // is the optimizer, the loss allreduce, evaluations, checkpoints and start-up, spread over the
  // steps this run executed (a resumed run did not execute the earlier ones).
  const double timed = std::max(1.0, num(w, "timed_steps", steps));
  const double run = std::max(1.0, num(w, "steps_run", steps));
  const double compute = num(w, "compute_s") / timed, comm = num(w, "comm_s") / timed,
               total = num(w, "wall_seconds") / run;
  s["step_time"] = {{"compute_s", compute},
                    {"exposed_comm_s", comm},
                    {"other_s", std::max(0.0, total - compute - comm)},
                    {"total_s", total}};
  nlohmann::json ar;
  ar["gradient_bytes"] = f.gradient_bytes;
  ar["bucket_bytes"] = f.choice.plan.training.bucket_bytes;
  const auto predicted = predicted_allreduce_s(f);
  ar["sweep_s_per_step"] = predicted ? nlohmann::json(*predicted) : nlohmann::json(nullptr);
  // The memory-traffic bound on one node: each rank's slice needs the other ranks' (p-1)/p
  // of the gradient brought in, and its result taken out to them, so 2 (p-1)/p N bytes cross
  // each core; a core's copy at copy_gbs moves 2 x copy_gbs (every byte is read and written),
  // hence (p-1)/p N / copy_gbs. (This used to charge both directions at the copy rate, a bound
  // twice too high, which the shared-memory allreduce "beat" on the quickstart.)
  const double p = f.ranks;
  ar["bound_s_per_step"] =
      f.copy_gbs > 0 && f.ranks > 1
          ? nlohmann::json((p - 1) / p * static_cast<double>(f.gradient_bytes) / (f.copy_gbs * 1e9))
          : nlohmann::json(0.0);
  ar["copy_gbs"] = f.copy_gbs;
  s["allreduce"] = ar;
  s["plan_source"] = f.choice.source;
  s["plan"] = recipes::plan_to_json(f.choice.plan);
  s["plan_reason"] = f.choice.plan.provenance.reason;
  s["predicted_sps"] = f.choice.plan.provenance.predicted_sps;
  s["trial_measured_sps"] = f.choice.plan.provenance.measured_sps;
  s["database"] = {
      {"path", f.choice.db_path}, {"from_site", f.choice.from_site}, {"site", f.choice.site}};
  s["notes"] = f.choice.notes;
  s["ranks_shared_cores"] =
      f.cores_per_node > 0 && f.ranks / std::max(1, f.nodes) > f.cores_per_node;
  s["warnings"] = run_warnings(f, log, s);
  s["tuning_seconds"] = f.choice.tuning_s;
  s["wall_seconds"] = f.wall_seconds;
  s["resumed_from"] = f.resumed_from;
  s["run_dir"] = dir.path;
  return s;
}

std::string format_summary(const nlohmann::json& s) {
  std::string o;
  auto line = [&](const std::string& k, const std::string& v) { o += "  " + k + v + "\n"; };
  o += "summary: " + s.value("recipe", "") + " on " + std::to_string(s.value("ranks", 0)) +
       " rank(s), " + std::to_string(s.value("nodes", 0)) + " node(s)\n";
  line("throughput         ", fixed(num(s, "throughput_sps"), 0) + " samples/s");
  if (s["scaling_efficiency"].is_number()) {
    const auto& ci = s["baseline_1rank_rel_ci"];
    line("scaling efficiency ",
         fixed(100 * s["scaling_efficiency"].get<double>(), 0) +
             " % (1 rank: " + fixed(num(s, "baseline_1rank_sps"), 0) + " samples/s" +
             (ci.is_number() ? " +-" + fixed(100 * ci.get<double>(), 1) + " %" : "") + ", " +
             std::to_string(s.value("baseline_1rank_steps", int64_t{0})) +
             " steps bound as the job's rank 0)");
  }
  const auto& st = s["step_time"];
  line("step time          ", fixed(1e3 * num(st, "total_s"), 2) + " ms = compute " +
                                  fixed(1e3 * num(st, "compute_s"), 2) +
                                  " ms + exposed communication " +
                                  fixed(1e3 * num(st, "exposed_comm_s"), 2) + " ms + other " +
                                  fixed(1e3 * num(st, "other_s"), 2) +
                                  " ms (optimizer, evaluation, checkpoints, start-up)");
  const auto& ar = s["allreduce"];
  std::string arl = bytes_text(num(ar, "gradient_bytes")) + " per step in " +
                    bytes_text(num(ar, "bucket_bytes")) + " buckets";
  if (ar["sweep_s_per_step"].is_number()) {
    arl += ": " + fixed(1e3 * ar["sweep_s_per_step"].get<double>(), 2) +
           " ms estimated from the sweep vs bound " + fixed(1e3 * num(ar, "bound_s_per_step"), 2) +
           " ms";
  }
  if (!ar["sweep_s_per_step"].is_number()) arl += " (the sweep measured no size near it)";
  // A pipeline with one replica reduces nothing; with several, each stage its own gradients.
  const auto& par = s["plan"]["parallel"];
  if (par.is_object() && par.value("stages", 1) > 1)
    arl = par.value("replicas", 1) > 1
              ? "each stage's gradients among its " + std::to_string(par.value("replicas", 1)) +
                    " replicas (at most " + bytes_text(num(ar, "gradient_bytes")) +
                    " per step for the whole model)"
              : "none (one replica of a " + std::to_string(par.value("stages", 1)) +
                    "-stage pipeline)";
  line("allreduce          ", arl);
  const double acc = num(s, "heldout_accuracy", -1);
  if (s.contains("unigram_entropy_bits") && s["heldout_bits_per_byte"].is_number()) {
    line("held-out loss      ", fixed(s["heldout_bits_per_byte"].get<double>(), 3) +
                                    " bits per byte (the file's unigram entropy: " +
                                    fixed(num(s, "unigram_entropy_bits"), 3) +
                                    "); next-byte accuracy " + fixed(100 * acc, 1) + " %");
  } else {
    line("loss / accuracy    ", fixed(num(s, "final_loss"), 4) + " / " +
                                    (acc >= 0 ? fixed(100 * acc, 1) + " % held-out" : "n/a"));
  }
  std::string src = s.value("plan_source", "");
  const auto& db = s["database"];
  if (src == "cache") {
    src += " (no tuning) from " + db.value("path", "");
    if (db.value("from_site", false)) src += " (site database '" + db.value("site", "") + "')";
  } else if (src == "tuned") {
    src += " in " + fixed(num(s, "tuning_seconds"), 1) + " s, stored in " + db.value("path", "");
  }
  line("plan               ", src);
  const auto& tp = s["plan"]["training"];
  line("  training         ", "per-rank batch " + std::to_string(tp.value("per_rank_batch", 0)) +
                                  ", global " + std::to_string(tp.value("global_batch", 0)) + ", " +
                                  tp.value("scaling", "") + " scaling, lr x" +
                                  fixed(num(tp, "lr_scale"), 2) + ", bucket " +
                                  bytes_text(num(tp, "bucket_bytes")) + ", overlap " +
                                  (tp.value("overlap", false) ? "on" : "off"));
  const auto& pl = s["plan"]["parallel"];
  if (pl.is_object() && pl.value("stages", 1) > 1)
    line("  layout           ", pl.value("reason", ""));
  if (!s.value("plan_reason", "").empty()) line("  why              ", s.value("plan_reason", ""));
  if (num(s, "predicted_sps") > 0 || num(s, "trial_measured_sps") > 0) {
    line("  predicted/trial  ", fixed(num(s, "predicted_sps"), 0) + " / " +
                                    fixed(num(s, "trial_measured_sps"), 0) + " samples/s");
  }
  if (s.contains("warnings")) {
    for (const auto& w : s["warnings"]) line("warning            ", w.get<std::string>());
  }
  line("wall time          ", fixed(num(s, "wall_seconds"), 1) + " s");
  line("run directory      ", s.value("run_dir", ""));
  return o;
}

Status write_report(const RunFacts& f, const MetricsLog& log, const nlohmann::json& s,
                    const RunDir& dir) {
  report::ReportData d;
  d.title = f.recipe + " on " + std::to_string(f.ranks) + " rank(s)";
  for (const auto& line : strings::split(format_summary(s), '\n')) {
    const auto t = strings::trim(line);
    if (t.empty() || t.rfind("summary:", 0) == 0) continue;
    const auto gap = t.find("  ");
    if (gap == std::string::npos) continue;
    d.summary.emplace_back(std::string(t.substr(0, gap)),
                           std::string(strings::trim(t.substr(gap))));
  }
  for (const auto& j : log.steps) {
    d.steps.push_back({static_cast<long>(num(j, "step")), num(j, "loss"), num(j, "samples_per_s")});
  }
  for (const auto& j : log.evals) {
    d.evals.push_back({static_cast<long>(num(j, "step")), num(j, "heldout_accuracy")});
  }
  std::map<std::string, report::TuningCurve> curves;
  std::map<uint64_t, bool> sizes;
  // One curve per algorithm and ring segment size, named as the plan names its choice.
  auto curve_name = [](const std::string& algo, uint64_t segment) {
    return segment > 0 ? algo + " (segments " + bytes_text(static_cast<double>(segment)) + ")"
                       : algo;
  };
  for (const auto& m : f.choice.collective_measurements) {
    if (m.failed || m.collective != "allreduce") continue;
    const std::string name = curve_name(m.algorithm, m.segment_bytes);
    auto& c = curves[name];
    c.algo = name;
    c.bytes_us.emplace_back(static_cast<double>(m.bytes), m.median_us);
    sizes[m.bytes] = true;
  }
  for (auto& [name, c] : curves) {
    std::sort(c.bytes_us.begin(), c.bytes_us.end());
    d.tuning.push_back(std::move(c));
  }
  for (const auto& [b, unused] : sizes) {
    if (auto r = f.choice.plan.algorithm_for(recipes::Collective::kAllreduce, b)) {
      d.chosen.emplace_back(
          b, curve_name(std::string(recipes::algorithm_name(r->algo)), r->segment_bytes));
    }
  }
  const auto& st = s["step_time"];
  d.step_breakdown = {{"compute", num(st, "compute_s")},
                      {"exposed communication", num(st, "exposed_comm_s")},
                      {"other", num(st, "other_s")}};
  return paths::write_file_atomic(dir.report(), report::render_report_html(d));
}

}  // namespace dltune::launcher
