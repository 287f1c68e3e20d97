// Signed bundles (signing.h, bundle.h): keys on disk, signatures that cover the whole bundle,
// verification against trusted keys, and import_sources refusing before anything is written.
#include "tuner/db/signing.h"

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "common/paths.h"
#include "tuner/db/bundle.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

using nlohmann::json;
using testing::TempDir;

struct Keys {
  SecretKey site_a, mallory;
  std::vector<PublicKey> trusted;  // site_a only
};

Keys make_keys(const TempDir& dir) {
  Keys k;
  EXPECT_TRUE(generate_key_files(dir.file("keys"), "siteA").ok());
  EXPECT_TRUE(generate_key_files(dir.file("keys"), "mallory").ok());
  k.site_a = *read_secret_key(dir.file("keys/siteA.key"));
  k.mallory = *read_secret_key(dir.file("keys/mallory.key"));
  k.trusted = *read_trusted_keys(dir.file("keys/siteA.pub"));
  return k;
}

Bundle one_plan_bundle() {
  Bundle b;
  b.provenance = testing::sample_provenance(1700000000, "siteA");
  b.plans.push_back(testing::sample_plan());
  b.plans[0].provenance.site = "siteA";
  b.measurements.push_back(testing::sample_measurement(8));
  return b;
}

TEST(Signing, KeyFilesAreWrittenOnceAndSecretOnesStayPrivate) {
  TempDir dir;
  auto pub = generate_key_files(dir.file("k"), "siteA");
  ASSERT_TRUE(pub.ok()) << pub.error().message();
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("k/siteA.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(*paths::read_file(dir.file("k/siteA.pub")), public_key_line(*pub));
  auto again = generate_key_files(dir.file("k"), "siteA");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message().find("never overwritten"), std::string::npos);
  EXPECT_FALSE(generate_key_files(dir.file("k"), "../etc/x").ok());
  EXPECT_FALSE(generate_key_files(dir.file("k"), "").ok());
  ::chmod(dir.file("k/siteA.key").c_str(), 0640);
  auto readable = read_secret_key(dir.file("k/siteA.key"));
  ASSERT_FALSE(readable.ok());
  EXPECT_NE(readable.error().message().find("chmod 600"), std::string::npos);
}

TEST(Signing, TrustedKeyFilesAreStrict) {
  const std::string good = "# site keys\n\nsiteA " + std::string(43, 'A') + "=\n";
  auto ok = parse_trusted_keys(good, "t");
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].name, "siteA");
  const std::pair<std::string, std::string> bad[] = {
      {"siteA\n", "t: line 1: expected 'NAME BASE64-KEY'"},
      {"siteA AAAA\n", "t: line 1: not base64 of 32 bytes"},
      {"si;teA " + std::string(43, 'A') + "=\n", "t: line 1: a key name may only use"},
      {good + good.substr(13), "t: line 4: a second key named 'siteA'"},
      {"siteA " + std::string(43, 'A') + "= extra\n", "more than two fields"},
  };
  for (const auto& [text, want] : bad) {
    auto r = parse_trusted_keys(text, "t");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message().find(want), std::string::npos) << r.error().message();
  }
}

TEST(Signing, ASignedBundleVerifiesAndAnyChangeBreaksIt) {
  TempDir dir;
  const Keys k = make_keys(dir);
  const std::string signed_text = bundle_to_json(one_plan_bundle(), &k.site_a);
  Verification v;
  ASSERT_TRUE(parse_bundle(signed_text, k.trusted, &v).ok());
  EXPECT_EQ(v.trust, Verification::Trust::kTrustedSigner);
  EXPECT_EQ(v.signer, "siteA");
  // Without trusting siteA: signed, verified with the key it carries, but not trusted.
  ASSERT_TRUE(parse_bundle(signed_text, {}, &v).ok());
  EXPECT_EQ(v.trust, Verification::Trust::kUntrustedSigner);
  // Unsigned.
  ASSERT_TRUE(parse_bundle(bundle_to_json(one_plan_bundle()), k.trusted, &v).ok());
  EXPECT_EQ(v.trust, Verification::Trust::kNoSignature);

  // Every change after signing, checksum recomputed (the forger's move), is refused: content,
  // the exporter's provenance, the format version, and a signer renamed to a trusted name.
  const json j = json::parse(signed_text);
  std::vector<std::pair<std::string, json>> changed;
  changed.push_back({"content", j});
  changed.back().second["content"]["measurements"][0]["median_us"] = 1.0;
  changed.push_back({"provenance", j});
  changed.back().second["provenance"]["site"] = "trusted-site";
  changed.push_back({"signer", json::parse(bundle_to_json(one_plan_bundle(), &k.mallory))});
  changed.back().second["signatures"][0]["signer"] = "siteA";
  for (const auto& [what, t] : changed) {
    for (const auto* trusted : {&k.trusted, static_cast<const std::vector<PublicKey>*>(nullptr)}) {
      if (what == "signer" && trusted == nullptr) continue;  // mallory's own key verifies it
      auto r =
          parse_bundle(testing::rechecksum(t), trusted ? *trusted : std::vector<PublicKey>{}, &v);
      ASSERT_FALSE(r.ok()) << what;
      EXPECT_NE(r.error().message().find("does not verify"), std::string::npos)
          << what << ": " << r.error().message();
    }
  }
}

