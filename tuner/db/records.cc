#include "tuner/db/records.h"

#include <cctype>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>
#include <pwd.h>
#include <unistd.h>

#include "dltune/config.h"

namespace dltune::tuner::db {
namespace {

bool is_token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' ||
         c == '+' || c == '@' || c == '/' || c == '-';
}

bool is_text_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x20 && u < 0x7f && c != '\'' && c != '"' && c != '\\' && c != ';' && c != '`';
}

// An identifier-like field: [A-Za-z0-9._:+@/-], at most kMaxTokenBytes; empty only if allowed.
Status check_token(std::string_view field, std::string_view v, bool allow_empty) {
  if (v.empty()) {
    if (allow_empty) return ok_status();
    return invalid_input(std::string(field) + ": must not be empty");
  }
  if (v.size() > kMaxTokenBytes) {
    return invalid_input(std::string(field) + ": longer than " + std::to_string(kMaxTokenBytes) +
                         " bytes (" + std::to_string(v.size()) + ")");
  }
  for (char c : v) {
    if (!is_token_char(c)) {
      return invalid_input(std::string(field) + ": unexpected character in " + quote_for_error(v) +
                           " (allowed: letters, digits and ._:+@/-)");
    }
  }
  return ok_status();
}

Status check_hex(std::string_view field, std::string_view v, bool allow_empty) {
  DLTUNE_TRY(check_token(field, v, allow_empty));
  for (char c : v) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f')) {
      return invalid_input(std::string(field) + ": expected lowercase hex, got " +
                           quote_for_error(v));
    }
  }
  return ok_status();
}

Status check_text(std::string_view field, std::string_view v) {
  if (v.size() > kMaxTextBytes) {
    return invalid_input(std::string(field) + ": longer than " + std::to_string(kMaxTextBytes) +
                         " bytes (" + std::to_string(v.size()) + ")");
  }
  for (char c : v) {
    if (!is_text_char(c)) {
      return invalid_input(std::string(field) + ": unexpected character in " + quote_for_error(v) +
                           " (quotes, backslashes, semicolons, backticks and control characters "
                           "are not allowed)");
    }
  }
  return ok_status();
}

Status check_nonneg(std::string_view field, double v) {
  if (!(v >= 0.0) || v > 1e15) {
    return invalid_input(std::string(field) + ": expected a non-negative time, got " +
                         std::to_string(v));
  }
  return ok_status();
}

}  // namespace

std::string quote_for_error(std::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 40; ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    out += (u >= 0x20 && u < 0x7f) ? s[i] : '?';
  }
  if (s.size() > 40) out += "...";
  return out + "'";
}

Provenance local_provenance(std::string site) {
  Provenance p;
  p.site = std::move(site);
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) p.host = host;
  if (const passwd* pw = getpwuid(geteuid()); pw != nullptr && pw->pw_name != nullptr) {
    p.user = pw->pw_name;
  }
  p.dltune_version = DLTUNE_VERSION;
  p.created_at = static_cast<int64_t>(std::time(nullptr));
  return p;
}

Status validate_key(const Key& k) {
  DLTUNE_TRY(check_hex("key.fingerprint", k.fingerprint, false));
  DLTUNE_TRY(check_token("key.family", k.family, true));
  DLTUNE_TRY(check_token("key.versions.mpi", k.versions.mpi, true));
  DLTUNE_TRY(check_token("key.versions.pmix", k.versions.pmix, true));
  DLTUNE_TRY(check_token("key.versions.nccl", k.versions.nccl, true));
  DLTUNE_TRY(check_token("key.versions.dltune", k.versions.dltune, true));
  DLTUNE_TRY(check_hex("key.recipe", k.recipe, true));
  if (k.shape.nodes < 1 || k.shape.nodes > 1000000 || k.shape.ranks_per_node < 1 ||
      k.shape.ranks_per_node > 100000) {
    return invalid_input("key.shape: expected nodes >= 1 and ranks_per_node >= 1, got " +
                         std::to_string(k.shape.nodes) + "x" +
                         std::to_string(k.shape.ranks_per_node));
  }
  return ok_status();
}

Status validate_provenance(const Provenance& p) {
  DLTUNE_TRY(check_text("provenance.site", p.site));
  DLTUNE_TRY(check_token("provenance.host", p.host, true));
  DLTUNE_TRY(check_token("provenance.user", p.user, true));
  DLTUNE_TRY(check_token("provenance.dltune_version", p.dltune_version, true));
  if (p.created_at < 0 || p.created_at > 32503680000) {  // year 3000
    return invalid_input("provenance.created_at: not a plausible Unix time: " +
                         std::to_string(p.created_at));
  }
  return ok_status();
}

Status validate_plan(const PlanRecord& plan) {
  DLTUNE_TRY(validate_key(plan.key));
  DLTUNE_TRY(validate_provenance(plan.provenance));
  if (plan.plan_json.size() > kMaxPlanBytes) {
    return invalid_input("plan: larger than " + std::to_string(kMaxPlanBytes) + " bytes");
  }
  const auto j = nlohmann::json::parse(plan.plan_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return invalid_input("plan: not a JSON object");
  }
  if (!j.contains("version") || j["version"] != 1) {
    return invalid_input("plan: expected \"version\": 1");
  }
  return ok_status();
}

