#include "predict/predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include <nlohmann/json.hpp>

#include "recipes/model/partition.h"

namespace dltune::predict {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Compute slowdown of host ranks sharing a machine's cores at `nodes` nodes: the ranks of every
// node that is the same machine compete for them (nodes that are namespaces of one host are not
// separate computers). `spare` (optional): the cores left per rank for its communication
// thread, at most 1.
double sharing(const PredictRequest& r, int nodes, double* spare = nullptr) {
  if (spare) *spare = 1;
  const int cores = r.cores_per_node;
  if (cores <= 0) return 1;
  const int ranks = r.per_node * std::min(nodes, r.nodes_per_machine);
  const int threads = ranks * std::max(1, r.threads_per_rank);
  if (spare) *spare = std::clamp(static_cast<double>(cores - threads) / ranks, 0.0, 1.0);
  return std::max(1.0, static_cast<double>(threads) / cores);
}

// "+18.9 %" of a slowdown.
std::string plus_percent(double v) { return "+" + fixed(100 * v, v < 1 ? 1 : 0) + " %"; }

// The interference's words for one prediction: its slowdowns (a range over sizes when they
// differ) and source.
std::string interference_words(const Interference& i) {
  if (i.empty())
    return "none (" + (i.source.empty() ? std::string("perfect overlap") : i.source) + ")";
  double c_lo = 1e300, c_hi = 0, m_lo = 1e300, m_hi = 0;
  for (const auto& p : i.points) {
    const auto q = i.at(p.bytes);
    c_lo = std::min(c_lo, q.compute), c_hi = std::max(c_hi, q.compute);
    m_lo = std::min(m_lo, q.comm), m_hi = std::max(m_hi, q.comm);
  }
  auto span = [](double lo, double hi) {
    return plus_percent(lo) + (fixed(lo, 3) == fixed(hi, 3) ? "" : " to " + plus_percent(hi));
  };
  return "compute " + span(c_lo, c_hi) + ", communication " + span(m_lo, m_hi) +
         " while both run (" + i.source + ")";
}

}  // namespace

Interference gpu_interference() {
  Interference i = Interference::constant(
      0.189, 0,
      "assumed for GPUs: Lee et al., arXiv:2507.03114 (2025), compute 18.9 % slower beside "
      "communication on average over 4 x A100 / H100 / MI250 / MI210, 40 % at most; "
      "communication's own slowdown not given there, taken as none");
  i.low = {{1, 0, 0}};
  i.high = {{1, 0.40, 0}};
  return i;
}

Interference assumed_interference(const PredictRequest& r, int nodes) {
  if (!r.interference.empty()) return r.interference;
  if (r.cores_per_node <= 0) return gpu_interference();
  double spare = 1;
  sharing(r, nodes, &spare);
  const int ranks = r.per_node * std::min(nodes, r.nodes_per_machine);
  const std::string shape = std::to_string(ranks) + " rank(s) x " +
                            std::to_string(std::max(1, r.threads_per_rank)) + " thread(s) on " +
                            std::to_string(r.cores_per_node) + " cores";
  if (spare >= 1) {
    Interference none;
    none.source = "host: every rank's communication thread has a core of its own (" + shape +
                  "); not measured: --interference measure";
    return none;
  }
  return Interference::constant(
      1 - spare, 1 - spare,
      "host, not measured: communication threads time-share the cores compute leaves (" + shape +
          ")");
}

