#include "tuner/db/bundle_json.h"

#include <optional>
#include <string>

namespace dltune::tuner::db::detail {
namespace {

using nlohmann::json;

const json* field(const json& j, const char* name) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(name);
  return it == j.end() ? nullptr : &*it;
}

Error missing(const char* name, const char* type) {
  return invalid_input(std::string(name) + ": missing or not " + type);
}

Result<std::string> get_string(const json& j, const char* name) {
  const json* f = field(j, name);
  if (f == nullptr || !f->is_string()) return missing(name, "a string");
  return f->get<std::string>();
}

Result<int64_t> get_int(const json& j, const char* name) {
  const json* f = field(j, name);
  if (f == nullptr || !f->is_number_integer()) return missing(name, "an integer");
  if (f->is_number_unsigned() && f->get<uint64_t>() > uint64_t{INT64_MAX}) {
    return invalid_input(std::string(name) + ": out of range");
  }
  return f->get<int64_t>();
}

Result<double> get_double(const json& j, const char* name) {
  const json* f = field(j, name);
  if (f == nullptr || !f->is_number()) return missing(name, "a number");
  return f->get<double>();
}

Result<bool> get_bool(const json& j, const char* name) {
  const json* f = field(j, name);
  if (f == nullptr || !f->is_boolean()) return missing(name, "true or false");
  return f->get<bool>();
}

// Assigns *out from `r` or returns its error from the enclosing function.
#define DLTUNE_GET(out, r)                            \
  do {                                                \
    auto dltune_get_r_ = (r);                         \
    if (!dltune_get_r_) return dltune_get_r_.error(); \
    (out) = std::move(*dltune_get_r_);                \
  } while (0)

// A number or null (a measurement that was not taken).
Result<std::optional<double>> get_optional_double(const json& j, const char* name) {
  const json* f = field(j, name);
  if (f != nullptr && f->is_null()) return std::optional<double>();
  if (f == nullptr || !f->is_number()) return missing(name, "a number or null");
  return std::optional<double>(f->get<double>());
}

json key_to_json(const Key& k) {
  return {{"fingerprint", k.fingerprint},
          {"family", k.family},
          {"versions",
           {{"mpi", k.versions.mpi},
            {"pmix", k.versions.pmix},
            {"nccl", k.versions.nccl},
            {"dltune", k.versions.dltune}}},
          {"nodes", k.shape.nodes},
          {"ranks_per_node", k.shape.ranks_per_node},
          {"recipe", k.recipe}};
}

Result<Key> key_from_json(const json& j) {
  const json* kj = field(j, "key");
  if (kj == nullptr || !kj->is_object()) return missing("key", "an object");
  Key k;
  DLTUNE_GET(k.fingerprint, get_string(*kj, "fingerprint"));
  DLTUNE_GET(k.family, get_string(*kj, "family"));
  DLTUNE_GET(k.recipe, get_string(*kj, "recipe"));
  DLTUNE_GET(k.shape.nodes, get_int(*kj, "nodes"));
  DLTUNE_GET(k.shape.ranks_per_node, get_int(*kj, "ranks_per_node"));
  const json* v = field(*kj, "versions");
  if (v == nullptr || !v->is_object()) return missing("key.versions", "an object");
  DLTUNE_GET(k.versions.mpi, get_string(*v, "mpi"));
  DLTUNE_GET(k.versions.pmix, get_string(*v, "pmix"));
  DLTUNE_GET(k.versions.nccl, get_string(*v, "nccl"));
  DLTUNE_GET(k.versions.dltune, get_string(*v, "dltune"));
  return k;
}

}  // namespace

json provenance_to_json(const Provenance& p) {
  return {{"site", p.site},
          {"host", p.host},
          {"user", p.user},
          {"dltune_version", p.dltune_version},
          {"created_at", p.created_at}};
}

Result<Provenance> provenance_from_json(const json& j) {
  const json* pj = field(j, "provenance");
  if (pj == nullptr || !pj->is_object()) return missing("provenance", "an object");
  Provenance p;
  DLTUNE_GET(p.site, get_string(*pj, "site"));
  DLTUNE_GET(p.host, get_string(*pj, "host"));
  DLTUNE_GET(p.user, get_string(*pj, "user"));
  DLTUNE_GET(p.dltune_version, get_string(*pj, "dltune_version"));
  DLTUNE_GET(p.created_at, get_int(*pj, "created_at"));
  return p;
}

json plan_to_json(const PlanRecord& p) {
  return {{"key", key_to_json(p.key)},
          {"plan_json", p.plan_json},
          {"provenance", provenance_to_json(p.provenance)}};
}

