#include "tuner/db/rules_export.h"

#include <map>

#include "common/paths.h"
#include "tuner/db/ompi_rules.h"
#include "tuner/db/runtime_formats.h"

namespace dltune::tuner::db {
namespace {

struct Found {
  PlanRecord plan;
  std::string db_path;
  size_t layer = 0;  // 0 = user, 1.. = site databases in order
};

std::string shape_text(const JobShape& s) {
  return std::to_string(s.nodes) + "x" + std::to_string(s.ranks_per_node);
}

// Every plan matching `filter` in every layer, user first.
Result<std::vector<Found>> all_plans(const Layers& layers, const Filter& filter) {
  std::vector<std::string> dbs;
  if (!layers.user_db.empty() && paths::exists(layers.user_db)) dbs.push_back(layers.user_db);
  for (const std::string& s : layers.site_dbs) dbs.push_back(s);
  std::vector<Found> out;
  for (size_t i = 0; i < dbs.size(); ++i) {
    // Rules only read: a read-only database (user or site) serves them (README).
    auto db = TuningDb::open(dbs[i], OpenMode::kReadOnly);
    if (!db) return std::move(db).error();
    auto plans = db->plans(filter);
    if (!plans) return std::move(plans).error();
    for (PlanRecord& p : *plans) out.push_back({std::move(p), dbs[i], i});
  }
  return out;
}

// a replaces b as the plan of its size: an earlier layer, else newer.
bool better(const Found& a, const Found& b) {
  if (a.layer != b.layer) return a.layer < b.layer;
  return a.plan.provenance.created_at > b.plan.provenance.created_at;
}

}  // namespace

Result<RulesFormat> parse_rules_format(std::string_view name) {
  if (name == "ompi") return RulesFormat::kOmpi;
  if (name == "mpich") return RulesFormat::kMpich;
  if (name == "mvapich") return RulesFormat::kMvapich;
  if (name == "nccl-env") return RulesFormat::kNcclEnv;
  return invalid_input("unknown rules format '" + std::string(name.substr(0, 20)) +
                       "'; use ompi, mpich, mvapich or nccl-env");
}

bool format_covers_sizes(RulesFormat format) {
  return format == RulesFormat::kOmpi || format == RulesFormat::kMpich;
}

Result<RulesOutput> export_rules(const Layers& layers, const Filter& filter, RulesFormat format) {
  if (!filter.shape && !format_covers_sizes(format)) {
    return invalid_input(
        "--shape is required for this format: its settings hold one job shape's choices "
        "(ompi and mpich hold every shape at once)");
  }
  auto found = all_plans(layers, filter);
  if (!found) return std::move(found).error();
  RulesOutput out;
  std::map<int64_t, Found> by_size;  // communicator size -> plan
  for (Found& f : *found) {
    const int64_t size = f.plan.key.shape.ranks();
    auto it = by_size.find(size);
    if (it == by_size.end()) {
      by_size.emplace(size, std::move(f));
      continue;
    }
    if (!(it->second.plan.key.shape == f.plan.key.shape)) {
      const Found& kept = better(f, it->second) ? f : it->second;
      const Found& lost = better(f, it->second) ? it->second : f;
      const std::string n = "comm size " + std::to_string(size) + ": plans of " +
                            shape_text(kept.plan.key.shape) + " and " +
                            shape_text(lost.plan.key.shape) + "; using " +
                            shape_text(kept.plan.key.shape) + "'s (the newest)";
      out.notes.push_back(n);
    }
    if (better(f, it->second)) it->second = std::move(f);
  }
  if (by_size.empty()) {
    const std::string what =
        filter.shape ? "for job shape " + shape_text(*filter.shape) : std::string("at all");
    const std::string n = filter.shape ? std::to_string(filter.shape->ranks()) : "N";
    return not_found("no stored plan " + what +
                     " (with the given filters) in the user or site databases; run `dltune tune "
                     "--collectives -n " +
                     n + "` first");
  }
  std::map<int, PlanCollectives> plans;
  for (const auto& [size, f] : by_size) {
    auto coll = parse_plan_collectives(f.plan.plan_json);
    if (!coll) return std::move(coll).error().wrap("the stored plan in '" + f.db_path + "'");
    plans[static_cast<int>(size)] = std::move(*coll);
    out.sources.push_back(shape_text(f.plan.key.shape) + " plan from " + f.db_path +
                          " (fingerprint " + f.plan.key.fingerprint + ")");
  }
  Result<std::string> text = std::string();
  switch (format) {
    case RulesFormat::kOmpi: {
      auto rules = rules_from_plans(plans, &out.notes);
      if (!rules) return std::move(rules).error();
      text = format_ompi_rules(*rules);
      break;
    }
    case RulesFormat::kMpich:
      text = mpich_rules_json(plans, &out.notes);
      break;
    case RulesFormat::kMvapich:
      text = mvapich_tuning_env(plans.begin()->second, &out.notes);
      break;
    case RulesFormat::kNcclEnv:
      text = nccl_env(plans.begin()->second, &out.notes);
      break;
  }
  if (!text) return std::move(text).error();
  out.text = std::move(*text);
  return out;
}

}  // namespace dltune::tuner::db