TEST(Signing, ImportRefusesBeforeCreatingAnything) {
  TempDir dir;
  const Keys k = make_keys(dir);
  ASSERT_TRUE(paths::write_file_atomic(dir.file("signed.json"),
                                       bundle_to_json(one_plan_bundle(), &k.site_a))
                  .ok());
  ASSERT_TRUE(
      paths::write_file_atomic(dir.file("plain.json"), bundle_to_json(one_plan_bundle())).ok());
  ASSERT_TRUE(paths::write_file_atomic(dir.file("mallory.json"),
                                       bundle_to_json(one_plan_bundle(), &k.mallory))
                  .ok());
  ImportOptions strict;
  strict.require_signature = true;
  strict.trusted_keys = dir.file("keys/siteA.pub");
  for (const char* refused : {"plain.json", "mallory.json"}) {
    auto r = import_sources(dir.file("new.db"), {dir.file(refused)}, strict);
    ASSERT_FALSE(r.ok()) << refused;
    EXPECT_EQ(r.error().exit_code(), 2);
    EXPECT_NE(r.error().message().find("nothing was imported"), std::string::npos);
    EXPECT_FALSE(paths::exists(dir.file("new.db"))) << refused;  // was a new empty 36 KiB file
  }
  // A bad source after a good one: still nothing written.
  ASSERT_TRUE(paths::write_file_atomic(dir.file("bad.json"), "{\"format\": 1}").ok());
  auto mixed =
      import_sources(dir.file("new.db"), {dir.file("signed.json"), dir.file("bad.json")}, strict);
  ASSERT_FALSE(mixed.ok());
  EXPECT_FALSE(paths::exists(dir.file("new.db")));

  // Imported unsigned first, then the same bundle signed: the rows take the signature.
  ImportOptions plain_first;
  auto unsigned_first = import_sources(dir.file("upgrade.db"), {dir.file("plain.json")}, {});
  ASSERT_TRUE(unsigned_first.ok());
  plain_first.trusted_keys = dir.file("keys/siteA.pub");
  auto upgrade = import_sources(dir.file("upgrade.db"), {dir.file("signed.json")}, plain_first);
  ASSERT_TRUE(upgrade.ok()) << upgrade.error().message();
  EXPECT_EQ(upgrade->report.plans.replaced, 1);
  ASSERT_EQ(upgrade->report.plan_conflicts.size(), 1u);
  EXPECT_EQ(upgrade->report.plan_conflicts[0].why,
            "the same plan, now signed by trusted key 'siteA' (it was unsigned)");
  auto up = TuningDb::open(dir.file("upgrade.db"), OpenMode::kReadOnly);
  EXPECT_EQ((*up->plans())[0].provenance.signed_by, "siteA");
  // Its measurements too (they used to stay "unsigned": same content, so "unchanged").
  const auto ups = *up->measurements();
  ASSERT_FALSE(ups.empty());
  EXPECT_EQ(upgrade->report.measurements.replaced, static_cast<int64_t>(ups.size()));
  for (const auto& m : ups) EXPECT_EQ(m.provenance.signed_by, "siteA");

  auto r = import_sources(dir.file("new.db"), {dir.file("signed.json")}, strict);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->report.plans.added, 1);
  auto db = TuningDb::open(dir.file("new.db"), OpenMode::kReadOnly);
  EXPECT_EQ((*db->plans())[0].provenance.signed_by, "siteA");
  EXPECT_EQ((*db->measurements())[0].provenance.signed_by, "siteA");

  // Lenient: unsigned and untrusted import with a warning, marked unsigned.
  ImportOptions lenient;
  lenient.trusted_keys = dir.file("keys/siteA.pub");
  auto l = import_sources(dir.file("lenient.db"), {dir.file("mallory.json")}, lenient);
  ASSERT_TRUE(l.ok()) << l.error().message();
  ASSERT_EQ(l->warnings.size(), 1u);
  EXPECT_NE(l->warnings[0].find("which is not a trusted key"), std::string::npos);
  auto ldb = TuningDb::open(dir.file("lenient.db"), OpenMode::kReadOnly);
  EXPECT_EQ((*ldb->plans())[0].provenance.signed_by, kUnsigned);
}

