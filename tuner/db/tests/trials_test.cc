// Recipe trials (schema v3): migration from every earlier version, store and read back with
// their plan, prune, bundles (round trip, idempotent import, format 1 still read, hostile rows
// rejected), and a writer killed among the trials leaves neither the plan nor any trial.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/hash.h"
#include "common/paths.h"
#include "tuner/db/admin.h"
#include "tuner/db/bundle.h"
#include "tuner/db/schema.h"
#include "tuner/db/store.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

using nlohmann::json;
using testing::sample_key;
using testing::sample_plan;
using testing::TempDir;

RecipeTrial sample_trial(int64_t round, int64_t candidate, Key key = sample_key(),
                         bool failed = false) {
  RecipeTrial t;
  t.key = std::move(key);
  t.round = round;
  t.candidate = candidate;
  t.per_rank_batch = 32 << candidate;
  t.global_batch = 64 << candidate;
  t.scaling = candidate % 2 == 0 ? "weak" : "strong";
  t.label = "b" + std::to_string(t.per_rank_batch) + " " + t.scaling + " bucket=one(2MiB) overlap";
  t.bucket_bytes = uint64_t{1} << 20;
  t.overlap = candidate % 3 != 0;
  t.lr_scale = 0.5 * static_cast<double>(candidate + 1);
  t.steps = failed ? 0 : 4 << (2 * round);
  t.samples_per_s = failed ? 0 : 1000.0 + 10.0 * static_cast<double>(candidate) + 0.125;
  t.step_s = failed ? 0 : static_cast<double>(t.global_batch) / t.samples_per_s;
  if (!failed && round > 0) {
    t.median_sps = t.samples_per_s * 1.01;
    t.iqr_sps = 12.5;
  }
  t.failed = failed;
  t.reason = failed ? "out of memory (cudaMalloc)" : "";
  t.provenance = testing::sample_provenance();
  return t;
}

// Three candidates in round 0 (one failed), two in round 1.
std::vector<RecipeTrial> sample_trials(const Key& key = sample_key()) {
  return {sample_trial(0, 0, key), sample_trial(0, 1, key), sample_trial(0, 2, key, true),
          sample_trial(1, 0, key), sample_trial(1, 1, key)};
}

void expect_same(const RecipeTrial& a, const RecipeTrial& b) {
  EXPECT_TRUE(a.key.same_identity(b.key));
  EXPECT_EQ(a.key.family, b.key.family);
  EXPECT_EQ(a.round, b.round);
  EXPECT_EQ(a.candidate, b.candidate);
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.per_rank_batch, b.per_rank_batch);
  EXPECT_EQ(a.global_batch, b.global_batch);
  EXPECT_EQ(a.scaling, b.scaling);
  EXPECT_EQ(a.bucket_bytes, b.bucket_bytes);
  EXPECT_EQ(a.overlap, b.overlap);
  EXPECT_DOUBLE_EQ(a.lr_scale, b.lr_scale);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_DOUBLE_EQ(a.samples_per_s, b.samples_per_s);
  EXPECT_DOUBLE_EQ(a.step_s, b.step_s);
  EXPECT_EQ(a.median_sps, b.median_sps);
  EXPECT_EQ(a.iqr_sps, b.iqr_sps);
  EXPECT_EQ(a.failed, b.failed);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.provenance, b.provenance);
}

// A database left at `version` by an old dltune, holding one plan.
void make_old_database(const std::string& path, int version) {
  auto conn = Connection::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE(migrate(*conn, version).ok());
  auto st = conn->prepare(
      "INSERT INTO plans(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, "
      "plan_json, site, host, user_name, writer_version, created_at) "
      "VALUES('ab12', '4.1.4', '4.2.2', '', '0.1.0', 1, 2, 'cafe', ?1, 'siteA', 'h', 'u', "
      "'0.0.9', 1600000000)");
  ASSERT_TRUE(st.ok());
  st->bind(1, testing::sample_plan_json());
  ASSERT_TRUE(st->run().ok());
}

