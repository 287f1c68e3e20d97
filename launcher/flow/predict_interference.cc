#include "launcher/flow/predict_interference.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "common/paths.h"
#include "common/strings.h"
#include "launcher/backend/rank_program.h"
#include "launcher/backend/temp_dir.h"
#include "launcher/flow/predict_inputs.h"
#include "tuner/db/admin.h"
#include "tuner/db/key.h"
#include "tuner/db/store.h"

namespace dltune::launcher {

Result<predict::Interference> parse_interference(const std::string& text) {
  // Zero slowdowns, not an empty Interference: that would mean "assume by kind".
  if (text == "none") return predict::Interference::constant(0, 0, "--interference none");
  const auto parts = strings::split(text, ',');
  auto bad = [&] {
    return invalid_input(
        "--interference: expected measure, none or C[,M] (compute's and communication's "
        "slowdowns while both run, 0 to 100, such as 0.2 or 0.2,0.1), got '" +
        text + "'");
  };
  if (parts.empty() || parts.size() > 2) return bad();
  double v[2] = {0, 0};
  for (size_t i = 0; i < parts.size(); ++i) {
    char* end = nullptr;
    v[i] = std::strtod(parts[i].c_str(), &end);
    if (end == parts[i].c_str() || *end != '\0' || !(v[i] >= 0) || v[i] > 100) return bad();
  }
  if (parts.size() == 1) v[1] = v[0];
  return predict::Interference::constant(v[0], v[1], "--interference " + text);
}

Result<predict::Interference> measure_interference(const std::string& target, bool is_recipe,
                                                   int batch, int per_node, int threads,
                                                   uint64_t bucket_bytes) {
  if (per_node < 2) {
    return invalid_input(
        "--interference measure: one rank per node reduces nothing; give --per-node 2 or more");
  }
  auto worker = cli::sibling_program("dltune-worker");
  if (!worker) return worker.error();
  auto prefix = cli::dltune_run_prefix(per_node);
  if (!prefix) return prefix.error();
  auto dir = TempDir::create_in_tmp("dltune-overlap-");
  if (!dir) return dir.error();
  const std::string out = dir->path() + "/overlap.json";
  std::set<uint64_t> sizes = {64 << 10, 1 << 20, std::max<uint64_t>(4, bucket_bytes)};
  std::string list;
  for (uint64_t s : sizes) list += (list.empty() ? "" : ",") + std::to_string(s);
  std::vector<std::string> argv = *prefix;
  argv.insert(argv.end(), {*worker, "overlap", is_recipe ? "--recipe" : "--model", target,
                           "--batch", std::to_string(batch), "--threads",
                           std::to_string(std::max(1, threads)), "--sizes", list, "--out", out});
  auto j = run_for_json(argv, out, "measuring the interference (dltune-worker overlap)");
  if (!j) return j.error();
  if (!j->contains("sizes") || !(*j)["sizes"].is_array())
    return internal_error("dltune-worker overlap wrote no sizes to " + out);
  auto num = [](const nlohmann::json& row, const char* key) {
    return row.contains(key) && row[key].is_number() ? row[key].get<double>() : -9.0;
  };
  // Each size's range over the rounds: the ends of a prediction's interval.
  auto range = [](const nlohmann::json& row, const char* key, double median, int end) {
    const auto& r = row.contains(key) ? row[key] : nlohmann::json();
    if (!r.is_array() || r.size() != 2 || !r[0].is_number() || !r[1].is_number()) return median;
    return r[end].get<double>();
  };
  predict::Interference i;
  for (const auto& row : (*j)["sizes"]) {
    if (!row.is_object()) continue;
    const double bytes = num(row, "bytes"), c = num(row, "compute_slowdown"),
                 m = num(row, "comm_slowdown");
    // A slowdown below 0 (faster together: the machine's noise) is kept as measured; the
    // model takes it as none (Interference::at).
    if (!(bytes >= 4 && c > -1 && m > -1)) continue;
    i.points.push_back({bytes, c, m});
    i.low.push_back({bytes, range(row, "compute_slowdown_range", c, 0),
                     range(row, "comm_slowdown_range", m, 0)});
    i.high.push_back({bytes, range(row, "compute_slowdown_range", c, 1),
                      range(row, "comm_slowdown_range", m, 1)});
  }
  if (i.points.empty()) return internal_error("dltune-worker overlap measured no size");
  auto by_size = [](const auto& a, const auto& b) { return a.bytes < b.bytes; };
  std::sort(i.points.begin(), i.points.end(), by_size);
  std::sort(i.low.begin(), i.low.end(), by_size);
  std::sort(i.high.begin(), i.high.end(), by_size);
  i.source = "measured here by dltune-worker overlap: " + std::to_string(per_node) + " ranks x " +
             std::to_string(std::max(1, threads)) + " thread(s) training " + target + " at batch " +
             std::to_string(batch) + ", " +
             ((*j)["algorithm"].is_string() ? (*j)["algorithm"].get<std::string>() : "?") +
             " allreduces of " + list + " bytes, median of " +
             std::to_string(static_cast<int>(num(*j, "rounds"))) +
             " rounds (the interval: their range)";
  return i;
}

namespace tdb = tuner::db;

std::string interference_model_id(const recipes::Graph& graph) {
  return sha256_hex("dltune-interference-model v1\n" + recipes::describe_graph(graph));
}

tdb::Key interference_key(const topology::Topology& topo, const recipes::Graph& graph,
                          int per_node) {
  return tdb::make_key(topo, tdb::JobShape{1, per_node}, interference_model_id(graph), false);
}

tdb::InterferenceRecord interference_record(const predict::Interference& i, const tdb::Key& key,
                                            int threads, int batch) {
  tdb::InterferenceRecord r;
  r.key = key;
  r.threads = std::max(1, threads);
  r.batch = std::max(1, batch);
  for (size_t k = 0; k < i.points.size(); ++k) {
    const auto& p = i.points[k];
    const auto& lo = i.has_range() ? i.low[k] : p;
    const auto& hi = i.has_range() ? i.high[k] : p;
    // The range of the rounds holds their median; keep it so where rounding says otherwise.
    r.points.push_back({p.bytes, p.compute, std::min(lo.compute, p.compute),
                        std::max(hi.compute, p.compute), p.comm, std::min(lo.comm, p.comm),
                        std::max(hi.comm, p.comm)});
  }
  r.source = tdb::clean_text(i.source);
  r.provenance = tdb::local_provenance();
  return r;
}

std::vector<tdb::InterferenceRecord> stored_interference(const tdb::Layers& layers,
                                                         const tdb::Key& key,
                                                         std::string* skipped) {
  std::vector<std::string> paths;
  if (!layers.user_db.empty()) paths.push_back(layers.user_db);
  paths.insert(paths.end(), layers.site_dbs.begin(), layers.site_dbs.end());
  std::vector<tdb::InterferenceRecord> out;
  for (const std::string& path : paths) {
    if (!paths::exists(path)) continue;  // no database yet: nothing measured
    // A database that does not open is the plan lookup's to report (launch_plan.cc), once.
    auto db = tdb::TuningDb::open(path, tdb::OpenMode::kReadOnly);
    if (!db) continue;
    auto rows = db->interference(key);
    if (!rows) {
      if (skipped != nullptr) {
        *skipped += (skipped->empty() ? "" : "; ") + std::string("measured interference in '") +
                    path + "' not read: " + rows.error().message();
      }
      continue;
    }
    out.insert(out.end(), rows->begin(), rows->end());
  }
  return out;
}

std::optional<predict::Interference> pick_interference(
    const std::vector<tdb::InterferenceRecord>& rows, int threads, int batch) {
  const tdb::InterferenceRecord* best = nullptr;
  double best_gap = 0;
  for (const auto& r : rows) {
    if (r.threads != std::max(1, threads)) continue;
    const double gap = std::abs(std::log(static_cast<double>(r.batch) / std::max(1, batch)));
    if (best == nullptr || gap < best_gap) best = &r, best_gap = gap;
  }
  if (best == nullptr) return std::nullopt;
  predict::Interference i;
  for (const auto& p : best->points) {
    i.points.push_back({p.bytes, p.compute, p.comm});
    i.low.push_back({p.bytes, p.compute_low, p.comm_low});
    i.high.push_back({p.bytes, p.compute_high, p.comm_high});
  }
  const std::string date = tdb::utc_time(best->provenance.created_at).substr(0, 10);
  std::string src = best->source;
  const std::string here = "measured here by ";
  if (src.rfind(here, 0) == 0) src.erase(0, here.size());
  const std::string host =
      best->provenance.host.empty() ? std::string("this machine") : best->provenance.host;
  i.source = "stored measurement of " + host + ", " + date + ": " + src;
  if (best->batch != batch) {
    i.source += "; measured at batch " + std::to_string(best->batch) + ", this one's is " +
                std::to_string(batch);
  }
  return i;
}

}  // namespace dltune::launcher
