#include "tuner/db/admin.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>

#include "common/json_input.h"
#include "common/paths.h"
#include "common/strings.h"
#include "recipes/plan.h"
#include "tuner/db/bundle_json.h"

namespace dltune::tuner::db {
namespace {

using nlohmann::json;

json key_json(const Key& k) {
  return {{"fingerprint", k.fingerprint},
          {"family", k.family},
          {"nodes", k.shape.nodes},
          {"ranks_per_node", k.shape.ranks_per_node},
          {"recipe", k.recipe},
          {"versions",
           {{"mpi", k.versions.mpi},
            {"pmix", k.versions.pmix},
            {"nccl", k.versions.nccl},
            {"dltune", k.versions.dltune}}}};
}

// The identity of a key as one string, to match trials with their plan.
std::string identity(const Key& k) {
  return k.fingerprint + "|" + k.versions.mpi + "|" + k.versions.pmix + "|" + k.versions.nccl +
         "|" + k.versions.dltune + "|" + std::to_string(k.shape.nodes) + "|" +
         std::to_string(k.shape.ranks_per_node) + "|" + k.recipe;
}

// A trial as `db show --json` lists it under its plan: the bundle form without the key and
// provenance it shares with the plan.
json trial_json(const RecipeTrial& t) {
  json j = detail::trial_to_json(t);
  j.erase("key");
  j.erase("provenance");
  // The step split (local only: bundles do not carry it).
  if (t.compute_s) j["compute_s"] = *t.compute_s;
  if (t.exposed_comm_s) j["exposed_comm_s"] = *t.exposed_comm_s;
  if (!t.allreduce_s.empty()) j["allreduce_s"] = t.allreduce_s;
  // The training memory (local only, as the step split).
  if (t.memory_estimate_bytes) j["memory_estimate_bytes"] = *t.memory_estimate_bytes;
  if (t.memory_peak_bytes) j["memory_peak_bytes"] = *t.memory_peak_bytes;
  return j;
}

std::string utc(int64_t t) { return utc_time(t); }

json summarize_one(const std::string& path, bool site, bool with_plans, json* plans_out) {
  json d = {{"path", path}, {"layer", site ? "site" : "user"}};
  if (!site && !paths::exists(path)) {
    d["error"] = "does not exist yet (created by the first tuning run or import)";
    return d;
  }
  auto db = TuningDb::open(path, OpenMode::kReadOnly);  // showing only reads
  if (!db) {
    d["error"] = db.error().message();
    return d;
  }
  if (auto settings = db->settings(); settings.ok()) {
    d["require_signature"] = settings->require_signature;
    d["trusted_keys"] = settings->trusted_keys;
  }
  auto c = db->counts();
  if (!c) {
    d["error"] = c.error().message();
    return d;
  }
  d["schema_version"] = c->schema_version;
  d["plans"] = c->plans;
  d["measurements"] = c->measurements;
  d["recipe_trials"] = c->recipe_trials;
  d["baselines"] = c->baselines;        // 1-rank baselines measured here (schema v7; not exported)
  d["interference"] = c->interference;  // measured here (schema v8; not exported)
  if (!with_plans) return d;
  if (auto models = db->cost_models()) {  // per-level fits of the sweeps (schema v5)
    d["cost_models"] = json::array();
    for (const CostModel& m : *models) {
      d["cost_models"].push_back({{"key", key_json(m.key)},
                                  {"level", m.level},
                                  {"alpha_us", m.alpha_s * 1e6},
                                  {"beta_s_per_b", m.beta_s_per_b},
                                  {"gamma_s_per_b", m.gamma_s_per_b},
                                  {"gbps", m.beta_s_per_b > 0 ? 1e-9 / m.beta_s_per_b : 0.0},
                                  {"rel_rms", m.rel_rms},
                                  {"points", m.points}});
    }
  }
  auto plans = db->plans();
  if (!plans) {
    d["error"] = plans.error().message();
    return d;
  }
  auto trials = db->recipe_trials();
  if (!trials) {
    d["error"] = trials.error().message();
    return d;
  }
  std::map<std::string, json> trials_by_plan;
  for (const RecipeTrial& t : *trials) {
    json& list = trials_by_plan[identity(t.key)];
    if (list.is_null()) list = json::array();
    list.push_back(trial_json(t));
  }
  for (const PlanRecord& p : *plans) {
    json row = {{"db", path},
                {"key", key_json(p.key)},
                {"site", p.provenance.site},
                {"host", p.provenance.host},
                {"user", p.provenance.user},
                {"dltune_version", p.provenance.dltune_version},
                {"signed_by", p.provenance.signed_by},
                {"created_at", p.provenance.created_at},
                {"created", utc(p.provenance.created_at)}};
    auto plan = parse_json_bounded(p.plan_json, {.max_bytes = kMaxPlanBytes, .max_depth = 16});
    row["plan"] = plan ? std::move(*plan) : json(nullptr);
    auto mine = trials_by_plan.find(identity(p.key));
    row["recipe_trials"] = mine == trials_by_plan.end() ? json::array() : mine->second;
    plans_out->push_back(std::move(row));
  }
  return d;
}

// "    trial r1 #3  b64 weak bucket=1MiB overlap   16 steps  1234.5 samples/s (median 1250.0,
// IQR 40.1)" or "... failed: REASON".
std::string trial_line(const json& t) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "    trial r%lld #%-3lld %-40s %5lld steps  ",
                static_cast<long long>(t["round"].get<int64_t>()),
                static_cast<long long>(t["candidate"].get<int64_t>()),
                t["label"].get<std::string>().substr(0, 40).c_str(),
                static_cast<long long>(t["steps"].get<int64_t>()));
  std::string line = buf;
  if (t["failed"].get<bool>()) {
    return line + "failed: " + t["reason"].get<std::string>().substr(0, 80) + "\n";
  }
  std::snprintf(buf, sizeof buf, "%.1f samples/s", t["samples_per_s"].get<double>());
  line += buf;
  if (!t["median_samples_per_s"].is_null() && !t["iqr_samples_per_s"].is_null()) {
    std::snprintf(buf, sizeof buf, " (median %.1f, IQR %.1f)",
                  t["median_samples_per_s"].get<double>(), t["iqr_samples_per_s"].get<double>());
    line += buf;
  }
  if (t.contains("memory_estimate_bytes") && t.contains("memory_peak_bytes")) {
    line += "; memory " + strings::format_bytes(t["memory_estimate_bytes"].get<uint64_t>()) +
            " estimated, " + strings::format_bytes(t["memory_peak_bytes"].get<uint64_t>()) +
            " measured";
  }
  return line + "\n";
}