Status validate_measurement(const Measurement& m) {
  DLTUNE_TRY(validate_key(m.key));
  DLTUNE_TRY(validate_provenance(m.provenance));
  DLTUNE_TRY(check_token("measurement.collective", m.collective, false));
  DLTUNE_TRY(check_token("measurement.algorithm", m.algorithm, false));
  DLTUNE_TRY(check_text("measurement.reason", m.reason));
  DLTUNE_TRY(check_nonneg("measurement.median_us", m.median_us));
  DLTUNE_TRY(check_nonneg("measurement.p10_us", m.p10_us));
  DLTUNE_TRY(check_nonneg("measurement.p90_us", m.p90_us));
  DLTUNE_TRY(check_nonneg("measurement.iqr_us", m.iqr_us));
  if (m.samples < 0) return invalid_input("measurement.samples: must not be negative");
  if (!m.failed && m.samples == 0) {
    return invalid_input("measurement.samples: a successful measurement needs samples");
  }
  if (m.bytes > (uint64_t{1} << 62) || m.segment_bytes > (uint64_t{1} << 62)) {
    return invalid_input("measurement.bytes: implausibly large");
  }
  return ok_status();
}

Status validate_cost_model(const CostModel& c) {
  DLTUNE_TRY(validate_key(c.key));
  DLTUNE_TRY(validate_provenance(c.provenance));
  if (c.level != "intra" && c.level != "inter") {
    return invalid_input("cost_model.level: expected intra or inter, got " +
                         quote_for_error(c.level));
  }
  DLTUNE_TRY(check_nonneg("cost_model.alpha_s", c.alpha_s));
  DLTUNE_TRY(check_nonneg("cost_model.beta_s_per_b", c.beta_s_per_b));
  DLTUNE_TRY(check_nonneg("cost_model.gamma_s_per_b", c.gamma_s_per_b));
  DLTUNE_TRY(check_nonneg("cost_model.rel_rms", c.rel_rms));
  if (c.points < 1) return invalid_input("cost_model.points: must be at least 1");
  return ok_status();
}

Status validate_trial(const RecipeTrial& t) {
  DLTUNE_TRY(validate_key(t.key));
  DLTUNE_TRY(validate_provenance(t.provenance));
  if (t.label.empty()) return invalid_input("recipe_trial.label: must not be empty");
  DLTUNE_TRY(check_text("recipe_trial.label", t.label));
  DLTUNE_TRY(check_text("recipe_trial.reason", t.reason));
  if (t.scaling != "weak" && t.scaling != "strong") {
    return invalid_input("recipe_trial.scaling: expected weak or strong, got " +
                         quote_for_error(t.scaling));
  }
  if (t.round < 0 || t.round > 1000 || t.candidate < 0 || t.candidate > 1000000) {
    return invalid_input("recipe_trial.round/candidate: out of range (" + std::to_string(t.round) +
                         ", " + std::to_string(t.candidate) + ")");
  }
  constexpr int64_t kMaxBatch = int64_t{1} << 40;
  if (t.per_rank_batch < 1 || t.per_rank_batch > kMaxBatch || t.global_batch < 1 ||
      t.global_batch > kMaxBatch) {
    return invalid_input("recipe_trial.per_rank_batch/global_batch: expected 1 to 2^40");
  }
  if (t.bucket_bytes > (uint64_t{1} << 62)) {
    return invalid_input("recipe_trial.bucket_bytes: implausibly large");
  }
  if (!(t.lr_scale > 0.0) || t.lr_scale > 1e6) {
    return invalid_input("recipe_trial.lr_scale: expected a positive factor, got " +
                         std::to_string(t.lr_scale));
  }
  if (t.steps < 0 || t.steps > 100000000) {
    return invalid_input("recipe_trial.steps: out of range");
  }
  DLTUNE_TRY(check_nonneg("recipe_trial.samples_per_s", t.samples_per_s));
  DLTUNE_TRY(check_nonneg("recipe_trial.step_s", t.step_s));
  if (t.median_sps) DLTUNE_TRY(check_nonneg("recipe_trial.median_samples_per_s", *t.median_sps));
  if (t.iqr_sps) DLTUNE_TRY(check_nonneg("recipe_trial.iqr_samples_per_s", *t.iqr_sps));
  if (!t.failed && (t.steps == 0 || !(t.samples_per_s > 0))) {
    return invalid_input("recipe_trial.steps: a successful trial needs timed steps");
  }
  return ok_status();
}

std::string clean_text(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= kMaxTextBytes - 12) break;
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      out += ' ';
    } else if (c == '\'' || c == '"' || c == '`') {
      out += '*';
    } else if (c == '\\' || c == ';') {
      out += ',';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace dltune::tuner::db
