// Bundles: round trip, idempotent import, and every rejection leaves the database unchanged.
#include "tuner/db/bundle.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "common/paths.h"
#include "common/strings.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

using testing::sample_key;
using testing::sample_measurement;
using testing::sample_plan;
using testing::TempDir;

// A source database with two plans and three measurements, exported as a bundle.
std::string make_bundle(const TempDir& dir) {
  auto src = TuningDb::open(dir.file("src.db"), OpenMode::kReadWrite);
  EXPECT_TRUE(src.ok());
  const PlanRecord p1 = sample_plan(sample_key("aa"));
  const PlanRecord p2 = sample_plan(sample_key("bb", 2, 4));
  const Measurement ms[] = {sample_measurement(8, "rd", sample_key("aa")),
                            sample_measurement(4096, "ring", sample_key("aa")),
                            sample_measurement(4096, "rd", sample_key("aa"))};
  EXPECT_TRUE(src->put_results(&p1, ms).ok());
  EXPECT_TRUE(src->put_plan(p2).ok());
  auto b = export_bundle(*src, {}, "siteA");
  EXPECT_TRUE(b.ok());
  return bundle_to_json(*b);
}

std::string db_digest(TuningDb& db) {
  auto plans = db.plans();
  auto ms = db.measurements();
  Bundle b;
  b.plans = *plans;
  b.measurements = *ms;
  return sha256_hex(bundle_to_json(b));
}

