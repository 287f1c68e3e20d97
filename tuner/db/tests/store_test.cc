// TuningDb: schema creation and migration, round trips, validation, conflict policies, prune,
// read-only databases.
#include "tuner/db/store.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tuner/db/schema.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

using testing::sample_key;
using testing::sample_measurement;
using testing::sample_plan;
using testing::TempDir;

TEST(Schema, NewDatabaseIsAtCurrentVersion) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("a.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.error().message();
  auto c = db->counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->schema_version, kSchemaVersion);
  EXPECT_EQ(c->plans, 0);
}

// A v1 file written by hand (the v1 shape, as an old dltune left it) is migrated on open, its
// rows survive, and the v2 column exists with its default (trials_test.cc migrates every
// earlier version to the current one).
TEST(Schema, MigratesFromVersion1) {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  {
    auto conn = Connection::open(path, OpenMode::kReadWrite);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(migrate(*conn, 1).ok());
    auto v = schema_version(*conn);
    ASSERT_TRUE(v.ok());
    ASSERT_EQ(*v, 1);
    auto st = conn->prepare(
        "INSERT INTO plans(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe, "
        "plan_json, site, host, user_name, writer_version, created_at) "
        "VALUES('ab12', '4.1.4', '4.2.2', '', '0.1.0', 1, 2, 'cafe', ?1, 'siteA', 'h', 'u', "
        "'0.0.9', 1600000000)");
    ASSERT_TRUE(st.ok());
    st->bind(1, testing::sample_plan_json());
    ASSERT_TRUE(st->run().ok());
  }
  auto db = TuningDb::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.error().message();
  auto c = db->counts();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->schema_version, kSchemaVersion);
  EXPECT_EQ(c->plans, 1);
  auto hit = db->find_exact(sample_key());
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((*hit)->key.family, "");  // v1 rows have no family
  EXPECT_EQ((*hit)->provenance.site, "siteA");
  // The near-hit index of v2 exists.
  auto idx = db->connection().prepare(
      "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'plans_by_family'");
  ASSERT_TRUE(idx.ok());
  ASSERT_TRUE(*idx->step());
  EXPECT_EQ(idx->integer(0), 1);
}

TEST(Schema, RejectsNewerVersionAndForeignDatabases) {
  TempDir dir;
  {
    auto conn = Connection::open(dir.file("new.db"), OpenMode::kReadWrite);
    ASSERT_TRUE(conn->exec("PRAGMA user_version = 9").ok());
    auto other = Connection::open(dir.file("other.db"), OpenMode::kReadWrite);
    ASSERT_TRUE(other->exec("CREATE TABLE t(x)").ok());
  }
  auto newer = TuningDb::open(dir.file("new.db"), OpenMode::kReadWrite);
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.error().message().find("newer than this dltune supports"), std::string::npos);
  auto foreign = TuningDb::open(dir.file("other.db"), OpenMode::kReadWrite);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().message().find("not a dltune tuning database"), std::string::npos);
  // A text file is not a database.
  FILE* f = std::fopen(dir.file("text.db").c_str(), "w");
  std::fputs("this is not sqlite, just some text that is long enough to have a header..\n", f);
  std::fclose(f);
  auto text = TuningDb::open(dir.file("text.db"), OpenMode::kReadWrite);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().exit_code(), 2) << text.error().message();
}

// A negative schema number (anyone with write access to a shared file can set one) is refused
// with a message, read-only and read-write alike: it once indexed the migration steps below
// zero and ran whatever bytes lay there as SQL (hangs, SIGSEGV, SIGBUS; issue 43).
// A file at schema `version` with nothing else in it (made with `PRAGMA user_version` alone),
// opened read-write and read-only: both refuse it with exit 2 and a message holding `needle`.
void expect_bare_version_refused(const TempDir& dir, long long version, const std::string& needle) {
  SCOPED_TRACE(version);
  const std::string path = dir.file("v" + std::to_string(version) + ".db");
  {
    auto conn = Connection::open(path, OpenMode::kReadWrite);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(conn->exec(("PRAGMA user_version = " + std::to_string(version)).c_str()).ok());
  }
  for (const OpenMode mode : {OpenMode::kReadWrite, OpenMode::kReadOnly}) {
    auto db = TuningDb::open(path, mode);
    ASSERT_FALSE(db.ok());
    EXPECT_EQ(db.error().exit_code(), 2) << db.error().message();
    EXPECT_NE(db.error().message().find(needle), std::string::npos) << db.error().message();
  }
}

