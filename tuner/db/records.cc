#include "tuner/db/records.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <string>

#include <pwd.h>
#include <unistd.h>

#include "recipes/plan.h"

#include "dltune/config.h"

namespace dltune::tuner::db {
namespace {

constexpr int64_t kEarliestCreatedAt = 946684800;  // 2000-01-01
constexpr int64_t kClockSkewSeconds = 86400;

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
  if (v.size() > 64) {
    return invalid_input(std::string(field) + ": longer than 64 hex digits (a SHA-256)");
  }
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

// A version string: a token of at most 32 bytes.
Status check_version(std::string_view field, std::string_view v) {
  DLTUNE_TRY(check_token(field, v, true));
  if (v.size() > 32) return invalid_input(std::string(field) + ": longer than 32 bytes");
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
  DLTUNE_TRY(check_hex("key.family", k.family, true));
  DLTUNE_TRY(check_version("key.versions.mpi", k.versions.mpi));
  DLTUNE_TRY(check_version("key.versions.pmix", k.versions.pmix));
  DLTUNE_TRY(check_version("key.versions.nccl", k.versions.nccl));
  DLTUNE_TRY(check_version("key.versions.dltune", k.versions.dltune));
  DLTUNE_TRY(check_hex("key.recipe", k.recipe, true));
  if (k.shape.nodes < 1 || k.shape.nodes > 100000 || k.shape.ranks_per_node < 1 ||
      k.shape.ranks_per_node > 4096) {
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
  DLTUNE_TRY(check_version("provenance.dltune_version", p.dltune_version));
  if (p.site.size() > 64) return invalid_input("provenance.site: longer than 64 bytes");
  // A row "made" in the future would win every prefer-newer merge (a plan dated 2999 did).
  const int64_t latest = static_cast<int64_t>(std::time(nullptr)) + kClockSkewSeconds;
  if (p.created_at < kEarliestCreatedAt || p.created_at > latest) {
    return invalid_input("provenance.created_at: " + std::to_string(p.created_at) +
                         " is not a plausible time (before 2000, or more than a day ahead of "
                         "this machine's clock)");
  }
  if (!p.signed_by.empty() && p.signed_by != kUnsigned) {
    DLTUNE_TRY(check_token("provenance.signed_by", p.signed_by, false));
    if (p.signed_by.size() > 64) return invalid_input("provenance.signed_by: longer than 64 bytes");
  }
  return ok_status();
}

Status validate_plan(const PlanRecord& plan) {
  DLTUNE_TRY(validate_key(plan.key));
  DLTUNE_TRY(validate_provenance(plan.provenance));
  if (plan.plan_json.size() > kMaxPlanBytes) {
    return invalid_input("plan: larger than " + std::to_string(kMaxPlanBytes) + " bytes");
  }
  // The whole plan, as a launch or a plugin will read it: a plan that passes here is one
  // they can use (or, for a recipe, fit to it: recipes/plan_fit.h).
  auto parsed = recipes::parse_plan(plan.plan_json);
  if (!parsed) return std::move(parsed).error().wrap("plan");
  DLTUNE_TRY_CTX(recipes::check_plan_plausible(*parsed), "plan");
  if (parsed->job.nodes != plan.key.shape.nodes ||
      parsed->job.ranks_per_node != plan.key.shape.ranks_per_node) {
    return invalid_input("plan: job " + std::to_string(parsed->job.nodes) + "x" +
                         std::to_string(parsed->job.ranks_per_node) +
                         " is not the key's job shape " + std::to_string(plan.key.shape.nodes) +
                         "x" + std::to_string(plan.key.shape.ranks_per_node));
  }
  return ok_status();
}

Status validate_measurement(const Measurement& m) {
  DLTUNE_TRY(validate_key(m.key));
  DLTUNE_TRY(validate_provenance(m.provenance));
  DLTUNE_TRY(check_token("measurement.collective", m.collective, false));
  DLTUNE_TRY(check_token("measurement.algorithm", m.algorithm, false));
  if (!recipes::parse_collective(m.collective)) {
    return invalid_input("measurement.collective: unknown collective " +
                         quote_for_error(m.collective));
  }
  if (!recipes::parse_algorithm(m.algorithm) && !m.algorithm.starts_with("nccl")) {
    return invalid_input("measurement.algorithm: unknown algorithm " +
                         quote_for_error(m.algorithm));
  }
  if (m.samples > 100000000) return invalid_input("measurement.samples: implausibly many");
  DLTUNE_TRY(check_text("measurement.reason", m.reason));
  DLTUNE_TRY(check_nonneg("measurement.median_us", m.median_us));
  DLTUNE_TRY(check_nonneg("measurement.p10_us", m.p10_us));
  DLTUNE_TRY(check_nonneg("measurement.p90_us", m.p90_us));
  DLTUNE_TRY(check_nonneg("measurement.iqr_us", m.iqr_us));
  if (m.samples < 0) return invalid_input("measurement.samples: must not be negative");
  if (!m.failed && m.samples == 0) {
    return invalid_input("measurement.samples: a successful measurement needs samples");
  }
  if (m.bytes > (uint64_t{1} << 40) || m.segment_bytes > (uint64_t{1} << 40)) {
    return invalid_input("measurement.bytes: implausibly large");
  }
  // Percentiles of one set of samples are ordered (a failed trial may have no times).
  const double slack = 1e-9 * m.p90_us;
  if (!m.failed && (m.p10_us > m.median_us + slack || m.median_us > m.p90_us + slack)) {
    return invalid_input("measurement.p10_us/median_us/p90_us: " + std::to_string(m.p10_us) +
                         " / " + std::to_string(m.median_us) + " / " + std::to_string(m.p90_us) +
                         " are not plausible (percentiles of one set of samples: p10 <= median "
                         "<= p90)");
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

Status validate_baseline(const BaselineRecord& b) {
  DLTUNE_TRY(validate_key(b.key));
  DLTUNE_TRY(validate_provenance(b.provenance));
  DLTUNE_TRY(check_hex("baseline.plan_hash", b.plan_hash, false));
  if (b.plan_hash.size() != 64) return invalid_input("baseline.plan_hash: expected 64 hex digits");
  DLTUNE_TRY(check_token("baseline.bind", b.bind, false));
  if (!(b.samples_per_s > 0) || b.samples_per_s > 1e15) {
    return invalid_input("baseline.samples_per_s: expected a positive rate, got " +
                         std::to_string(b.samples_per_s));
  }
  DLTUNE_TRY(check_nonneg("baseline.rel_ci", b.rel_ci));
  DLTUNE_TRY(check_nonneg("baseline.seconds", b.seconds));
  if (b.steps < 1) return invalid_input("baseline.steps: must be at least 1");
  return ok_status();
}

Status validate_interference(const InterferenceRecord& r) {
  DLTUNE_TRY(validate_key(r.key));
  DLTUNE_TRY(validate_provenance(r.provenance));
  DLTUNE_TRY(check_text("interference.source", r.source));
  if (r.threads < 1 || r.threads > 4096)
    return invalid_input("interference.threads: out of range (" + std::to_string(r.threads) + ")");
  if (r.batch < 1 || r.batch > recipes::kMaxPlanPerRankBatch)
    return invalid_input("interference.batch: out of range (" + std::to_string(r.batch) + ")");
  if (r.points.empty() || r.points.size() > kMaxInterferencePoints) {
    return invalid_input("interference.points: expected 1 to " +
                         std::to_string(kMaxInterferencePoints) + " sizes, got " +
                         std::to_string(r.points.size()));
  }
  // A slowdown is capped at 9 where it is measured (planning/overlap.h; x / (1 - x) at x = 0.9
  // rounds just above 9) and above -1 (a stream cannot finish in no time); NaN fails both.
  auto slowdown = [](const char* what, double low, double v, double high) -> Status {
    for (double x : {low, v, high}) {
      if (!(x > -1.0 && x <= 9.0 + 1e-9)) {
        return invalid_input(std::string("interference.points.") + what +
                             ": expected a slowdown in (-1, 9], got " + std::to_string(x));
      }
    }
    if (!(low <= v && v <= high)) {
      return invalid_input(std::string("interference.points.") + what + ": " + std::to_string(v) +
                           " is outside its own range [" + std::to_string(low) + ", " +
                           std::to_string(high) + "]");
    }
    return ok_status();
  };
  double last = 0;
  for (const InterferenceRecord::Point& p : r.points) {
    if (!(p.bytes >= 4 && p.bytes <= 1099511627776.0) || !(p.bytes > last)) {
      return invalid_input(
          "interference.points.bytes: expected ascending sizes of 4 B to 1 TiB, "
          "got " +
          std::to_string(p.bytes));
    }
    last = p.bytes;
    DLTUNE_TRY(slowdown("compute", p.compute_low, p.compute, p.compute_high));
    DLTUNE_TRY(slowdown("comm", p.comm_low, p.comm, p.comm_high));
  }
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
  if (t.per_rank_batch < 1 || t.per_rank_batch > recipes::kMaxPlanPerRankBatch ||
      t.global_batch < 1 || t.global_batch > recipes::kMaxPlanGlobalBatch) {
    return invalid_input("recipe_trial.per_rank_batch/global_batch: expected 1 to " +
                         std::to_string(recipes::kMaxPlanPerRankBatch) + " per rank and 1 to " +
                         std::to_string(recipes::kMaxPlanGlobalBatch) + " in all");
  }
  if (t.bucket_bytes < recipes::kMinPlanBucketBytes ||
      t.bucket_bytes > recipes::kMaxPlanBucketBytes) {
    return invalid_input("recipe_trial.bucket_bytes: " + std::to_string(t.bucket_bytes) +
                         " is not plausible (1 KiB to 4 GiB, as a plan's)");
  }
  // As a plan's (recipes::check_plan_plausible): lr meant for at least kMinLrReferenceBatch.
  const double lr_max = std::max(1.0, static_cast<double>(t.global_batch) /
                                          static_cast<double>(recipes::kMinLrReferenceBatch));
  if (!(t.lr_scale > 0.0) || t.lr_scale > lr_max) {
    return invalid_input("recipe_trial.lr_scale: " + std::to_string(t.lr_scale) +
                         " is not plausible (a positive factor of at most " +
                         std::to_string(lr_max) + " at global batch " +
                         std::to_string(t.global_batch) + ")");
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