Result<PlanRecord> plan_from_json(const json& j) {
  PlanRecord p;
  DLTUNE_GET(p.key, key_from_json(j));
  DLTUNE_GET(p.plan_json, get_string(j, "plan_json"));
  DLTUNE_GET(p.provenance, provenance_from_json(j));
  DLTUNE_TRY(validate_plan(p));
  return p;
}

json measurement_to_json(const Measurement& m) {
  return {{"key", key_to_json(m.key)},
          {"collective", m.collective},
          {"algorithm", m.algorithm},
          {"segment_bytes", m.segment_bytes},
          {"bytes", m.bytes},
          {"median_us", m.median_us},
          {"p10_us", m.p10_us},
          {"p90_us", m.p90_us},
          {"iqr_us", m.iqr_us},
          {"samples", m.samples},
          {"failed", m.failed},
          {"reason", m.reason},
          {"provenance", provenance_to_json(m.provenance)}};
}

Result<Measurement> measurement_from_json(const json& j) {
  Measurement m;
  int64_t segment = 0, bytes = 0;
  DLTUNE_GET(m.key, key_from_json(j));
  DLTUNE_GET(m.collective, get_string(j, "collective"));
  DLTUNE_GET(m.algorithm, get_string(j, "algorithm"));
  DLTUNE_GET(segment, get_int(j, "segment_bytes"));
  DLTUNE_GET(bytes, get_int(j, "bytes"));
  if (segment < 0 || bytes < 0) return invalid_input("bytes: must not be negative");
  m.segment_bytes = static_cast<uint64_t>(segment);
  m.bytes = static_cast<uint64_t>(bytes);
  DLTUNE_GET(m.median_us, get_double(j, "median_us"));
  DLTUNE_GET(m.p10_us, get_double(j, "p10_us"));
  DLTUNE_GET(m.p90_us, get_double(j, "p90_us"));
  DLTUNE_GET(m.iqr_us, get_double(j, "iqr_us"));
  DLTUNE_GET(m.samples, get_int(j, "samples"));
  DLTUNE_GET(m.failed, get_bool(j, "failed"));
  DLTUNE_GET(m.reason, get_string(j, "reason"));
  DLTUNE_GET(m.provenance, provenance_from_json(j));
  DLTUNE_TRY(validate_measurement(m));
  return m;
}

json trial_to_json(const RecipeTrial& t) {
  const auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"key", key_to_json(t.key)},
          {"round", t.round},
          {"candidate", t.candidate},
          {"label", t.label},
          {"per_rank_batch", t.per_rank_batch},
          {"global_batch", t.global_batch},
          {"scaling", t.scaling},
          {"bucket_bytes", t.bucket_bytes},
          {"overlap", t.overlap},
          {"lr_scale", t.lr_scale},
          {"steps", t.steps},
          {"samples_per_s", t.samples_per_s},
          {"step_s", t.step_s},
          {"median_samples_per_s", opt(t.median_sps)},
          {"iqr_samples_per_s", opt(t.iqr_sps)},
          {"failed", t.failed},
          {"reason", t.reason},
          {"provenance", provenance_to_json(t.provenance)}};
}

Result<RecipeTrial> trial_from_json(const json& j) {
  RecipeTrial t;
  int64_t bucket = 0;
  DLTUNE_GET(t.key, key_from_json(j));
  DLTUNE_GET(t.round, get_int(j, "round"));
  DLTUNE_GET(t.candidate, get_int(j, "candidate"));
  DLTUNE_GET(t.label, get_string(j, "label"));
  DLTUNE_GET(t.per_rank_batch, get_int(j, "per_rank_batch"));
  DLTUNE_GET(t.global_batch, get_int(j, "global_batch"));
  DLTUNE_GET(t.scaling, get_string(j, "scaling"));
  DLTUNE_GET(bucket, get_int(j, "bucket_bytes"));
  if (bucket < 0) return invalid_input("bucket_bytes: must not be negative");
  t.bucket_bytes = static_cast<uint64_t>(bucket);
  DLTUNE_GET(t.overlap, get_bool(j, "overlap"));
  DLTUNE_GET(t.lr_scale, get_double(j, "lr_scale"));
  DLTUNE_GET(t.steps, get_int(j, "steps"));
  DLTUNE_GET(t.samples_per_s, get_double(j, "samples_per_s"));
  DLTUNE_GET(t.step_s, get_double(j, "step_s"));
  DLTUNE_GET(t.median_sps, get_optional_double(j, "median_samples_per_s"));
  DLTUNE_GET(t.iqr_sps, get_optional_double(j, "iqr_samples_per_s"));
  DLTUNE_GET(t.failed, get_bool(j, "failed"));
  DLTUNE_GET(t.reason, get_string(j, "reason"));
  DLTUNE_GET(t.provenance, provenance_from_json(j));
  DLTUNE_TRY(validate_trial(t));
  return t;
}

}  // namespace dltune::tuner::db::detail
