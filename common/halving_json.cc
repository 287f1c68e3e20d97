#include "common/halving_json.h"

#include <type_traits>

#include <nlohmann/json.hpp>

namespace dltune::halving {
namespace {

using json = nlohmann::json;

template <typename T>
Result<T> get(const json& j, const char* key, const char* where) {
  if (!j.is_object() || !j.contains(key)) {
    return invalid_input(std::string(where) + ": missing '" + key + "'");
  }
  const json& v = j.at(key);
  const bool typed = std::is_same_v<T, bool>          ? v.is_boolean()
                     : std::is_same_v<T, double>      ? v.is_number()
                     : std::is_same_v<T, std::string> ? v.is_string()
                     : std::is_same_v<T, json>        ? true
                                                      : v.is_number_integer();
  if (!typed) return invalid_input(std::string(where) + ": '" + key + "' has the wrong type");
  try {
    return v.get<T>();
  } catch (const std::exception&) {
    return invalid_input(std::string(where) + ": '" + key + "' is out of range");
  }
}

// Assigns the value of a Result expression to `lhs`, or returns its error.
#define RT_ASSIGN(lhs, expr)                          \
  do {                                                \
    auto rt_r_ = (expr);                              \
    if (!rt_r_.ok()) return std::move(rt_r_).error(); \
    lhs = std::move(*rt_r_);                          \
  } while (0)

}  // namespace

nlohmann::json schedule_to_json(const Schedule& s) {
  const Options& h = s.halving;
  return {{"grid", h.grid},
          {"eta", h.eta},
          {"min_steps", h.min_steps},
          {"max_steps", h.max_steps},
          {"warmup_steps", h.warmup_steps},
          {"chunk_steps", s.chunk_steps},
          {"budget_s", h.budget_s},
          {"keep_trainers", h.keep_built}};
}

Result<Schedule> schedule_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return invalid_input("schedule: not an object");
  Schedule s;
  Options& h = s.halving;
  const char* w = "schedule";
  RT_ASSIGN(h.grid, get<bool>(j, "grid", w));
  RT_ASSIGN(h.eta, get<int>(j, "eta", w));
  RT_ASSIGN(h.min_steps, get<int>(j, "min_steps", w));
  RT_ASSIGN(h.max_steps, get<int>(j, "max_steps", w));
  RT_ASSIGN(h.warmup_steps, get<int>(j, "warmup_steps", w));
  RT_ASSIGN(s.chunk_steps, get<int>(j, "chunk_steps", w));
  RT_ASSIGN(h.budget_s, get<double>(j, "budget_s", w));
  RT_ASSIGN(h.keep_built, get<bool>(j, "keep_trainers", w));
  DLTUNE_TRY_CTX(validate(h), std::string("schedule"));
  if (s.chunk_steps < 1) return invalid_input("schedule: needs chunk_steps >= 1");
  return s;
}

json trials_to_json(const std::vector<TrialRecord>& ts) {
  json a = json::array();
  for (const TrialRecord& t : ts) {
    json e = {{"candidate", t.candidate},
              {"label", t.label},
              {"round", t.round},
              {"steps", t.steps},
              {"samples_per_s", t.samples_per_s},
              {"step_s", t.step_s},
              {"failed", t.failed},
              {"reason", t.reason}};
    if (t.skipped) e["skipped"] = true;
    if (!t.chunks.empty()) {
      json c = json::array();
      for (const auto& [n, sec] : t.chunks) c.push_back({n, sec});
      e["chunks"] = c;
    }
    if (t.median_sps) e["median_samples_per_s"] = *t.median_sps;
    if (t.iqr_sps) e["iqr_samples_per_s"] = *t.iqr_sps;
    if (t.compute_s) e["compute_s"] = *t.compute_s;
    if (t.exposed_comm_s) e["exposed_comm_s"] = *t.exposed_comm_s;
    if (!t.allreduce_s.empty()) e["allreduce_s"] = t.allreduce_s;
    if (t.memory_estimate_bytes) e["memory_estimate_bytes"] = *t.memory_estimate_bytes;
    if (t.memory_peak_bytes) e["memory_peak_bytes"] = *t.memory_peak_bytes;
    a.push_back(std::move(e));
  }
  return a;
}

Result<std::vector<TrialRecord>> trials_from_json(const json& j) {
  if (!j.is_array()) return invalid_input("trials: expected an array");
  std::vector<TrialRecord> out;
  for (const json& e : j) {
    TrialRecord t;
    const char* w = "trials[]";
    RT_ASSIGN(t.candidate, get<size_t>(e, "candidate", w));
    RT_ASSIGN(t.label, get<std::string>(e, "label", w));
    RT_ASSIGN(t.round, get<int>(e, "round", w));
    RT_ASSIGN(t.steps, get<int>(e, "steps", w));
    RT_ASSIGN(t.samples_per_s, get<double>(e, "samples_per_s", w));
    RT_ASSIGN(t.step_s, get<double>(e, "step_s", w));
    RT_ASSIGN(t.failed, get<bool>(e, "failed", w));
    RT_ASSIGN(t.reason, get<std::string>(e, "reason", w));
    if (e.contains("median_samples_per_s")) {
      RT_ASSIGN(t.median_sps, get<double>(e, "median_samples_per_s", w));
    }
    if (e.contains("iqr_samples_per_s")) {
      RT_ASSIGN(t.iqr_sps, get<double>(e, "iqr_samples_per_s", w));
    }
    if (e.contains("compute_s")) RT_ASSIGN(t.compute_s, get<double>(e, "compute_s", w));
    if (e.contains("exposed_comm_s")) {
      RT_ASSIGN(t.exposed_comm_s, get<double>(e, "exposed_comm_s", w));
    }
    if (e.contains("allreduce_s")) {
      if (!e["allreduce_s"].is_array())
        return invalid_input("trials[].allreduce_s: expected an array");
      for (const json& v : e["allreduce_s"]) {
        if (!v.is_number()) return invalid_input("trials[].allreduce_s: expected numbers");
        t.allreduce_s.push_back(v.get<double>());
      }
    }
    for (auto [key, field] : {std::pair{"memory_estimate_bytes", &t.memory_estimate_bytes},
                              {"memory_peak_bytes", &t.memory_peak_bytes}}) {
      if (!e.contains(key)) continue;
      RT_ASSIGN(*field, get<int64_t>(e, key, w));
      if (**field <= 0)
        return invalid_input(std::string("trials[].") + key + ": expected bytes > 0");
    }
    if (e.contains("skipped")) RT_ASSIGN(t.skipped, get<bool>(e, "skipped", w));
    if (e.contains("chunks")) {
      json chunks;
      RT_ASSIGN(chunks, get<json>(e, "chunks", w));
      if (!chunks.is_array()) return invalid_input("trials[]: 'chunks' must be a list");
      for (const json& c : chunks) {
        if (!c.is_array() || c.size() != 2 || !c[0].is_number_integer() || !c[1].is_number()) {
          return invalid_input("trials[]: each of 'chunks' must be [steps, seconds]");
        }
        t.chunks.emplace_back(c[0].get<int>(), c[1].get<double>());
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

#undef RT_ASSIGN

}  // namespace dltune::halving