namespace {

// The overlap fields of a data-parallel prediction.
void set_overlap(const Interference& i, const StepPrediction& s, Prediction& p) {
  p.interference = interference_words(i);
  p.overlapped_s = s.overlapped_s;
  p.compute_slowed_s = s.compute_slowed_s;
}

Prediction data_prediction(const PredictRequest& r, int n) {
  DataParallelOptions o;
  o.bucket_bytes = r.bucket_bytes;
  o.overlap = r.overlap;
  o.compute_scale = sharing(r, n);
  o.interference = assumed_interference(r, n);
  const int g = r.per_node;
  const StepPrediction s = planning::data_parallel_step(
      r.model, r.compute, [&](double bytes) { return r.comm.allreduce(bytes, n, g); }, o);
  Prediction p;
  p.step_s = s.step_s;
  p.compute_s = s.compute_s;
  p.exposed_comm_s = s.exposed_comm_s;
  p.comm_s = s.comm_s;
  p.algorithm = n * g > 1 ? s.algorithm : "none";
  p.layout = "data x" + std::to_string(n * g);
  p.buckets = s.buckets;
  if (r.overlap && n * g > 1) set_overlap(o.interference, s, p);
  return p;
}

// The pipeline of `stages` stages at n nodes: a plan's own layout, or the engine's default
// (planning/layout_search.h): the balanced cut and recipes::default_microbatches().
// Errors: the model cannot be cut in `stages`.
Result<Prediction> pipeline_prediction(const PredictRequest& r, int n, int stages,
                                       const PipelineLayout* own = nullptr) {
  PipelineOptions o;
  o.stages = stages;
  if (own) {
    o.micro_batches = own->microbatches;
    o.replica_batch = own->replica_batch;
    o.cuts = own->cuts;
  } else {
    const int64_t replica_batch =
        static_cast<int64_t>(r.compute.batch) * n * r.per_node / std::max(1, stages);
    o.micro_batches = recipes::default_microbatches(stages, replica_batch);
  }
  o.ranks = n * r.per_node;
  o.per_node = r.per_node;
  o.compute_scale = sharing(r, n);
  const int g = r.per_node;
  auto step = planning::pipeline_step(
      r.model, r.compute,
      [&](double bytes, int replicas) {
        // Replicas of a stage are `stages` ranks apart: spread over nodes like the ranks.
        const int rn = std::max(1, std::min(n, replicas));
        return r.comm.allreduce(bytes, rn, std::max(1, replicas / rn));
      },
      [&](double bytes, bool across) { return r.comm.send(bytes, across, g); }, o);
  if (!step) return std::move(step).error();
  const StepPrediction& s = *step;
  Prediction p;
  p.step_s = s.step_s;
  p.compute_s = s.compute_s;
  p.exposed_comm_s = s.exposed_comm_s;
  p.comm_s = s.comm_s;
  p.algorithm = s.algorithm;
  p.layout = s.layout;
  p.bubble = s.bubble;
  for (int k : s.cuts) p.partition.push_back(r.model.node_names[static_cast<size_t>(k)]);
  return p;
}

// `c` with every time multiplied by f.
ComputeProfile scaled(ComputeProfile c, double f) {
  for (double& t : c.forward_s) t *= f;
  for (double& t : c.backward_s) t *= f;
  c.optimizer_s *= f;
  c.other_s *= f;
  return c;
}

// A spread as a factor's half-width: below 1, so that the fast end stays a positive time.
double clamp_spread(double s) { return std::clamp(std::isfinite(s) ? s : 0.0, 0.0, 0.9); }

// p's intervals (Prediction's comment): step_of(request) is the step of p's layout predicted
// from another request; `global` is the samples of one step, at n nodes of r.per_node ranks.
void set_intervals(const PredictRequest& r, int n, double global,
                   const std::function<double(const PredictRequest&)>& step_of, Prediction& p) {
  const int ranks = n * r.per_node;
  p.compute_spread = clamp_spread(r.compute.spread);
  p.comm_spread = ranks > 1 ? clamp_spread(r.comm.spread(n, r.per_node)) : 0;
  p.comm_spread_basis = ranks > 1 ? r.comm.spread_basis(n, r.per_node) : "";
  p.step_range = {p.step_s, p.step_s};
  p.throughput_range = {p.throughput_sps, p.throughput_sps};
  p.efficiency_range = {p.scaling_efficiency, p.scaling_efficiency};
  const Interference assumed = assumed_interference(r, n);
  const bool interference_spread = !assumed.empty() && assumed.has_range();
  if (p.compute_spread == 0 && p.comm_spread == 0 && !interference_spread) return;
  for (int corner = 0; corner < 8; ++corner) {
    const int c = corner & 1 ? 1 : -1, m = corner & 2 ? 1 : -1;
    PredictRequest q = r;
    q.compute = scaled(r.compute, 1 + c * p.compute_spread);
    q.comm.scale = r.comm.scale * (1 + m * p.comm_spread);
    if (interference_spread) q.interference = assumed.end(corner & 4);
    const double step = step_of(q);
    const double sps = step > 0 ? global / step : 0;
    const double single = single_device_sps(q.compute);
    const double eff = single > 0 ? sps / (ranks * single) : 0;
    p.step_range = {std::min(p.step_range.lo, step), std::max(p.step_range.hi, step)};
    p.throughput_range = {std::min(p.throughput_range.lo, sps),
                          std::max(p.throughput_range.hi, sps)};
    p.efficiency_range = {std::min(p.efficiency_range.lo, eff),
                          std::max(p.efficiency_range.hi, eff)};
  }
}

// "12.5" or "12.5-13.1" (a range) with `digits` decimals.
std::string with_range(double lo, double hi, int digits) {
  const std::string a = fixed(lo, digits), b = fixed(hi, digits);
  return a == b ? a : a + "-" + b;
}

std::string percent(double rel) { return "+-" + fixed(100 * rel, rel < 0.1 ? 1 : 0) + " %"; }

}  // namespace