// The database's own settings require signatures for every import into it.
TEST(Signing, ADatabaseSettingRequiresSignatures) {
  TempDir dir;
  const Keys k = make_keys(dir);
  ASSERT_TRUE(
      paths::write_file_atomic(dir.file("plain.json"), bundle_to_json(one_plan_bundle())).ok());
  ASSERT_TRUE(paths::write_file_atomic(dir.file("signed.json"),
                                       bundle_to_json(one_plan_bundle(), &k.site_a))
                  .ok());
  {
    auto db = TuningDb::open(dir.file("site.db"), OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok());
    EXPECT_FALSE(db->set_settings({true, "relative/keys"}).ok());
    ASSERT_TRUE(db->set_settings({true, dir.file("keys/siteA.pub")}).ok());
    EXPECT_EQ(*db->settings(), (DbSettings{true, dir.file("keys/siteA.pub")}));
  }
  auto refused = import_sources(dir.file("site.db"), {dir.file("plain.json")}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("its require_signature setting"), std::string::npos);
  auto taken = import_sources(dir.file("site.db"), {dir.file("signed.json")}, {});
  ASSERT_TRUE(taken.ok()) << taken.error().message();
  EXPECT_TRUE(taken->require_signature);
}

// Issue 43, item 4: a file that grants trust is checked for its mode, as a secret key is.
TEST(Signing, ATrustedKeysFileOthersMayChangeIsRefused) {
  TempDir dir;
  make_keys(dir);
  const std::string pub = dir.file("keys/siteA.pub");
  for (mode_t mode : {0666, 0646, 0664, 0620}) {
    ASSERT_EQ(::chmod(pub.c_str(), mode), 0);
    auto r = read_trusted_keys(pub);
    ASSERT_FALSE(r.ok()) << std::oct << mode;
    EXPECT_EQ(r.error().exit_code(), 2);
    char want[16];
    std::snprintf(want, sizeof want, "(mode %o)", static_cast<unsigned>(mode));
    EXPECT_NE(r.error().message().find(want), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find("may be changed by others"), std::string::npos);
    EXPECT_NE(r.error().message().find("chmod go-w"), std::string::npos);
  }
  for (mode_t mode : {0644, 0600, 0444}) {
    ASSERT_EQ(::chmod(pub.c_str(), mode), 0);
    EXPECT_TRUE(read_trusted_keys(pub).ok()) << std::oct << mode;
  }
  // Through an import, as DLTUNE_TRUSTED_KEYS.
  ASSERT_TRUE(
      paths::write_file_atomic(dir.file("plain.json"), bundle_to_json(one_plan_bundle())).ok());
  ASSERT_EQ(::chmod(pub.c_str(), 0666), 0);
  ImportOptions opts;
  opts.trusted_keys = pub;
  auto r = import_sources(dir.file("new.db"), {dir.file("plain.json")}, opts);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("(mode 666)"), std::string::npos) << r.error().message();
  EXPECT_FALSE(paths::exists(dir.file("new.db")));
}

