#include "tuner/db/admin.h"

#include <ctime>
#include <string>

#include "common/paths.h"
#include "common/strings.h"

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

std::string utc(int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json summarize_one(const std::string& path, bool site, bool with_plans, json* plans_out) {
  json d = {{"path", path}, {"layer", site ? "site" : "user"}};
  if (!site && !paths::exists(path)) {
    d["error"] = "does not exist yet (created by the first tuning run or import)";
    return d;
  }
  auto db = TuningDb::open(path, site ? OpenMode::kReadOnly : OpenMode::kReadWrite);
  if (!db) {
    d["error"] = db.error().message();
    return d;
  }
  auto c = db->counts();
  if (!c) {
    d["error"] = c.error().message();
    return d;
  }
  d["schema_version"] = c->schema_version;
  d["plans"] = c->plans;
  d["measurements"] = c->measurements;
  if (!with_plans) return d;
  auto plans = db->plans();
  if (!plans) {
    d["error"] = plans.error().message();
    return d;
  }
  for (const PlanRecord& p : *plans) {
    json row = {{"db", path},
                {"key", key_json(p.key)},
                {"site", p.provenance.site},
                {"host", p.provenance.host},
                {"user", p.provenance.user},
                {"dltune_version", p.provenance.dltune_version},
                {"created_at", p.provenance.created_at},
                {"created", utc(p.provenance.created_at)}};
    json plan = json::parse(p.plan_json, nullptr, false);
    row["plan"] = plan.is_discarded() ? json(nullptr) : plan;
    plans_out->push_back(std::move(row));
  }
  return d;
}

}  // namespace

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
           std::to_string(d["measurements"].get<int64_t>()) + " measurements\n";
  }
  if (!s.contains("plans") || s["plans"].empty()) return out;
  out += "plans:\n";
  for (const json& p : s["plans"]) {
    const json& k = p["key"];
    const std::string recipe = k["recipe"].get<std::string>();
    out += "  " + k["fingerprint"].get<std::string>().substr(0, 16) + "  " +
           std::to_string(k["nodes"].get<int64_t>()) + "x" +
           std::to_string(k["ranks_per_node"].get<int64_t>()) + "  recipe " +
           (recipe.empty() ? std::string("(collectives)") : recipe.substr(0, 12)) + "  mpi " +
           k["versions"]["mpi"].get<std::string>() + "  site " +
           (p["site"].get<std::string>().empty() ? std::string("(local)")
                                                 : p["site"].get<std::string>()) +
           "  " + p["created"].get<std::string>() + "\n";
  }
  return out;
}

Result<RulesExport> ompi_rules_from_layers(const Layers& layers, const Filter& filter) {
  DLTUNE_CHECK(filter.shape.has_value());
  std::vector<std::pair<std::string, bool>> dbs;
  if (!layers.user_db.empty() && paths::exists(layers.user_db))
    dbs.emplace_back(layers.user_db, false);
  for (const std::string& s : layers.site_dbs) dbs.emplace_back(s, true);
  for (const auto& [path, site] : dbs) {
    auto db = TuningDb::open(path, site ? OpenMode::kReadOnly : OpenMode::kReadWrite);
    if (!db) return std::move(db).error();
    auto plans = db->plans(filter);
    if (!plans) return std::move(plans).error();
    if (plans->empty()) continue;
    const PlanRecord* newest = &plans->front();
    for (const PlanRecord& p : *plans) {
      if (p.provenance.created_at >= newest->provenance.created_at) newest = &p;
    }
    RulesExport out;
    out.plan = *newest;
    out.db_path = path;
    auto coll = parse_plan_collectives(newest->plan_json);
    if (!coll) return std::move(coll).error().wrap("the stored plan in '" + path + "'");
    auto rules = rules_from_plan(*coll, static_cast<int>(filter.shape->ranks()), &out.notes);
    if (!rules) return std::move(rules).error().wrap("the stored plan in '" + path + "'");
    out.text = format_ompi_rules(*rules);
    return out;
  }
  const std::string shape =
      std::to_string(filter.shape->nodes) + "x" + std::to_string(filter.shape->ranks_per_node);
  return not_found("no stored plan for job shape " + shape +
                   " (with the given filters) in the user or site databases; run `dltune tune "
                   "--collectives -n " +
                   std::to_string(filter.shape->ranks()) + "` first");
}

}  // namespace dltune::tuner::db