double CommSource::spread(int nodes, int per_node) const {
  auto it = measured_spread.find({nodes, per_node});
  return it != measured_spread.end() ? it->second : model_spread;
}

std::string CommSource::spread_basis(int nodes, int per_node) const {
  return measured_spread.count({nodes, per_node}) ? measured_spread_basis : model_spread_basis;
}

Result<Parallel> parse_parallel(const std::string& s) {
  if (s == "data") return Parallel::kData;
  if (s == "pipeline") return Parallel::kPipeline;
  if (s == "hybrid") return Parallel::kHybrid;
  if (s == "auto") return Parallel::kAuto;
  return invalid_input("--parallel: expected data, pipeline, hybrid or auto, got '" + s + "'");
}

CommTime CommSource::allreduce(double bytes, int nodes, int per_node) const {
  CommTime t = unscaled_allreduce(bytes, nodes, per_node);
  t.seconds *= scale;
  return t;
}

CommTime CommSource::unscaled_allreduce(double bytes, int nodes, int per_node) const {
  if (nodes * per_node <= 1) return {"none", 0};
  auto it = measured.find({nodes, per_node});
  if (it != measured.end() && plan_algo && plan_shape == std::make_pair(nodes, per_node)) {
    const std::string name = plan_algo(bytes);
    if (auto c = it->second.find(name); c != it->second.end())
      return {name, c->second.predict(bytes)};
  }
  if (it != measured.end() && !it->second.empty()) {
    CommTime best{"", 0};
    for (const auto& [name, curve] : it->second) {
      if (forced && name.substr(0, name.find('/')) != algo_name(*forced)) continue;
      const double t = curve.predict(bytes);
      if (best.algo.empty() || t < best.seconds) best = {name, t};
    }
    if (!best.algo.empty()) return best;
  }
  if (forced)
    return {std::string(algo_name(*forced)),
            allreduce_seconds(*forced, bytes, nodes, per_node, fabric)};
  const AlgoTime a = best_allreduce(algorithms.empty() ? host_algorithms(nodes) : algorithms, bytes,
                                    nodes, per_node, fabric);
  return {std::string(algo_name(a.algo)), a.seconds};
}

double CommSource::send(double bytes, bool across_nodes, int per_node) const {
  const Link& l = across_nodes ? fabric.inter : fabric.intra;
  // One rank alone on its node's links when it crosses nodes.
  const double beta = across_nodes ? l.beta_s_per_b / std::max(1, per_node) : l.beta_s_per_b;
  return scale * (l.alpha_s + bytes * beta);
}

Result<Prediction> predict_pipeline_layout(const PredictRequest& r, int nodes,
                                           const PipelineLayout& l) {
  if (nodes < 1 || r.per_node < 1 || r.nodes_per_machine < 1)
    return invalid_input("a node count, ranks per node and nodes per machine must be >= 1");
  const int ranks = nodes * r.per_node;
  if (l.stages < 1 || ranks % l.stages != 0 || l.microbatches < 1 || !(l.replica_batch > 0))
    return invalid_input("a pipeline of " + std::to_string(l.stages) + " stages on " +
                         std::to_string(ranks) + " ranks");
  auto pp = pipeline_prediction(r, nodes, l.stages, &l);
  if (!pp) return std::move(pp).error();
  Prediction p = std::move(*pp);
  p.nodes = nodes;
  p.ranks = ranks;
  const double global = l.replica_batch * (ranks / l.stages);
  p.throughput_sps = p.step_s > 0 ? global / p.step_s : 0;
  const double single = single_device_sps(r.compute);
  p.scaling_efficiency = single > 0 ? p.throughput_sps / (ranks * single) : 0;
  set_intervals(
      r, nodes, global,
      [&](const PredictRequest& q) {
        auto e = pipeline_prediction(q, nodes, l.stages, &l);
        return e ? e->step_s : p.step_s;
      },
      p);
  return p;
}