TEST(TrialsSchema, EveryEarlierVersionMigratesAndTakesTrials) {
  for (int version = 1; version < kSchemaVersion; ++version) {
    TempDir dir;
    const std::string path = dir.file("old.db");
    make_old_database(path, version);
    auto db = TuningDb::open(path, OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.error().message();
    auto c = db->counts();
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->schema_version, kSchemaVersion) << "from v" << version;
    EXPECT_EQ(c->plans, 1);
    EXPECT_EQ(c->recipe_trials, 0);
    // The old plan stays; storing it again with trials links them to the same row.
    auto old = db->find_exact(sample_key());
    ASSERT_TRUE(old.ok() && old->has_value());
    const auto trials = sample_trials();
    ASSERT_TRUE(db->put_results(&**old, {}, trials).ok());
    EXPECT_EQ(db->counts()->plans, 1);
    EXPECT_EQ(db->recipe_trials()->size(), trials.size());
  }
}

TEST(Trials, StoredWithThePlanReadBackAndReplacedWithIt) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("a.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  const PlanRecord plan = sample_plan();
  const auto trials = sample_trials();
  ASSERT_TRUE(db->put_results(&plan, {}, trials).ok());
  auto got = db->recipe_trials();
  ASSERT_TRUE(got.ok()) << got.error().message();
  ASSERT_EQ(got->size(), trials.size());
  for (size_t i = 0; i < trials.size(); ++i) expect_same((*got)[i], trials[i]);
  EXPECT_FALSE((*got)[0].median_sps.has_value());  // NULL survives as "not measured"
  ASSERT_TRUE((*got)[3].median_sps.has_value());
  // Every trial points at the plan row.
  auto link = db->connection().prepare(
      "SELECT count(*) FROM recipe_trials t JOIN plans p ON t.plan_id = p.id");
  ASSERT_TRUE(link.ok());
  ASSERT_TRUE(*link->step());
  EXPECT_EQ(link->integer(0), static_cast<int64_t>(trials.size()));
  // Another key's trials are apart; a filter selects them.
  const Key other = sample_key("cd34", 1, 4);
  const PlanRecord other_plan = sample_plan(other);
  const std::vector<RecipeTrial> other_trials = {sample_trial(0, 0, other)};
  ASSERT_TRUE(db->put_results(&other_plan, {}, other_trials).ok());
  Filter f;
  f.fingerprint = "cd34";
  EXPECT_EQ(db->recipe_trials(f)->size(), 1u);
  // Tuning again replaces the plan's trials; a plan stored without trials has none.
  const std::vector<RecipeTrial> again = {sample_trial(0, 4), sample_trial(1, 4)};
  ASSERT_TRUE(db->put_results(&plan, {}, again).ok());
  f.fingerprint = "ab12";
  auto now = db->recipe_trials(f);
  ASSERT_EQ(now->size(), 2u);
  EXPECT_EQ((*now)[0].candidate, 4);
  ASSERT_TRUE(db->put_plan(plan).ok());
  EXPECT_EQ(db->recipe_trials(f)->size(), 0u);
  EXPECT_EQ(db->counts()->recipe_trials, 1);  // the other plan's
}