TEST(Schema, RejectsNegativeVersions) {
  TempDir dir;
  for (const long long version : {-1LL, -2LL, -3LL, -27LL, -100000LL, -2147483648LL})
    expect_bare_version_refused(dir, version, "schema version " + std::to_string(version));
}

// A schema number without the tables (a hand-made or damaged file) is refused as it is opened,
// not at its first read or write with "no such table".
TEST(Schema, RejectsAVersionWithoutItsTables) {
  TempDir dir;
  for (const long long version : {3LL, static_cast<long long>(kSchemaVersion)})
    expect_bare_version_refused(dir, version, "but not the tables of a dltune tuning database");
}

// Issue 43, item 5: a new database appears whole (made under a temporary name, then linked into
// place: nothing else is left in its directory), and a 0-byte file, as an older dltune left
// on a full disk, reads as the empty database it is instead of failing every later command.
TEST(Store, NewDatabasesAppearWholeAndEmptyFilesReadAsEmpty) {
  TempDir dir;
  {
    auto db = TuningDb::open(dir.file("made.db"), OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.error().message();
    ASSERT_TRUE(db->put_plan(sample_plan()).ok());
  }
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    names.push_back(e.path().filename().string());
  for (const std::string& n : names) EXPECT_EQ(n.rfind("made.db", 0), 0u) << n;
  EXPECT_EQ(std::count_if(names.begin(), names.end(),
                          [](const std::string& n) { return n.find(".new-") != n.npos; }),
            0);
  auto again = TuningDb::open(dir.file("made.db"), OpenMode::kReadOnly);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->plans()->size(), 1u);

  std::FILE* f = std::fopen(dir.file("zero.db").c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  auto ro = TuningDb::open(dir.file("zero.db"), OpenMode::kReadOnly);
  ASSERT_TRUE(ro.ok()) << ro.error().message();
  EXPECT_EQ(ro->counts()->plans, 0);
  EXPECT_EQ(std::filesystem::file_size(dir.file("zero.db")), 0u);  // read-only: never written
  auto rw = TuningDb::open(dir.file("zero.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(rw.ok()) << rw.error().message();
  EXPECT_EQ(rw->counts()->schema_version, kSchemaVersion);
}

// Issue 43, item 6: what a tuning command checks before it measures for its whole budget.
TEST(Store, CheckCanStoreRefusesBeforeAnythingIsMeasured) {
  TempDir dir;
  EXPECT_TRUE(check_can_store(dir.file("new.db")).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.file("new.db")));  // nothing created
  ASSERT_TRUE(TuningDb::open(dir.file("ok.db"), OpenMode::kReadWrite).ok());
  EXPECT_TRUE(check_can_store(dir.file("ok.db")).ok());
  for (const int version : {-1, kSchemaVersion + 1}) {
    const std::string path = dir.file("v" + std::to_string(version + 10) + ".db");
    {
      auto conn = Connection::open(path, OpenMode::kReadWrite);
      ASSERT_TRUE(conn->exec(("PRAGMA user_version = " + std::to_string(version)).c_str()).ok());
    }
    Status s = check_can_store(path);
    ASSERT_FALSE(s.ok()) << version;
    EXPECT_EQ(s.error().exit_code(), 2);
    EXPECT_NE(s.error().message().find("nothing was measured"), std::string::npos);
    EXPECT_NE(s.error().message().find("schema version " + std::to_string(version)),
              std::string::npos)
        << s.error().message();
  }
}

TEST(Store, PlanAndMeasurementsRoundTrip) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("a.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  const PlanRecord plan = sample_plan();
  const Measurement ms[] = {sample_measurement(8, "rd"), sample_measurement(1 << 20, "ring")};
  ASSERT_TRUE(db->put_results(&plan, ms).ok());
  auto hit = db->find_exact(plan.key);
  ASSERT_TRUE(hit.ok() && hit->has_value());
  EXPECT_EQ((*hit)->plan_json, plan.plan_json);
  EXPECT_EQ((*hit)->key.family, "fa01");
  EXPECT_EQ((*hit)->provenance, plan.provenance);
  auto got = db->measurements();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[1].bytes, uint64_t{1} << 20);
  EXPECT_DOUBLE_EQ((*got)[1].median_us, ms[1].median_us);
  EXPECT_EQ((*got)[0].algorithm, "rd");
  // A different job shape is a different key.
  auto miss = db->find_exact(sample_key("ab12", 2, 2));
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  // Replacing keeps one row.
  PlanRecord newer = sample_plan(plan.key, 1790000000);
  ASSERT_TRUE(db->put_plan(newer).ok());
  EXPECT_EQ(db->counts()->plans, 1);
  EXPECT_EQ((*db->find_exact(plan.key))->provenance.created_at, 1790000000);
}

TEST(Store, InvalidRowsAreRejectedAndNothingIsWritten) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("a.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  struct Case {
    const char* what;
    void (*mutate)(PlanRecord&);
    const char* expect;
  };
  const Case cases[] = {
      {"quote in fingerprint",
       [](PlanRecord& p) { p.key.fingerprint = "ab'; DROP TABLE plans;--"; }, "key.fingerprint"},
      {"upper-case hex", [](PlanRecord& p) { p.key.fingerprint = "ABCD"; }, "lowercase hex"},
      {"huge family", [](PlanRecord& p) { p.key.family = std::string(5000, 'a'); }, "longer than"},
      {"zero nodes", [](PlanRecord& p) { p.key.shape.nodes = 0; }, "key.shape"},
      {"site with quote", [](PlanRecord& p) { p.provenance.site = "o\"brien"; }, "provenance.site"},
      {"plan not json", [](PlanRecord& p) { p.plan_json = "{nope"; }, "not valid JSON"},
      {"plan wrong version",
       [](PlanRecord& p) {
         p.plan_json.replace(p.plan_json.find("\"version\":1"), 11, "\"version\":7");
       },
       "reads plan version 1, got 7"},
      {"plan without training", [](PlanRecord& p) { p.plan_json = R"({"version":1})"; },
       "collectives: missing"},
      {"plan for another shape",
       [](PlanRecord& p) {
         p.key.shape = {2, 2};
       },
       "plan: job 1x2 is not the key's job shape 2x2"},
      {"absurd warm-up",
       [](PlanRecord& p) {
         p.plan_json.replace(p.plan_json.find("\"scaling\":\"weak\""), 16,
                             "\"scaling\":\"weak\",\"warmup_steps\":1000000000000000000");
       },
       "training.warmup_steps: 1000000000000000000 is not plausible"},
      {"made in the future", [](PlanRecord& p) { p.provenance.created_at = 32503680000; },
       "not a plausible time"},
  };
  for (const Case& c : cases) {
    PlanRecord p = sample_plan();
    c.mutate(p);
    const Measurement m = sample_measurement(8);
    auto s = db->put_results(&p, std::span<const Measurement>(&m, 1));
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_NE(s.error().message().find(c.expect), std::string::npos)
        << c.what << ": " << s.error().message();
    EXPECT_EQ(s.error().exit_code(), 2) << c.what;
  }
  EXPECT_EQ(db->counts()->plans, 0);
  EXPECT_EQ(db->counts()->measurements, 0);
}