double single_device_sps(const ComputeProfile& c) {
  const double t = c.step_s();
  return t > 0 ? c.batch / t : 0;
}

Result<std::vector<Prediction>> predict_scaling(const PredictRequest& r) {
  if (r.nodes.empty()) return invalid_input("--nodes: give at least one node count");
  if (r.per_node < 1) return invalid_input("--per-node must be at least 1");
  if (r.nodes_per_machine < 1) {
    return invalid_input("nodes per machine must be at least 1, got " +
                         std::to_string(r.nodes_per_machine));
  }
  for (int n : r.nodes) {
    if (n < 1)
      return invalid_input("--nodes: node counts must be at least 1, got " + std::to_string(n));
  }
  const double single = single_device_sps(r.compute);
  std::vector<Prediction> out;
  for (int n : r.nodes) {
    const int p = n * r.per_node;
    // (stages, prediction); 0 stages: data parallelism.
    std::vector<std::pair<int, Prediction>> cands;
    if (r.parallel == Parallel::kData || r.parallel == Parallel::kAuto) {
      cands.emplace_back(0, data_prediction(r, n));
    }
    if (r.parallel != Parallel::kData) {
      // Stage counts the model cannot be cut into (too few places where one tensor crosses)
      // are skipped, as the engine's layout search skips them.
      for (int s = 2; s <= std::min(p, r.model.nodes()); s *= 2) {
        if (p % s != 0) continue;
        const bool one_replica = s == p;
        if (r.parallel == Parallel::kPipeline && !one_replica) continue;
        if (r.parallel == Parallel::kHybrid && one_replica) continue;
        if (auto c = pipeline_prediction(r, n, s)) cands.emplace_back(s, std::move(*c));
      }
      if (r.parallel == Parallel::kPipeline && cands.empty() && p > 1 && r.model.nodes() >= p) {
        if (auto c = pipeline_prediction(r, n, p)) cands.emplace_back(p, std::move(*c));
      }
    }
    if (cands.empty()) cands.emplace_back(0, data_prediction(r, n));  // nothing else fits p
    auto [stages, best] = *std::min_element(
        cands.begin(), cands.end(),
        [](const auto& a, const auto& b) { return a.second.step_s < b.second.step_s; });
    best.nodes = n;
    best.ranks = p;
    const double global = r.compute.batch * static_cast<double>(p);
    best.throughput_sps = best.step_s > 0 ? global / best.step_s : 0;
    best.scaling_efficiency = single > 0 ? best.throughput_sps / (p * single) : 0;
    set_intervals(
        r, n, global,
        [&, s = stages, fallback = best.step_s](const PredictRequest& q) {
          if (s == 0) return data_prediction(q, n).step_s;
          auto e = pipeline_prediction(q, n, s);
          return e ? e->step_s : fallback;
        },
        best);
    out.push_back(std::move(best));
  }
  return out;
}

nlohmann::json predictions_to_json(const std::vector<Prediction>& ps) {
  nlohmann::json arr = nlohmann::json::array();
  for (const Prediction& p : ps) {
    nlohmann::json j = {{"nodes", p.nodes},
                        {"ranks", p.ranks},
                        {"step_ms", p.step_s * 1e3},
                        {"compute_ms", p.compute_s * 1e3},
                        {"exposed_comm_ms", p.exposed_comm_s * 1e3},
                        {"comm_ms", p.comm_s * 1e3},
                        {"throughput_sps", p.throughput_sps},
                        {"scaling_efficiency", p.scaling_efficiency},
                        {"algorithm", p.algorithm},
                        {"layout", p.layout},
                        {"buckets", p.buckets}};
    j["step_ms_range"] = {p.step_range.lo * 1e3, p.step_range.hi * 1e3};
    j["throughput_sps_range"] = {p.throughput_range.lo, p.throughput_range.hi};
    j["scaling_efficiency_range"] = {p.efficiency_range.lo, p.efficiency_range.hi};
    j["compute_spread"] = p.compute_spread;
    j["comm_spread"] = p.comm_spread;
    if (!p.comm_spread_basis.empty()) j["comm_spread_basis"] = p.comm_spread_basis;
    if (!p.interference.empty()) {
      j["overlap"] = {{"interference", p.interference},
                      {"overlapped_ms", p.overlapped_s * 1e3},
                      {"compute_slowed_ms", p.compute_slowed_s * 1e3}};
    }
    if (p.bubble > 0) j["bubble"] = p.bubble;
    if (!p.partition.empty()) j["partition"] = p.partition;
    arr.push_back(std::move(j));
  }
  return {{"predictions", std::move(arr)}};
}