TEST(Bundle, RoundTripAndIdempotentImport) {
  TempDir dir;
  const std::string text = make_bundle(dir);
  ASSERT_TRUE(paths::write_file_atomic(dir.file("b.json"), text).ok());
  auto dst = TuningDb::open(dir.file("dst.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(dst.ok());
  auto r1 = import_file(*dst, dir.file("b.json"), ConflictPolicy::kKeepLocal);
  ASSERT_TRUE(r1.ok()) << r1.error().message();
  EXPECT_EQ(r1->plans.added, 2);
  EXPECT_EQ(r1->measurements.added, 3);
  const std::string after_first = db_digest(*dst);
  auto r2 = import_file(*dst, dir.file("b.json"), ConflictPolicy::kPreferNewer);
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->changed());
  EXPECT_EQ(r2->plans.unchanged, 2);
  EXPECT_EQ(db_digest(*dst), after_first);
  // Round trip: the imported rows carry the export's site and are equal to the source rows.
  auto plans = dst->plans();
  ASSERT_EQ(plans->size(), 2u);
  EXPECT_EQ((*plans)[0].provenance.site, "siteA");
  EXPECT_EQ((*plans)[0].plan_json, testing::sample_plan_json());
  auto again = export_bundle(*dst, {}, "siteA");
  ASSERT_TRUE(again.ok());
  auto original = parse_bundle(text);
  ASSERT_TRUE(original.ok());
  EXPECT_EQ(nlohmann::json::parse(bundle_to_json(*again))["content"],
            nlohmann::json::parse(text)["content"]);
  // A database file is a valid merge source too.
  auto from_db = read_source(dir.file("src.db"));
  ASSERT_TRUE(from_db.ok()) << from_db.error().message();
  EXPECT_EQ(from_db->bundle.plans.size(), 2u);
  EXPECT_EQ(from_db->verification.trust, Verification::Trust::kNoSignature);
}

// Recomputes the checksum after `edit` changed the content: a well-formed but hostile bundle.
std::string resign(nlohmann::json j) { return testing::rechecksum(std::move(j)); }

TEST(Bundle, RejectionsLeaveTheDatabaseUnchanged) {
  TempDir dir;
  const std::string good = make_bundle(dir);
  const nlohmann::json j = nlohmann::json::parse(good);
  struct Case {
    const char* what;
    std::string text;
    const char* expect;
  };
  std::vector<Case> cases;
  const std::string wrong_version =
      "format version " + std::to_string(kBundleFormatVersion + 1) + " is not supported";
  cases.push_back({"truncated", good.substr(0, good.size() / 2), "not valid JSON"});
  cases.push_back({"empty", "", "not valid JSON"});
  {
    nlohmann::json t = j;
    t["content"]["plans"][0]["key"]["nodes"] = 3;  // edited without re-signing
    cases.push_back({"tampered", t.dump(), "checksum mismatch"});
  }
  {
    nlohmann::json t = j;
    t["format_version"] = kBundleFormatVersion + 1;
    cases.push_back({"wrong version", t.dump(), wrong_version.c_str()});
  }
  {
    nlohmann::json t = j;
    t["format"] = "something-else";
    cases.push_back({"wrong format", t.dump(), "not a dltune tuning bundle"});
  }
  {
    nlohmann::json t = j;
    t["content"]["plans"][1]["key"]["fingerprint"] = "aa'); DROP TABLE plans; --";
    cases.push_back({"sql in key", resign(t), "content.plans[1]: key.fingerprint"});
  }
  {
    nlohmann::json t = j;
    t["content"]["measurements"][2]["reason"] = "it said \"boom\"";
    cases.push_back({"quote in reason", resign(t), "content.measurements[2]: measurement.reason"});
  }
  {
    nlohmann::json t = j;
    t["content"]["measurements"][0]["algorithm"] = std::string(100000, 'r');
    cases.push_back({"huge field", resign(t), "longer than 128 bytes"});
  }
  {
    nlohmann::json t = j;
    t["content"]["plans"][0]["plan_json"] = std::string(2 << 20, ' ') + "{}";
    cases.push_back({"huge plan", resign(t), "larger than"});
  }
  {
    nlohmann::json t = j;
    t["content"]["plans"][0]["provenance"]["site"] = "x\n\x1b[31mred";
    cases.push_back({"control chars", resign(t), "provenance.site"});
  }
  {
    nlohmann::json t = j;
    t["content"]["plans"][0]["key"]["nodes"] = "two";
    cases.push_back({"wrong type", resign(t), "nodes: missing or not an integer"});
  }
  {
    nlohmann::json t = j;
    t["content"]["measurements"][1]["median_us"] = -5;
    cases.push_back({"negative time", resign(t), "median_us"});
  }

  auto dst = TuningDb::open(dir.file("dst.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(dst.ok());
  // Something local first, so "unchanged" is not the trivial empty database.
  const PlanRecord local = sample_plan(sample_key("cc"));
  ASSERT_TRUE(dst->put_plan(local).ok());
  const std::string before = db_digest(*dst);
  for (const Case& c : cases) {
    const std::string path = dir.file("bad.json");
    ASSERT_TRUE(paths::write_file_atomic(path, c.text).ok());
    auto r = import_file(*dst, path, ConflictPolicy::kPreferNewer);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.error().exit_code(), 2) << c.what;
    EXPECT_NE(r.error().message().find(c.expect), std::string::npos)
        << c.what << ": " << r.error().message();
    EXPECT_NE(r.error().message().find("bad.json"), std::string::npos) << c.what;
    EXPECT_EQ(db_digest(*dst), before) << c.what;
  }
}

// Issue 43 (items 3 and 6): what a well-formed bundle carried through before, each refused at
// import naming the field, the database unchanged.
TEST(Bundle, RoundTwoHostileValuesAreRefusedNamingTheField) {
  TempDir dir;
  const nlohmann::json j = nlohmann::json::parse(make_bundle(dir));
  struct Case {
    std::string what;
    std::string text;
    std::string expect;
  };
  std::vector<Case> cases;
  // One edit of plans[0]'s plan (per-rank 1 on 1x2; made per-rank 64, global 128 first).
  const auto plan_case = [&](const std::string& what, const std::string& expect, auto edit) {
    nlohmann::json t = j;
    nlohmann::json plan =
        nlohmann::json::parse(t["content"]["plans"][0]["plan_json"].get<std::string>());
    plan["training"]["per_rank_batch"] = 64;
    plan["training"]["global_batch"] = 128;
    edit(plan);
    t["content"]["plans"][0]["plan_json"] = plan.dump();
    cases.push_back({what, resign(t), "content.plans[0]: plan: " + expect});
  };
  plan_case("10 GiB bucket", "training.bucket_bytes: 10 GiB is not plausible",
            [](nlohmann::json& p) { p["training"]["bucket_bytes"] = uint64_t{10} << 30; });
  plan_case("1-byte bucket", "training.bucket_bytes: 1 B is not plausible",
            [](nlohmann::json& p) { p["training"]["bucket_bytes"] = 1; });
  plan_case("lr x100 at global batch 128", "training.lr_scale: 100 is not plausible",
            [](nlohmann::json& p) { p["training"]["lr_scale"] = 100; });
  plan_case("negative regret", "invalid plan: provenance.regret: expected a share >= 0",
            [](nlohmann::json& p) {
              p["provenance"] = {{"source", "tuned"}, {"regret", -0.5}};
            });
  plan_case("negative budget", "provenance.budget.budget_s: -20 is not plausible",
            [](nlohmann::json& p) {
              p["provenance"] = {{"source", "tuned"}, {"budget", {{"budget_s", -20}}}};
            });
  plan_case("negative batch", "invalid plan: training.per_rank_batch: expected a positive integer",
            [](nlohmann::json& p) {
              p["training"]["per_rank_batch"] = -8;
              p["training"]["global_batch"] = -16;
            });
  const std::string esc = "ok \x1b]0;pwned\x07\x1b[31m";
  plan_case("ESC in the reason", "invalid plan: provenance.reason: a control character",
            [&](nlohmann::json& p) {
              p["provenance"] = {{"source", "tuned"}, {"reason", esc}};
            });
  plan_case("NUL in the recipe name", "invalid plan: provenance.recipe: a control character",
            [](nlohmann::json& p) {
              p["provenance"] = {{"source", "tuned"}, {"recipe", std::string("q\0x", 3)}};
            });
  plan_case("ESC in the budget cut", "invalid plan: provenance.budget.cut: a control character",
            [&](nlohmann::json& p) {
              p["provenance"] = {{"source", "tuned"}, {"budget", {{"cut", esc}}}};
            });
  plan_case(
      "ESC in the confidence rival",
      "invalid plan: provenance.confidence.rival: a control character", [&](nlohmann::json& p) {
        p["provenance"] = {{"source", "tuned"}, {"confidence", {{"rival", esc}, {"ratio", 1.2}}}};
      });
  plan_case("ESC in a NIC name", "invalid plan: placement[0].nic: a control character",
            [](nlohmann::json& p) {
              p["placement"] = {{{"local_rank", 0}, {"nic", "mlx5_0\x1b[2J"}},
                                {{"local_rank", 1}, {"nic", "mlx5_1"}}};
            });
  {
    nlohmann::json t = j;
    auto& m = t["content"]["measurements"][1];
    m["p10_us"] = m["p90_us"].get<double>() * 2;
    cases.push_back({"p10 above p90", resign(t),
                     "content.measurements[1]: measurement.p10_us/median_us/p90_us"});
  }
  {
    nlohmann::json t = j;
    t["content"]["measurements"][0]["reason"] = "fail\x1b[31m";
    cases.push_back({"ESC in a measurement reason", resign(t),
                     "content.measurements[0]: measurement.reason: unexpected character"});
  }
  {
    nlohmann::json t = j;
    t["provenance"]["site"] = "site\x1b]0;x\x07";
    cases.push_back({"ESC in the exporter's site", resign(t), "provenance.site"});
  }
  {
    // A format 2 bundle (checksum over the content only): its provenance could be anything.
    nlohmann::json t = j;
    t["format_version"] = 2;
    t["provenance"]["site"] = "trusted-site";
    cases.push_back({"format 2", resign(t),
                     "bundle format version 2 (an older dltune's) is no longer read: its "
                     "checksum does not cover the exporter's provenance, which anyone could "
                     "have changed; re-export it with this dltune (dltune db export)"});
  }
  {
    nlohmann::json t = j;
    t["format_version"] = 1;
    t["content"].erase("recipe_trials");
    cases.push_back({"format 1", resign(t), "bundle format version 1 (an older dltune's)"});
  }

  auto dst = TuningDb::open(dir.file("dst.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(dst.ok());
  const PlanRecord local = sample_plan(sample_key("cc"));
  ASSERT_TRUE(dst->put_plan(local).ok());
  const std::string before = db_digest(*dst);
  for (const Case& c : cases) {
    const std::string path = dir.file("bad.json");
    ASSERT_TRUE(paths::write_file_atomic(path, c.text).ok());
    auto r = import_file(*dst, path, ConflictPolicy::kPreferNewer);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.error().exit_code(), 2) << c.what;
    EXPECT_NE(r.error().message().find(c.expect), std::string::npos)
        << c.what << ": " << r.error().message();
    EXPECT_EQ(strings::find_control(r.error().message()), std::string::npos)
        << c.what << ": " << r.error().message();
    EXPECT_EQ(db_digest(*dst), before) << c.what;
  }
}

}  // namespace
}  // namespace dltune::tuner::db