// Who vouched for a plan row, for people.
std::string signer_text(const json& signed_by) {
  const std::string s = signed_by.is_string() ? signed_by.get<std::string>() : "";
  if (s.empty()) return "made here";
  if (s == kUnsigned) return "imported unsigned";
  return "signed by " + s;
}

}  // namespace

std::string utc_time(int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string plan_summary(const std::string& plan_json) {
  auto plan = recipes::parse_plan(plan_json);
  if (!plan) return "(not a valid plan)";
  const recipes::TrainingPlan& t = plan->training;
  char lr[32];
  std::snprintf(lr, sizeof lr, "%.2f", t.lr_scale);
  std::string out =
      "per-rank " + std::to_string(t.per_rank_batch) + " (global " +
      std::to_string(t.global_batch) + ", " + std::string(recipes::scaling_name(t.scaling)) +
      "), bucket " + strings::format_bytes(t.bucket_bytes) + ", overlap " +
      (t.overlap ? "on" : "off") + ", warm-up " + std::to_string(t.warmup_steps) + ", lr x" + lr;
  if (auto it = plan->collectives.find(recipes::Collective::kAllreduce);
      it != plan->collectives.end()) {
    std::string algos;
    for (const recipes::SizeRange& r : it->second) {
      algos += (algos.empty() ? "" : " then ") + std::string(recipes::algorithm_name(r.algo));
    }
    out += "; allreduce " + algos;
  }
  return out;
}

Result<JobShape> parse_shape(std::string_view text) {
  const auto bad = [&] {
    return invalid_input("expected a job shape such as 2x4 (nodes x ranks per node) or 8, got '" +
                         std::string(text.substr(0, 40)) + "'");
  };
  const auto x = text.find('x');
  JobShape s;
  auto first = strings::parse_int(text.substr(0, x));
  if (!first || *first < 1) return bad();
  if (x == std::string_view::npos) {
    s.ranks_per_node = *first;
    return s;
  }
  auto second = strings::parse_int(text.substr(x + 1));
  if (!second || *second < 1) return bad();
  s.nodes = *first;
  s.ranks_per_node = *second;
  return s;
}

Result<int64_t> parse_age(std::string_view text) {
  const auto bad = [&] {
    return invalid_input("expected an age such as 30d, 12h, 90m or 3600s, got '" +
                         std::string(text.substr(0, 40)) + "'");
  };
  if (text.size() < 2) return bad();
  int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    case 'w':
      unit = 7 * 86400;
      break;
    default:
      return bad();
  }
  auto n = strings::parse_int(text.substr(0, text.size() - 1));
  if (!n || *n < 1 || *n > (int64_t{1} << 40) / unit) return bad();
  return *n * unit;
}