// Issue 43, item 4: a user's DLTUNE_TRUSTED_KEYS narrows a database that sets its own trust,
// never widens it. (It used to add its keys to the database's: mallory's bundle went into a
// database whose administrator trusted siteA only.)
TEST(Signing, TheEnvironmentCannotWidenADatabasesTrust) {
  TempDir dir;
  const Keys k = make_keys(dir);
  ASSERT_TRUE(paths::write_file_atomic(dir.file("mallory.json"),
                                       bundle_to_json(one_plan_bundle(), &k.mallory))
                  .ok());
  ASSERT_TRUE(paths::write_file_atomic(dir.file("signed.json"),
                                       bundle_to_json(one_plan_bundle(), &k.site_a))
                  .ok());
  // The user's own trusted-keys file lists mallory (and siteA).
  ASSERT_TRUE(paths::write_file_atomic(dir.file("user.keys"),
                                       *paths::read_file(dir.file("keys/mallory.pub")) +
                                           *paths::read_file(dir.file("keys/siteA.pub")))
                  .ok());
  ASSERT_TRUE(paths::write_file_atomic(dir.file("mallory-only.keys"),
                                       *paths::read_file(dir.file("keys/mallory.pub")))
                  .ok());
  const auto make_db = [&](const std::string& name, DbSettings s) {
    auto db = TuningDb::open(dir.file(name), OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->set_settings(s).ok());
  };
  make_db("site.db", {true, dir.file("keys/siteA.pub")});
  ImportOptions env;
  env.trusted_keys = dir.file("user.keys");
  auto widened = import_sources(dir.file("site.db"), {dir.file("mallory.json")}, env);
  ASSERT_FALSE(widened.ok()) << "mallory's bundle went into a database that trusts siteA only";
  EXPECT_NE(widened.error().message().find("signed by 'mallory', which is not a trusted key"),
            std::string::npos)
      << widened.error().message();
  auto taken = import_sources(dir.file("site.db"), {dir.file("signed.json")}, env);
  ASSERT_TRUE(taken.ok()) << taken.error().message();
  ASSERT_EQ(taken->warnings.size(), 1u);
  EXPECT_NE(taken->warnings[0].find("DLTUNE_TRUSTED_KEYS' key 'mallory' is not trusted by the "
                                    "database"),
            std::string::npos)
      << taken->warnings[0];
  // Narrowing: an environment that trusts only mallory leaves the database trusting nobody.
  ImportOptions narrow;
  narrow.trusted_keys = dir.file("mallory-only.keys");
  make_db("narrow.db", {true, dir.file("keys/siteA.pub")});
  auto none = import_sources(dir.file("narrow.db"), {dir.file("signed.json")}, narrow);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("which is not a trusted key"), std::string::npos)
      << none.error().message();
  // A database that requires signatures but names no keys takes none from the environment.
  make_db("nokeys.db", {true, ""});
  auto nokeys = import_sources(dir.file("nokeys.db"), {dir.file("signed.json")}, env);
  ASSERT_FALSE(nokeys.ok());
  EXPECT_NE(nokeys.error().message().find("the database names no trusted keys: set them with "
                                          "dltune db settings --trusted-keys FILE"),
            std::string::npos)
      << nokeys.error().message();
  // A database without settings of its own trusts what the environment names (as before).
  auto user = import_sources(dir.file("user.db"), {dir.file("mallory.json")}, env);
  ASSERT_TRUE(user.ok()) << user.error().message();
  auto udb = TuningDb::open(dir.file("user.db"), OpenMode::kReadOnly);
  EXPECT_EQ((*udb->plans())[0].provenance.signed_by, "mallory");
}

// Every plan conflict is reported: both sides, the winner and why.
TEST(Merge, EveryPlanConflictIsReported) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("a.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  const PlanRecord local = testing::sample_plan(testing::sample_key(), 1710000000);
  ASSERT_TRUE(db->put_plan(local).ok());
  PlanRecord incoming = testing::sample_plan(testing::sample_key(), 1700000000);
  incoming.plan_json = testing::sample_plan_json(8192);
  incoming.provenance.site = "siteB";
  auto keep = db->merge_rows({&incoming, 1}, {}, ConflictPolicy::kKeepLocal, {}, "b.json");
  ASSERT_TRUE(keep.ok());
  ASSERT_EQ(keep->plan_conflicts.size(), 1u);
  const PlanConflict& c = keep->plan_conflicts[0];
  EXPECT_EQ(c.local.plan_json, local.plan_json);
  EXPECT_EQ(c.incoming.provenance.site, "siteB");
  EXPECT_EQ(c.source, "b.json");
  EXPECT_FALSE(c.incoming_won);
  EXPECT_EQ(c.why, "policy keep-local: the local plan stays");
  auto newer = db->merge_rows({&incoming, 1}, {}, ConflictPolicy::kPreferNewer);
  ASSERT_EQ(newer->plan_conflicts.size(), 1u);
  EXPECT_FALSE(newer->plan_conflicts[0].incoming_won);
  EXPECT_EQ(newer->plan_conflicts[0].why,
            "policy prefer-newer: the local plan is newer (incoming 2023-11-14T22:13:20Z, local "
            "2024-03-09T16:00:00Z)");
  incoming.provenance.created_at = 1720000000;
  auto won = db->merge_rows({&incoming, 1}, {}, ConflictPolicy::kPreferNewer);
  ASSERT_EQ(won->plan_conflicts.size(), 1u);
  EXPECT_TRUE(won->plan_conflicts[0].incoming_won);
  EXPECT_EQ(won->plans.replaced, 1);
  auto same = db->merge_rows({&incoming, 1}, {}, ConflictPolicy::kPreferNewer);
  EXPECT_TRUE(same->plan_conflicts.empty());  // unchanged is no conflict
}

}  // namespace
}  // namespace dltune::tuner::db
