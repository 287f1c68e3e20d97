// A CollectiveSource that replays real recorded sweeps, so that the searches are tested on
// timings they did not generate (synthetic_source.h follows the alpha-beta shape the model
// search fits; real machines have cliffs, plateaus and noise that no such model has).
//
// Two recorded forms (tuner/tests/data/SOURCES.md says where each file comes from):
// - `dltune bench --json` with per-round samples ("samples_us"): trial k of an algorithm at a
//   size returns its recorded round k (cycling), so the candidates of one comparison round
//   replay one recorded round, slow machine phases and all.
// - a table of mean(standard deviation) latencies in microseconds per algorithm and size, as
//   ompi-collectives-tuning's detail.out ("#Nnodes Message_size ALGO ..." then one row per
//   process count and size): trials draw from a normal distribution with that mean and
//   deviation (seeded; cut at half the mean).
// The reference ("oracle") is the recorded median (table: mean) at each size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "tuner/search.h"

namespace dltune::tuner::testing {

struct RecordedSweep {
  std::vector<uint64_t> sizes;     // ascending
  std::vector<std::string> algos;  // as recorded
  // Per algorithm and size: the recorded rounds (seconds), or one mean with its deviation.
  std::map<std::string, std::map<uint64_t, std::vector<double>>> rounds;
  std::map<std::string, std::map<uint64_t, std::pair<double, double>>> mean_sd;

  double typical_s(const std::string& algo, uint64_t bytes) const {
    if (auto it = rounds.find(algo); it != rounds.end()) {
      std::vector<double> v = it->second.at(bytes);
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    }
    return mean_sd.at(algo).at(bytes).first;
  }
  std::string oracle(uint64_t bytes) const {
    std::string best;
    for (const std::string& a : algos) {
      if (best.empty() || typical_s(a, bytes) < typical_s(best, bytes)) best = a;
    }
    return best;
  }
  // The worst ratio, over sizes, of the chosen algorithm's recorded time to the oracle's.
  double worst_vs_oracle(const SearchResult& r) const {
    double worst = 1.0;
    for (const SizeChoice& c : r.choices) {
      worst = std::max(worst, typical_s(c.algo, c.bytes) / typical_s(oracle(c.bytes), c.bytes));
    }
    return worst;
  }
};

// `dltune bench --json` output with "samples_us" per result. Errors: unreadable or not that
// form.
inline Result<RecordedSweep> load_bench_json(const std::string& path) {
  auto text = paths::read_file(path);
  if (!text) return text.error();
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("results")) return invalid_input(path + ": no results");
  RecordedSweep s;
  for (const auto& r : j["results"]) {
    if (!r.contains("samples_us")) return invalid_input(path + ": a result has no samples_us");
    const std::string algo = r["algo"].get<std::string>();
    const uint64_t bytes = r["bytes"].get<uint64_t>();
    std::vector<double> v;
    for (double us : r["samples_us"]) v.push_back(us * 1e-6);
    if (v.empty()) return invalid_input(path + ": empty samples_us");
    s.rounds[algo][bytes] = std::move(v);
    if (std::find(s.algos.begin(), s.algos.end(), algo) == s.algos.end()) s.algos.push_back(algo);
    if (std::find(s.sizes.begin(), s.sizes.end(), bytes) == s.sizes.end()) s.sizes.push_back(bytes);
  }
  std::sort(s.sizes.begin(), s.sizes.end());
  return s;
}

// The rows of a detail.out table for `procs` processes, with the named columns only (empty:
// every algorithm column). Errors: unreadable, no header, or no row for `procs`.
inline Result<RecordedSweep> load_latency_table(const std::string& path, int procs,
                                                const std::vector<std::string>& only = {}) {
  std::ifstream in(path);
  if (!in) return io_error("cannot read " + path);
  std::string line;
  std::vector<std::string> cols;
  RecordedSweep s;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    if (line.rfind('#', 0) == 0) {
      std::string c;
      while (ls >> c) cols.push_back(c);
      continue;
    }
    int n = 0;
    uint64_t bytes = 0;
    if (!(ls >> n >> bytes) || n != procs) continue;
    std::string cell;
    for (size_t k = 2; k < cols.size() && ls >> cell; ++k) {
      if (!only.empty() && std::find(only.begin(), only.end(), cols[k]) == only.end()) continue;
      double mean = 0, sd = 0;
      if (std::sscanf(cell.c_str(), "%lf(%lf)", &mean, &sd) != 2) {
        return invalid_input(path + ": cannot read '" + cell + "'");
      }
      s.mean_sd[cols[k]][bytes] = {mean * 1e-6, sd * 1e-6};
      if (std::find(s.algos.begin(), s.algos.end(), cols[k]) == s.algos.end()) {
        s.algos.push_back(cols[k]);
      }
    }
    s.sizes.push_back(bytes);
  }
  if (cols.size() < 3) return invalid_input(path + ": no '#... Message_size ALGO ...' header");
  if (s.sizes.empty()) return not_found(path + ": no row for " + std::to_string(procs));
  return s;
}

class RecordedSource : public CollectiveSource {
 public:
  RecordedSource(const RecordedSweep& sweep, unsigned seed) : s_(sweep), rng_(seed) {}

  Result<Comparison> measure(uint64_t bytes, const std::vector<std::string>& names) override {
    std::vector<Candidate> cands;
    for (const std::string& name : names) {
      cands.push_back({name, [this, name, bytes]() -> Result<double> {
                         const double t = next(name, bytes);
                         spent_s_ += t;
                         return t;
                       }});
    }
    MeasureOptions o;
    o.max_rounds = 40;
    return measure_interleaved(cands, o);
  }

  double spent_s() const { return spent_s_; }

 private:
  double next(const std::string& algo, uint64_t bytes) {
    if (auto it = s_.rounds.find(algo); it != s_.rounds.end()) {
      const std::vector<double>& v = it->second.at(bytes);
      return v[trials_[{algo, bytes}]++ % v.size()];
    }
    const auto [mean, sd] = s_.mean_sd.at(algo).at(bytes);
    std::normal_distribution<double> d(mean, sd);
    return std::max(0.5 * mean, d(rng_));
  }

  const RecordedSweep& s_;
  std::mt19937_64 rng_;
  std::map<std::pair<std::string, uint64_t>, size_t> trials_;
  double spent_s_ = 0;
};

}  // namespace dltune::tuner::testing