json summarize(const Layers& layers, bool with_plans) {
  json out = {{"databases", json::array()}};
  json plans = json::array();
  if (!layers.user_db.empty()) {
    out["databases"].push_back(summarize_one(layers.user_db, false, with_plans, &plans));
  }
  for (const std::string& s : layers.site_dbs) {
    out["databases"].push_back(summarize_one(s, true, with_plans, &plans));
  }
  if (with_plans) out["plans"] = std::move(plans);
  return out;
}

std::string summary_text(const json& s) {
  std::string out;
  for (const json& d : s["databases"]) {
    out += d["layer"].get<std::string>() + " database " + d["path"].get<std::string>() + ": ";
    if (d.contains("error")) {
      out += d["error"].get<std::string>() + "\n";
      continue;
    }
    out += "schema v" + std::to_string(d["schema_version"].get<int>()) + ", " +
           std::to_string(d["plans"].get<int64_t>()) + " plans, " +
           std::to_string(d["measurements"].get<int64_t>()) + " measurements, " +
           std::to_string(d["recipe_trials"].get<int64_t>()) + " recipe trials";
    if (const auto n = d.value("baselines", int64_t{0}); n > 0)
      out += ", " + std::to_string(n) + (n == 1 ? " one-rank baseline" : " one-rank baselines");
    if (const auto n = d.value("interference", int64_t{0}); n > 0)
      out += ", " + std::to_string(n) + " measured interference" + (n == 1 ? "" : "s");
    if (d.value("require_signature", false)) out += "; takes only signed bundles";
    if (!d.value("trusted_keys", std::string()).empty()) {
      out += "; trusted keys " + d["trusted_keys"].get<std::string>();
    }
    out += "\n";
  }
  if (!s.contains("plans") || s["plans"].empty()) return out;
  out += "plans:\n";
  for (const json& p : s["plans"]) {
    const json& k = p["key"];
    const std::string recipe = k["recipe"].get<std::string>();
    // A recipe by its name (the plan's, or a bundled recipe's with this signature, as the
    // caller found it) and its signature.
    std::string name = p.value("recipe_name", "");
    const std::string who = recipe.empty() ? std::string("(collectives)")
                            : name.empty() ? recipe.substr(0, 12)
                                           : name + " (" + recipe.substr(0, 12) + ")";
    out += "  " + k["fingerprint"].get<std::string>().substr(0, 16) + "  " +
           std::to_string(k["nodes"].get<int64_t>()) + "x" +
           std::to_string(k["ranks_per_node"].get<int64_t>()) + "  recipe " + who + "  mpi " +
           k["versions"]["mpi"].get<std::string>() + "  site " +
           (p["site"].get<std::string>().empty() ? std::string("(local)")
                                                 : p["site"].get<std::string>()) +
           "  " + p["created"].get<std::string>() + "  " + signer_text(p["signed_by"]) + "\n";
    const json& pv = p["plan"].is_object() && p["plan"].contains("provenance")
                         ? p["plan"]["provenance"]
                         : json::object();
    if (pv.contains("confidence") && pv["confidence"].is_object()) {
      const json& c = pv["confidence"];
      char buf[256];
      if (c["hi"].is_number()) {
        std::snprintf(buf, sizeof buf,
                      "    confidence: %.2fx over %s (95 %% interval %.2f-%.2f, %d rounds%s)\n",
                      c.value("ratio", 0.0), c.value("rival", "").c_str(), c.value("lo", 0.0),
                      c["hi"].get<double>(), c.value("rounds", 0),
                      c.value("significant", false) ? "" : "; not significant");
      } else {
        std::snprintf(buf, sizeof buf, "    confidence: %.2fx over %s (%d rounds: no interval)\n",
                      c.value("ratio", 0.0), c.value("rival", "").c_str(), c.value("rounds", 0));
      }
      out += buf;
    }
    if (pv.contains("regret") && pv["regret"].is_number()) {
      out += "    estimated regret: ~" +
             std::to_string(std::lround(100 * pv["regret"].get<double>())) + " % of throughput\n";
    }
    if (pv.contains("budget") && pv["budget"].is_object() &&
        !pv["budget"].value("cut", "").empty()) {
      out += "    the budget cut: " + pv["budget"].value("cut", "") + "\n";
    }
    for (const json& t : p["recipe_trials"]) out += trial_line(t);
  }
  // Sites, reasons, rivals and paths came from databases someone else may have written: the
  // rows were checked on their way in, and nothing a terminal would act on is printed anyway.
  return strings::printable(out);
}

}  // namespace dltune::tuner::db
