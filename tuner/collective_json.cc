// TuningOutcome <-> JSON (collective_tuning.h): how rank 0 hands its outcome to `dltune tune`.
#include <nlohmann/json.hpp>

#include "tuner/collective_tuning.h"

namespace dltune::tuner {

using nlohmann::json;

json outcome_to_json(const TuningOutcome& o) {
  json j;
  j["ranks"] = o.ranks;
  j["nodes"] = o.nodes;
  j["strategy"] = o.strategy;
  j["candidates"] = o.candidates;
  j["tuning_s"] = o.tuning_s;
  j["comparisons"] = o.comparisons;
  j["budget_exhausted"] = o.budget_exhausted;
  j["sizes"] = json::array();
  for (const SizeOutcome& s : o.sizes) {
    j["sizes"].push_back({{"bytes", s.bytes},
                          {"chosen", s.chosen},
                          {"time_us", s.time_us},
                          {"measured", s.measured},
                          {"runner_up", s.runner_up},
                          {"runner_up_us", s.runner_up_us},
                          {"paired_ratio", s.paired_ratio},
                          {"extrapolated", s.extrapolated},
                          {"measured_candidates", s.measured_candidates}});
  }
  j["measurements"] = json::array();
  for (const MeasuredPoint& p : o.measurements) {
    j["measurements"].push_back({{"bytes", p.bytes},
                                 {"candidate", p.candidate},
                                 {"median_us", p.median_us},
                                 {"p10_us", p.p10_us},
                                 {"p90_us", p.p90_us},
                                 {"iqr_us", p.iqr_us},
                                 {"samples", p.samples},
                                 {"failed", p.failed},
                                 {"reason", p.reason}});
  }
  j["failures"] = o.failures;
  j["verify"] = nullptr;
  if (o.verify) {
    json v;
    v["exhaustive_s"] = o.verify->exhaustive_s;
    v["cost_fraction"] = o.verify->cost_fraction;
    v["worst_vs_oracle"] = o.verify->worst_vs_oracle;
    v["worst_where_searched_all"] = o.verify->worst_where_searched_all;
    v["sizes"] = json::array();
    for (const VerifyRow& r : o.verify->rows) {
      v["sizes"].push_back({{"bytes", r.bytes},
                            {"chosen", r.chosen},
                            {"chosen_us", r.chosen_us},
                            {"oracle", r.oracle},
                            {"oracle_us", r.oracle_us},
                            {"vs_oracle", r.vs_oracle},
                            {"searched_all", r.searched_all}});
    }
    j["verify"] = std::move(v);
  }
  return j;
}

namespace {

void read_verify(const json& v, TuningOutcome& o) {
  VerifyReport rep;
  rep.exhaustive_s = v.at("exhaustive_s").get<double>();
  rep.cost_fraction = v.at("cost_fraction").get<double>();
  rep.worst_vs_oracle = v.at("worst_vs_oracle").get<double>();
  rep.worst_where_searched_all = v.value("worst_where_searched_all", 1.0);
  for (const json& r : v.at("sizes")) {
    rep.rows.push_back({r.at("bytes").get<uint64_t>(), r.at("chosen").get<std::string>(),
                        r.at("oracle").get<std::string>(), r.at("chosen_us").get<double>(),
                        r.at("oracle_us").get<double>(), r.at("vs_oracle").get<double>(),
                        r.value("searched_all", false)});
  }
  o.verify = std::move(rep);
}

void read_outcome(const json& j, TuningOutcome& o) {
  o.ranks = j.at("ranks").get<int>();
  o.nodes = j.at("nodes").get<int>();
  o.strategy = j.at("strategy").get<std::string>();
  o.candidates = j.at("candidates").get<std::vector<std::string>>();
  o.tuning_s = j.at("tuning_s").get<double>();
  o.comparisons = j.at("comparisons").get<int>();
  o.budget_exhausted = j.at("budget_exhausted").get<bool>();
  for (const json& s : j.at("sizes")) {
    o.sizes.push_back({s.at("bytes").get<uint64_t>(), s.at("chosen").get<std::string>(),
                       s.at("time_us").get<double>(), s.at("measured").get<bool>(),
                       s.at("runner_up").get<std::string>(), s.at("runner_up_us").get<double>(),
                       s.at("paired_ratio").get<double>()});
    o.sizes.back().extrapolated = s.value("extrapolated", false);
    o.sizes.back().measured_candidates = s.value("measured_candidates", std::vector<std::string>{});
  }
  for (const json& p : j.at("measurements")) {
    o.measurements.push_back({p.at("bytes").get<uint64_t>(), p.at("candidate").get<std::string>(),
                              p.at("median_us").get<double>(), p.at("p10_us").get<double>(),
                              p.at("p90_us").get<double>(), p.at("iqr_us").get<double>(),
                              p.at("samples").get<int64_t>(), p.at("failed").get<bool>(),
                              p.at("reason").get<std::string>()});
  }
  o.failures = j.at("failures").get<std::vector<std::string>>();
  if (!j.at("verify").is_null()) read_verify(j.at("verify"), o);
}

}  // namespace

Result<TuningOutcome> outcome_from_json(const json& j) {
  TuningOutcome o;
  try {
    read_outcome(j, o);
  } catch (const json::exception& e) {
    return invalid_input(std::string("malformed tuning outcome: ") + e.what());
  }
  return o;
}

}  // namespace dltune::tuner