TEST(Store, ConflictPolicies) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("a.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  const PlanRecord local = sample_plan(sample_key(), 1700000000);
  const Measurement local_m = sample_measurement(64, "ring", sample_key(), 10);
  ASSERT_TRUE(db->put_results(&local, std::span<const Measurement>(&local_m, 1)).ok());

  PlanRecord newer = sample_plan(sample_key(), 1700000100);
  newer.plan_json = testing::sample_plan_json(8192);
  Measurement more = sample_measurement(64, "ring", sample_key(), 50);
  more.provenance.created_at = 1600000000;  // older, but more samples

  auto keep = db->merge_rows({&newer, 1}, {&more, 1}, ConflictPolicy::kKeepLocal);
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ(keep->plans.kept_local, 1);
  EXPECT_EQ(keep->measurements.kept_local, 1);
  EXPECT_FALSE(keep->changed());
  EXPECT_EQ((*db->find_exact(local.key))->plan_json, local.plan_json);

  auto newer_r = db->merge_rows({&newer, 1}, {&more, 1}, ConflictPolicy::kPreferNewer);
  ASSERT_TRUE(newer_r.ok());
  EXPECT_EQ(newer_r->plans.replaced, 1);
  EXPECT_EQ(newer_r->measurements.kept_local, 1);  // the incoming measurement is older
  EXPECT_EQ((*db->find_exact(local.key))->plan_json, newer.plan_json);

  auto samples = db->merge_rows({}, {&more, 1}, ConflictPolicy::kPreferMoreSamples);
  ASSERT_TRUE(samples.ok());
  EXPECT_EQ(samples->measurements.replaced, 1);
  EXPECT_EQ((*db->measurements())[0].samples, 50);

  auto again = db->merge_rows({&newer, 1}, {&more, 1}, ConflictPolicy::kPreferMoreSamples);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed());
  EXPECT_EQ(again->plans.unchanged, 1);
  EXPECT_EQ(again->measurements.unchanged, 1);
  EXPECT_FALSE(parse_policy("prefer-local").ok());
}

