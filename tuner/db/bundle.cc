#include "tuner/db/bundle.h"

#include <string>

#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "common/paths.h"
#include "tuner/db/bundle_json.h"

namespace dltune::tuner::db {
namespace {

using nlohmann::json;
constexpr const char* kFormatName = "dltune-tuning-bundle";

std::string checksum_of(const json& content) { return sha256_hex(content.dump()); }

// The format name, version and checksum: everything decided before any row is read.
Status check_envelope(const json& j, const json** content, int* format_version) {
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormatName) {
    return invalid_input(std::string("not a dltune tuning bundle (no \"format\": \"") +
                         kFormatName + "\")");
  }
  const auto version = j.find("format_version");
  if (version == j.end() || !version->is_number_integer()) {
    return invalid_input("format_version: missing or not an integer");
  }
  if (*version < kOldestBundleFormatVersion || *version > kBundleFormatVersion) {
    return invalid_input("bundle format version " + version->dump() +
                         " is not supported (this dltune reads versions " +
                         std::to_string(kOldestBundleFormatVersion) + " to " +
                         std::to_string(kBundleFormatVersion) + ")");
  }
  *format_version = version->get<int>();
  const auto c = j.find("content");
  if (c == j.end() || !c->is_object()) return invalid_input("content: missing or not an object");
  const auto sum = j.find("checksum");
  if (sum == j.end() || !sum->is_object() || !sum->contains("algorithm") ||
      (*sum)["algorithm"] != "sha256" || !sum->contains("value") || !(*sum)["value"].is_string()) {
    return invalid_input("checksum: missing or not {\"algorithm\": \"sha256\", \"value\": ...}");
  }
  if ((*sum)["value"].get<std::string>() != checksum_of(*c)) {
    return invalid_input(
        "checksum mismatch: the content was modified or corrupted after export; re-export it");
  }
  *content = &*c;
  return ok_status();
}

template <typename T, typename Fn>
Status parse_rows(const json& content, const char* name, Fn from_json, std::vector<T>* out) {
  const auto rows = content.find(name);
  if (rows == content.end()) return ok_status();
  if (!rows->is_array()) return invalid_input(std::string("content.") + name + ": not an array");
  out->reserve(rows->size());
  for (size_t i = 0; i < rows->size(); ++i) {
    auto r = from_json((*rows)[i]);
    if (!r) {
      return std::move(r).error().wrap(std::string("content.") + name + "[" + std::to_string(i) +
                                       "]");
    }
    out->push_back(std::move(*r));
  }
  return ok_status();
}

}  // namespace

std::string bundle_to_json(const Bundle& b) {
  json content = {
      {"plans", json::array()}, {"measurements", json::array()}, {"recipe_trials", json::array()}};
  for (const PlanRecord& p : b.plans) content["plans"].push_back(detail::plan_to_json(p));
  for (const Measurement& m : b.measurements) {
    content["measurements"].push_back(detail::measurement_to_json(m));
  }
  for (const RecipeTrial& t : b.recipe_trials) {
    content["recipe_trials"].push_back(detail::trial_to_json(t));
  }
  json j = {{"format", kFormatName},
            {"format_version", kBundleFormatVersion},
            {"provenance", detail::provenance_to_json(b.provenance)},
            {"checksum", {{"algorithm", "sha256"}, {"value", checksum_of(content)}}},
            {"content", std::move(content)}};
  return j.dump(1) + "\n";
}

Result<Bundle> parse_bundle(std::string_view text) {
  if (text.size() > kMaxBundleBytes) {
    return invalid_input("bundle larger than " + std::to_string(kMaxBundleBytes >> 20) + " MiB");
  }
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return invalid_input("not valid JSON (truncated or damaged file?)");
  }
  const json* content = nullptr;
  int version = 0;
  DLTUNE_TRY(check_envelope(j, &content, &version));
  if (version < 2 && content->contains("recipe_trials")) {
    return invalid_input("content.recipe_trials: not part of bundle format version " +
                         std::to_string(version));
  }
  Bundle b;
  auto prov = detail::provenance_from_json(j);
  if (!prov) return std::move(prov).error();
  b.provenance = std::move(*prov);
  DLTUNE_TRY(validate_provenance(b.provenance));
  DLTUNE_TRY(parse_rows(*content, "plans", detail::plan_from_json, &b.plans));
  DLTUNE_TRY(parse_rows(*content, "measurements", detail::measurement_from_json, &b.measurements));
  DLTUNE_TRY(parse_rows(*content, "recipe_trials", detail::trial_from_json, &b.recipe_trials));
  return b;
}

Result<Bundle> export_bundle(TuningDb& db, const Filter& filter, const std::string& site) {
  Bundle b;
  b.provenance = local_provenance(site);
  DLTUNE_TRY_CTX(validate_provenance(b.provenance), "--site");
  auto plans = db.plans(filter);
  if (!plans) return std::move(plans).error();
  auto ms = db.measurements(filter);
  if (!ms) return std::move(ms).error();
  auto trials = db.recipe_trials(filter);
  if (!trials) return std::move(trials).error();
  b.plans = std::move(*plans);
  b.measurements = std::move(*ms);
  b.recipe_trials = std::move(*trials);
  for (PlanRecord& p : b.plans) {
    if (p.provenance.site.empty()) p.provenance.site = site;
  }
  for (Measurement& m : b.measurements) {
    if (m.provenance.site.empty()) m.provenance.site = site;
  }
  for (RecipeTrial& t : b.recipe_trials) {
    if (t.provenance.site.empty()) t.provenance.site = site;
  }
  return b;
}

Result<Bundle> read_source(const std::string& path) {
  if (!paths::exists(path)) return not_found("'" + path + "' does not exist");
  auto text = paths::read_file(path);
  if (!text) return std::move(text).error();
  static constexpr std::string_view kSqliteHeader("SQLite format 3\0", 16);
  if (std::string_view(*text).substr(0, 16) == kSqliteHeader) {
    auto db = TuningDb::open(path, OpenMode::kReadOnly);
    if (!db) return std::move(db).error();
    Bundle b;
    auto plans = db->plans();
    if (!plans) return std::move(plans).error().wrap("reading '" + path + "'");
    auto ms = db->measurements();
    if (!ms) return std::move(ms).error().wrap("reading '" + path + "'");
    auto trials = db->recipe_trials();
    if (!trials) return std::move(trials).error().wrap("reading '" + path + "'");
    b.plans = std::move(*plans);
    b.measurements = std::move(*ms);
    b.recipe_trials = std::move(*trials);
    return b;
  }
  auto b = parse_bundle(*text);
  if (!b) return std::move(b).error().wrap("bundle '" + path + "'");
  return b;
}

Result<MergeReport> import_file(TuningDb& db, const std::string& path, ConflictPolicy policy) {
  auto b = read_source(path);
  if (!b) return std::move(b).error();
  auto r = db.merge_rows(b->plans, b->measurements, policy, b->recipe_trials);
  if (!r) return std::move(r).error().wrap("importing '" + path + "'");
  return r;
}

}  // namespace dltune::tuner::db
