#include "tuner/db/bundle.h"

#include <string>

#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "common/json_input.h"
#include "common/paths.h"
#include "tuner/db/bundle_json.h"

namespace dltune::tuner::db {
namespace {

using nlohmann::json;
constexpr const char* kFormatName = "dltune-tuning-bundle";
constexpr size_t kMaxSignatures = 16;

// What the checksum and the signatures cover (format 3): everything but themselves.
std::string payload_of(const json& j) {
  const json payload = {{"format", j.at("format")},
                        {"format_version", j.at("format_version")},
                        {"provenance", j.at("provenance")},
                        {"content", j.at("content")}};
  return payload.dump();
}

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
  if (*version >= 1 && *version < kOldestBundleFormatVersion) {
    return invalid_input("bundle format version " + version->dump() +
                         " (an older dltune's) is no longer read: its checksum does not cover "
                         "the exporter's provenance, which anyone could have changed; re-export "
                         "it with this dltune (dltune db export)");
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
  if (!j.contains("provenance") || !j["provenance"].is_object()) {
    return invalid_input("provenance: missing or not an object");
  }
  const auto sum = j.find("checksum");
  if (sum == j.end() || !sum->is_object() || !sum->contains("algorithm") ||
      (*sum)["algorithm"] != "sha256" || !sum->contains("value") || !(*sum)["value"].is_string()) {
    return invalid_input("checksum: missing or not {\"algorithm\": \"sha256\", \"value\": ...}");
  }
  // Format 3 covers the provenance too (1 and 2, which covered the content only, are refused).
  const std::string expected = sha256_hex(payload_of(j));
  if ((*sum)["value"].get<std::string>() != expected) {
    return invalid_input(
        "checksum mismatch: the content was modified or corrupted after export; re-export it");
  }
  *content = &*c;
  return ok_status();
}

// Every signature must verify (with the trusted key of its name, else the key it carries):
// a signed bundle changed after signing is refused whoever signed it. Trusted when one
// verifies with a trusted key.
Status check_signatures(const json& j, const std::vector<PublicKey>& trusted, Verification* out) {
  *out = Verification{Verification::Trust::kNoSignature, "", "unsigned"};
  const auto sigs = j.find("signatures");
  if (sigs == j.end()) return ok_status();
  if (!sigs->is_array() || sigs->size() > kMaxSignatures) {
    return invalid_input("signatures: not an array of at most 16 signatures");
  }
  if (sigs->empty()) return ok_status();
  const std::string payload = payload_of(j);
  for (size_t i = 0; i < sigs->size(); ++i) {
    const json& s = (*sigs)[i];
    const std::string at = "signatures[" + std::to_string(i) + "]";
    if (!s.is_object() || !s.contains("algorithm") || s["algorithm"] != "ed25519" ||
        !s.contains("signer") || !s["signer"].is_string() || !s.contains("public_key") ||
        !s["public_key"].is_string() || !s.contains("value") || !s["value"].is_string()) {
      return invalid_input(at +
                           ": expected {\"algorithm\": \"ed25519\", \"signer\", \"public_key\", "
                           "\"value\"}");
    }
    const std::string signer = s["signer"].get<std::string>();
    DLTUNE_TRY_CTX(check_key_name(signer), at + ".signer");
    const PublicKey* trusted_key = nullptr;
    for (const PublicKey& k : trusted) trusted_key = k.name == signer ? &k : trusted_key;
    PublicKey carried;
    carried.name = signer;
    auto bytes = from_base64(s["public_key"].get<std::string>(), 32);
    if (!bytes) return std::move(bytes).error().wrap(at + ".public_key");
    std::copy(bytes->begin(), bytes->end(), carried.key.begin());
    const PublicKey& key = trusted_key != nullptr ? *trusted_key : carried;
    if (!verify(key, payload, s["value"].get<std::string>())) {
      return invalid_input(
          "the signature by '" + signer + "' does not verify" +
          (trusted_key != nullptr ? " with the trusted key of that name" : "") +
          ": the bundle was changed after it was signed, or the signature is forged");
    }
    if (trusted_key != nullptr && out->trust != Verification::Trust::kTrustedSigner) {
      *out = {Verification::Trust::kTrustedSigner, signer,
              "signed by trusted key '" + signer + "'"};
    } else if (out->trust == Verification::Trust::kNoSignature) {
      *out = {Verification::Trust::kUntrustedSigner, signer,
              "signed by '" + signer + "', which is not a trusted key"};
    }
  }
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

// Every row's signed_by: who vouched for the source, never what the source says.
void mark_rows(Bundle& b, const Verification& v) {
  const std::string by = v.trust == Verification::Trust::kTrustedSigner ? v.signer : kUnsigned;
  for (PlanRecord& p : b.plans) p.provenance.signed_by = by;
  for (Measurement& m : b.measurements) m.provenance.signed_by = by;
  for (RecipeTrial& t : b.recipe_trials) t.provenance.signed_by = by;
}

}  // namespace

std::string bundle_to_json(const Bundle& b, const SecretKey* key) {
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
            {"content", std::move(content)}};
  const std::string payload = payload_of(j);
  j["checksum"] = {{"algorithm", "sha256"}, {"value", sha256_hex(payload)}};
  if (key != nullptr) {
    const PublicKey pub = key->public_key();
    j["signatures"] = json::array({{{"algorithm", "ed25519"},
                                    {"signer", key->name},
                                    {"public_key", to_base64(pub.key.data(), pub.key.size())},
                                    {"value", sign(*key, payload)}}});
  }
  return j.dump(1) + "\n";
}

Result<Bundle> parse_bundle(std::string_view text, const std::vector<PublicKey>& trusted,
                            Verification* verification) {
  // A bundle is 6 levels deep; bound it before anything (dump(), ==) recurses over it.
  auto parsed = parse_json_bounded(text, {.max_bytes = kMaxBundleBytes, .max_depth = 16});
  if (!parsed) {
    if (parsed.error().message().starts_with("not valid JSON")) {
      return invalid_input("not valid JSON (truncated or damaged file?): " +
                           parsed.error().message().substr(16));
    }
    return std::move(parsed).error();
  }
  const json& j = *parsed;
  const json* content = nullptr;
  int version = 0;
  DLTUNE_TRY(check_envelope(j, &content, &version));
  Verification v;
  DLTUNE_TRY(check_signatures(j, trusted, &v));
  Bundle b;
  auto prov = detail::provenance_from_json(j);
  if (!prov) return std::move(prov).error();
  b.provenance = std::move(*prov);
  DLTUNE_TRY(validate_provenance(b.provenance));
  DLTUNE_TRY(parse_rows(*content, "plans", detail::plan_from_json, &b.plans));
  DLTUNE_TRY(parse_rows(*content, "measurements", detail::measurement_from_json, &b.measurements));
  DLTUNE_TRY(parse_rows(*content, "recipe_trials", detail::trial_from_json, &b.recipe_trials));
  if (verification != nullptr) *verification = std::move(v);
  return b;
}

Result<Bundle> parse_bundle(std::string_view text) { return parse_bundle(text, {}, nullptr); }

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

Result<Source> read_source(const std::string& path, const std::vector<PublicKey>& trusted) {
  if (!paths::exists(path)) return not_found("'" + path + "' does not exist");
  auto text = paths::read_file(path);
  if (!text) return std::move(text).error();
  Source src;
  src.path = path;
  static constexpr std::string_view kSqliteHeader("SQLite format 3\0", 16);
  if (std::string_view(*text).substr(0, 16) == kSqliteHeader) {
    auto db = TuningDb::open(path, OpenMode::kReadOnly);
    if (!db) return std::move(db).error();
    auto plans = db->plans();
    if (!plans) return std::move(plans).error().wrap("reading '" + path + "'");
    auto ms = db->measurements();
    if (!ms) return std::move(ms).error().wrap("reading '" + path + "'");
    auto trials = db->recipe_trials();
    if (!trials) return std::move(trials).error().wrap("reading '" + path + "'");
    src.bundle.plans = std::move(*plans);
    src.bundle.measurements = std::move(*ms);
    src.bundle.recipe_trials = std::move(*trials);
    src.verification = {Verification::Trust::kNoSignature, "", "a database file (unsigned)"};
  } else {
    auto b = parse_bundle(*text, trusted, &src.verification);
    if (!b) return std::move(b).error().wrap("bundle '" + path + "'");
    src.bundle = std::move(*b);
  }
  mark_rows(src.bundle, src.verification);
  return src;
}

Result<MergeReport> import_file(TuningDb& db, const std::string& path, ConflictPolicy policy) {
  auto src = read_source(path);
  if (!src) return std::move(src).error();
  const Bundle& b = src->bundle;
  auto r = db.merge_rows(b.plans, b.measurements, policy, b.recipe_trials, path);
  if (!r) return std::move(r).error().wrap("importing '" + path + "'");
  return r;
}

}  // namespace dltune::tuner::db