std::string format_predictions(const std::vector<Prediction>& ps) {
  std::string o;
  char line[320];
  std::snprintf(line, sizeof line, "%7s %7s %10s %11s %12s %23s %17s  %-14s %s\n", "nodes", "ranks",
                "step_ms", "compute_ms", "exposed_ms", "throughput/s (interval)", "efficiency %",
                "algorithm", "layout");
  o += line;
  for (const Prediction& p : ps) {
    const std::string sps = fixed(p.throughput_sps, 0) + " (" +
                            with_range(p.throughput_range.lo, p.throughput_range.hi, 0) + ")";
    const std::string eff =
        fixed(100 * p.scaling_efficiency, 1) + " (" +
        with_range(100 * p.efficiency_range.lo, 100 * p.efficiency_range.hi, 0) + ")";
    std::snprintf(line, sizeof line, "%7d %7d %10s %11s %12s %23s %17s  %-14s %s\n", p.nodes,
                  p.ranks, fixed(p.step_s * 1e3, 2).c_str(), fixed(p.compute_s * 1e3, 2).c_str(),
                  fixed(p.exposed_comm_s * 1e3, 2).c_str(), sps.c_str(), eff.c_str(),
                  p.algorithm.c_str(), p.layout.c_str());
    o += line;
  }
  return o;
}

std::string interval_note(const PredictRequest& r, const std::vector<Prediction>& ps) {
  const double compute = clamp_spread(r.compute.spread);
  std::string o = "compute " + percent(compute) + " (" +
                  (r.compute.spread_basis.empty() ? "no spread known" : r.compute.spread_basis) +
                  ")";
  // Communication's spread per distinct (spread, basis), naming the node counts of each.
  std::vector<std::pair<std::string, std::vector<int>>> comm;
  for (const Prediction& p : ps) {
    if (p.ranks <= 1) continue;
    const std::string what = percent(p.comm_spread) + " (" + p.comm_spread_basis + ")";
    auto it =
        std::find_if(comm.begin(), comm.end(), [&](const auto& c) { return c.first == what; });
    if (it == comm.end()) {
      comm.push_back({what, {p.nodes}});
    } else {
      it->second.push_back(p.nodes);
    }
  }
  for (size_t i = 0; i < comm.size(); ++i) {
    o += i == 0 ? "; communication " : ", ";
    o += comm[i].first;
    if (comm.size() > 1) {
      std::string nodes;
      for (int n : comm[i].second) nodes += (nodes.empty() ? "" : ",") + std::to_string(n);
      o += " at " + nodes + " node(s)";
    }
  }
  // The overlap's interference, where its assumption has a range (the devices' published one).
  for (const Prediction& p : ps) {
    if (p.ranks <= 1 || !r.overlap) continue;
    const Interference i = assumed_interference(r, p.nodes);
    if (i.empty() || !i.has_range()) continue;
    const double b = static_cast<double>(r.bucket_bytes);
    o += "; overlap interference at the bucket size: compute " +
         plus_percent(i.end(false).at(b).compute) + " to " +
         plus_percent(i.end(true).at(b).compute) + ", communication " +
         plus_percent(i.end(false).at(b).comm) + " to " + plus_percent(i.end(true).at(b).comm) +
         " while both run (its source's range)";
    break;
  }
  return o +
         "; each end puts every input at the same end of its spread; the step model's own error "
         "(contention it does not model) is not in them";
}

std::string interference_note(const std::vector<Prediction>& ps) {
  std::vector<std::pair<std::string, std::vector<int>>> seen;
  for (const Prediction& p : ps) {
    if (p.interference.empty()) continue;
    auto it = std::find_if(seen.begin(), seen.end(),
                           [&](const auto& e) { return e.first == p.interference; });
    if (it == seen.end()) {
      seen.push_back({p.interference, {p.nodes}});
    } else {
      it->second.push_back(p.nodes);
    }
  }
  if (seen.empty()) return "";
  std::string o;
  for (const auto& [words, nodes] : seen) {
    if (!o.empty()) o += "; ";
    o += words;
    if (seen.size() > 1) {
      std::string n;
      for (int k : nodes) n += (n.empty() ? "" : ",") + std::to_string(k);
      o += " at " + n + " node(s)";
    }
  }
  return o;
}

}  // namespace dltune::predict