TEST(Trials, MalformedTrialsAreRejectedAndNothingIsWritten) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("a.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  struct Case {
    const char* what;
    void (*mutate)(RecipeTrial&);
    const char* expect;
  };
  const Case cases[] = {
      {"sql in label", [](RecipeTrial& t) { t.label = "b64'); DROP TABLE plans; --"; },
       "recipe_trial.label"},
      {"empty label", [](RecipeTrial& t) { t.label.clear(); }, "recipe_trial.label"},
      {"huge reason", [](RecipeTrial& t) { t.reason = std::string(100000, 'x'); }, "longer than"},
      {"bad scaling", [](RecipeTrial& t) { t.scaling = "auto"; }, "recipe_trial.scaling"},
      {"zero batch", [](RecipeTrial& t) { t.per_rank_batch = 0; }, "per_rank_batch"},
      {"negative median", [](RecipeTrial& t) { t.median_sps = -1; }, "median_samples_per_s"},
      {"ok without steps", [](RecipeTrial& t) { t.steps = 0; }, "recipe_trial.steps"},
      {"another key", [](RecipeTrial& t) { t.key.shape.nodes = 2; }, "not keyed like the plan"},
  };
  const PlanRecord plan = sample_plan();
  for (const Case& c : cases) {
    auto trials = sample_trials();
    c.mutate(trials[1]);
    auto s = db->put_results(&plan, {}, trials);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.error().exit_code(), 2) << c.what;
    EXPECT_NE(s.error().message().find(c.expect), std::string::npos)
        << c.what << ": " << s.error().message();
  }
  const auto trials = sample_trials();
  EXPECT_FALSE(db->put_results(nullptr, {}, trials).ok());  // trials need their plan
  EXPECT_EQ(db->counts()->plans, 0);
  EXPECT_EQ(db->counts()->recipe_trials, 0);
}

TEST(Trials, PruneRemovesTrialsWithTheirPlans) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("a.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  const PlanRecord old_plan = sample_plan(sample_key("01"), 1000000000);
  const PlanRecord new_plan = sample_plan(sample_key("02"), 1790000000);
  ASSERT_TRUE(db->put_results(&old_plan, {}, sample_trials(sample_key("01"))).ok());
  ASSERT_TRUE(db->put_results(&new_plan, {}, sample_trials(sample_key("02"))).ok());
  PruneSpec age;
  age.created_before = 1500000000;
  auto n = db->prune(age);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1 + 5);
  auto left = db->recipe_trials();
  ASSERT_EQ(left->size(), 5u);
  for (const RecipeTrial& t : *left) EXPECT_EQ(t.key.fingerprint, "02");
}

// Exports `db` and returns the bundle text.
std::string export_text(TuningDb& db) {
  auto b = export_bundle(db, {}, "siteA");
  EXPECT_TRUE(b.ok());
  return bundle_to_json(*b);
}

std::string resign(json j) { return testing::rechecksum(std::move(j)); }