TEST(Store, PruneByAgeAndVersion) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("a.db"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  Key old_version = sample_key("01");
  old_version.versions.dltune = "0.0.1";
  ASSERT_TRUE(db->put_plan(sample_plan(sample_key("02"), 1000000000)).ok());
  ASSERT_TRUE(db->put_plan(sample_plan(old_version, 1790000000)).ok());
  ASSERT_TRUE(db->put_plan(sample_plan(sample_key("03"), 1790000000)).ok());
  EXPECT_FALSE(db->prune({}).ok());
  PruneSpec age;
  age.created_before = 1500000000;
  auto by_age = db->prune(age);
  ASSERT_TRUE(by_age.ok());
  EXPECT_EQ(*by_age, 1);
  PruneSpec version;
  version.keep_dltune_version = "0.1.0";
  auto by_version = db->prune(version);
  ASSERT_TRUE(by_version.ok());
  EXPECT_EQ(*by_version, 1);
  auto left = db->plans();
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].key.fingerprint, "03");
}

TEST(Store, ReadOnlyDatabaseOfOlderSchemaIsUpgradedInMemoryOnly) {
  TempDir dir;
  const std::string path = dir.file("site.db");
  {
    auto conn = Connection::open(path, OpenMode::kReadWrite);
    ASSERT_TRUE(migrate(*conn, 1).ok());
  }
  auto db = TuningDb::open(path, OpenMode::kReadOnly);
  ASSERT_TRUE(db.ok()) << db.error().message();
  EXPECT_EQ(db->counts()->schema_version, kSchemaVersion);
  auto put = db->put_plan(sample_plan());
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.error().message().find("read-only"), std::string::npos);
  auto on_disk = Connection::open(path, OpenMode::kReadOnly);
  ASSERT_TRUE(on_disk.ok());
  EXPECT_EQ(*schema_version(*on_disk), 1);
  EXPECT_FALSE(TuningDb::open(dir.file("missing.db"), OpenMode::kReadOnly).ok());
}

}  // namespace
}  // namespace dltune::tuner::db