TEST(TrialsBundle, RoundTripImportTwiceAndFormatOne) {
  TempDir dir;
  auto src = TuningDb::open(dir.file("src.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(src.ok());
  const PlanRecord plan = sample_plan();
  const auto trials = sample_trials();
  ASSERT_TRUE(src->put_results(&plan, {}, trials).ok());
  const std::string text = export_text(*src);
  EXPECT_EQ(json::parse(text)["format_version"], kBundleFormatVersion);
  ASSERT_TRUE(paths::write_file_atomic(dir.file("b.json"), text).ok());

  auto dst = TuningDb::open(dir.file("dst.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(dst.ok());
  auto r1 = import_file(*dst, dir.file("b.json"), ConflictPolicy::kKeepLocal);
  ASSERT_TRUE(r1.ok()) << r1.error().message();
  EXPECT_EQ(r1->recipe_trials.added, 5);
  auto got = dst->recipe_trials();
  ASSERT_EQ(got->size(), trials.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    RecipeTrial want = trials[i];
    want.provenance.site = "siteA";         // filled in by the export
    want.provenance.signed_by = kUnsigned;  // marked by the import: the bundle is unsigned
    expect_same((*got)[i], want);
  }
  const std::string after_first = export_text(*dst);
  auto r2 = import_file(*dst, dir.file("b.json"), ConflictPolicy::kPreferNewer);
  ASSERT_TRUE(r2.ok()) << r2.error().message();
  EXPECT_FALSE(r2->changed());
  EXPECT_EQ(r2->recipe_trials.unchanged, 5);
  EXPECT_EQ(json::parse(export_text(*dst))["content"], json::parse(after_first)["content"]);

  // A format 1 bundle (an older dltune's: no trials, a checksum that left the provenance out)
  // is refused, saying to re-export it (issue 43); nothing changes.
  json v1 = json::parse(text);
  v1["format_version"] = 1;
  v1["content"].erase("recipe_trials");
  ASSERT_TRUE(paths::write_file_atomic(dir.file("v1.json"), resign(v1)).ok());
  auto r3 = import_file(*dst, dir.file("v1.json"), ConflictPolicy::kPreferNewer);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.error().message().find("bundle format version 1 (an older dltune's) is no longer "
                                      "read"),
            std::string::npos)
      << r3.error().message();
  EXPECT_EQ(dst->counts()->recipe_trials, 5);
  // The same bundle without its trials (as a store without trials exports it) brings the plan
  // alone; its plan, equal to the local one, leaves the local trials alone.
  json bare = json::parse(text);
  bare["content"]["recipe_trials"] = json::array();
  ASSERT_TRUE(paths::write_file_atomic(dir.file("bare.json"), resign(bare)).ok());
  auto r4 = import_file(*dst, dir.file("bare.json"), ConflictPolicy::kPreferNewer);
  ASSERT_TRUE(r4.ok()) << r4.error().message();
  EXPECT_FALSE(r4->changed());
  EXPECT_EQ(dst->counts()->recipe_trials, 5);
  auto fresh = TuningDb::open(dir.file("fresh.db"), OpenMode::kReadWrite);
  auto r4b = import_file(*fresh, dir.file("bare.json"), ConflictPolicy::kKeepLocal);
  ASSERT_TRUE(r4b.ok()) << r4b.error().message();
  EXPECT_EQ(r4b->plans.added, 1);
  EXPECT_EQ(fresh->counts()->recipe_trials, 0);
  // A plan that local has without trials takes the incoming ones.
  auto r5 = import_file(*fresh, dir.file("b.json"), ConflictPolicy::kKeepLocal);
  ASSERT_TRUE(r5.ok()) << r5.error().message();
  EXPECT_EQ(r5->plans.unchanged, 1);
  EXPECT_EQ(r5->recipe_trials.added, 5);
  // A newer plan replaces the old one's trials under prefer-newer, not under keep-local.
  PlanRecord newer = sample_plan(sample_key(), 1790000000);
  newer.provenance.site = "siteB";
  const std::vector<RecipeTrial> newer_trials = {sample_trial(0, 7)};
  auto keep = dst->merge_rows({&newer, 1}, {}, ConflictPolicy::kKeepLocal, newer_trials);
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ(keep->recipe_trials.kept_local, 1);
  EXPECT_EQ(dst->counts()->recipe_trials, 5);
  auto take = dst->merge_rows({&newer, 1}, {}, ConflictPolicy::kPreferNewer, newer_trials);
  ASSERT_TRUE(take.ok());
  EXPECT_EQ(take->recipe_trials.replaced, 1);
  ASSERT_EQ(dst->recipe_trials()->size(), 1u);
  EXPECT_EQ((*dst->recipe_trials())[0].candidate, 7);
}

TEST(TrialsBundle, HostileOrTamperedTrialsAreRejectedAndTheDatabaseUnchanged) {
  TempDir dir;
  auto src = TuningDb::open(dir.file("src.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(src.ok());
  const PlanRecord plan = sample_plan();
  ASSERT_TRUE(src->put_results(&plan, {}, sample_trials()).ok());
  const json j = json::parse(export_text(*src));
  struct Case {
    const char* what;
    std::string text;
    const char* expect;
  };
  std::vector<Case> cases;
  {
    json t = j;
    t["content"]["recipe_trials"][0]["samples_per_s"] = 99999.0;  // not re-signed
    cases.push_back({"tampered", t.dump(), "checksum mismatch"});
  }
  {
    json t = j;
    t["content"]["recipe_trials"][1]["label"] = "b64\"; DELETE FROM plans; --";
    cases.push_back({"sql in label", resign(t), "content.recipe_trials[1]: recipe_trial.label"});
  }
  {
    json t = j;
    t["content"]["recipe_trials"][2]["reason"] = std::string(1 << 20, 'y');
    cases.push_back({"huge reason", resign(t), "longer than 512 bytes"});
  }
  {
    json t = j;
    t["content"]["recipe_trials"][0]["scaling"] = "weak' OR '1'='1";
    cases.push_back({"sql in scaling", resign(t), "recipe_trial.scaling"});
  }
  {
    json t = j;
    t["content"]["recipe_trials"][3]["median_samples_per_s"] = "fast";
    cases.push_back({"wrong type", resign(t), "median_samples_per_s: missing or not a number"});
  }
  {
    json t = j;
    t["content"]["recipe_trials"][0]["key"]["fingerprint"] = "ffff";
    cases.push_back({"orphan", resign(t), "recipe_trials[0]: no plan with its key"});
  }
  {
    json t = j;
    t["format_version"] = 1;
    cases.push_back({"format 1", resign(t), "bundle format version 1 (an older dltune's)"});
  }
  {
    json t = j;
    t["format_version"] = kBundleFormatVersion + 1;
    cases.push_back({"newer format", t.dump(), "is not supported"});
  }
  auto dst = TuningDb::open(dir.file("dst.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(dst.ok());
  const PlanRecord local = sample_plan(sample_key("cc"));
  ASSERT_TRUE(dst->put_results(&local, {}, sample_trials(sample_key("cc"))).ok());
  const std::string before = export_text(*dst);
  for (const Case& c : cases) {
    const std::string path = dir.file("bad.json");
    ASSERT_TRUE(paths::write_file_atomic(path, c.text).ok());
    auto r = import_file(*dst, path, ConflictPolicy::kPreferNewer);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.error().exit_code(), 2) << c.what;
    EXPECT_NE(r.error().message().find(c.expect), std::string::npos)
        << c.what << ": " << r.error().message();
    EXPECT_EQ(json::parse(export_text(*dst))["content"], json::parse(before)["content"]) << c.what;
  }
}

TEST(TrialsShow, SummaryListsTrialsUnderTheirPlan) {
  TempDir dir;
  const std::string path = dir.file("user.db");
  {
    auto db = TuningDb::open(path, OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok());
    const PlanRecord plan = sample_plan();
    ASSERT_TRUE(db->put_results(&plan, {}, sample_trials()).ok());
  }
  Layers layers;
  layers.user_db = path;
  const json s = summarize(layers, true);
  EXPECT_EQ(s["databases"][0]["recipe_trials"], 5);
  ASSERT_EQ(s["plans"].size(), 1u);
  const json& trials = s["plans"][0]["recipe_trials"];
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(trials[2]["failed"], true);
  EXPECT_TRUE(trials[0]["median_samples_per_s"].is_null());
  const std::string text = summary_text(s);
  EXPECT_NE(text.find("5 recipe trials"), std::string::npos) << text;
  EXPECT_NE(text.find("trial r1 #1"), std::string::npos) << text;
  EXPECT_NE(text.find("failed: out of memory"), std::string::npos) << text;
  EXPECT_NE(text.find("IQR 12.5"), std::string::npos) << text;
}

// A writer killed after the plan and some of its trials: after recovery neither the plan nor
// any of its trials is there, and the database is intact.
TEST(TrialsCrash, WriterKilledAmongTheTrialsLeavesNothingOfThePlan) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  {
    auto db = TuningDb::open(path, OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok());
  }
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    auto db = TuningDb::open(path, OpenMode::kReadWrite);
    if (!db) ::_exit(3);
    db->set_row_hook([&](int64_t rows) {
      if (rows == 3) {  // the plan and two trials written
        (void)!::write(ready[1], "x", 1);
        while (true) ::pause();
      }
    });
    const PlanRecord plan = sample_plan();
    (void)db->put_results(&plan, {}, sample_trials());
    ::_exit(4);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto conn = Connection::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(conn.ok());
  auto check = conn->prepare("PRAGMA integrity_check");
  ASSERT_TRUE(check.ok());
  ASSERT_TRUE(*check->step());
  EXPECT_EQ(check->text(0), "ok");
  auto db = TuningDb::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(db->counts()->plans, 0);
  EXPECT_EQ(db->counts()->recipe_trials, 0);
}

}  // namespace
}  // namespace dltune::tuner::db
