// Schema v7: the scaling efficiency's 1-rank baselines (store, replace, find by key, plan hash and
// binding; refuse malformed rows, a hostile row another program put in the file; migrate from v6;
// prune; not exported in bundles).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "tuner/db/bundle.h"
#include "tuner/db/schema.h"
#include "tuner/db/store.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

using testing::sample_key;
using testing::TempDir;

const std::string kHashA(64, 'a');
const std::string kHashB(64, 'b');

BaselineRecord baseline(double sps, const std::string& hash = kHashA, std::string bind = "core") {
  BaselineRecord b;
  b.key = sample_key("ab12", 1, 1);
  b.plan_hash = hash;
  b.bind = std::move(bind);
  b.samples_per_s = sps;
  b.steps = 160;
  b.rel_ci = 0.031;
  b.seconds = 3.5;
  b.provenance = testing::sample_provenance();
  return b;
}

TEST(Baselines, StoredReplacedAndFoundByKeyPlanAndBinding) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.error().message();
  ASSERT_TRUE(db->put_baseline(baseline(410.5)).ok());
  ASSERT_TRUE(db->put_baseline(baseline(99, kHashB)).ok());          // another plan
  ASSERT_TRUE(db->put_baseline(baseline(98, kHashA, "none")).ok());  // another binding
  BaselineRecord again = baseline(420.25);
  again.provenance.created_at += 60;
  ASSERT_TRUE(db->put_baseline(again).ok());  // measured again: replaces the row
  EXPECT_EQ(db->counts()->baselines, 3);

  auto got = db->find_baseline(sample_key("ab12", 1, 1), kHashA, "core");
  ASSERT_TRUE(got.ok()) << got.error().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_DOUBLE_EQ((*got)->samples_per_s, 420.25);
  EXPECT_EQ((*got)->steps, 160);
  EXPECT_DOUBLE_EQ((*got)->rel_ci, 0.031);
  EXPECT_DOUBLE_EQ((*got)->seconds, 3.5);
  EXPECT_EQ((*got)->provenance, again.provenance);
  EXPECT_EQ((*got)->key.family, "fa01");

  // Any difference in the key, the plan or the binding is a miss.
  EXPECT_FALSE(db->find_baseline(sample_key("cd34", 1, 1), kHashA, "core")->has_value());
  Key newer = sample_key("ab12", 1, 1);
  newer.versions.dltune = "0.2.0";
  EXPECT_FALSE(db->find_baseline(newer, kHashA, "core")->has_value());
  EXPECT_FALSE(
      db->find_baseline(sample_key("ab12", 1, 1), std::string(64, 'c'), "core")->has_value());
  EXPECT_FALSE(db->find_baseline(sample_key("ab12", 1, 1), kHashA, "socket")->has_value());
}

TEST(Baselines, MalformedRowsAreRefusedAndNothingIsWritten) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  struct Case {
    BaselineRecord row;
    const char* field;
  };
  std::vector<Case> cases;
  cases.push_back({baseline(0), "baseline.samples_per_s"});
  cases.push_back({baseline(std::nan("")), "baseline.samples_per_s"});
  cases.push_back({baseline(10, "abc"), "baseline.plan_hash"});
  cases.push_back({baseline(10, std::string(64, 'G')), "baseline.plan_hash"});
  cases.push_back({baseline(10, kHashA, "co re"), "baseline.bind"});
  cases.push_back({baseline(10), "baseline.steps"});
  cases.back().row.steps = 0;
  cases.push_back({baseline(10), "baseline.rel_ci"});
  cases.back().row.rel_ci = std::numeric_limits<double>::infinity();
  for (const Case& c : cases) {
    auto s = db->put_baseline(c.row);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_NE(s.error().message().find(c.field), std::string::npos) << s.error().message();
  }
  EXPECT_EQ(db->counts()->baselines, 0);
}

// A row written into the file by something else (a hand edit, another program) is refused when
// read, naming the database, not used as a baseline.
TEST(Baselines, AHostileStoredRowIsAnErrorNotABaseline) {
  TempDir dir;
  const std::string path = dir.file("db.sqlite");
  auto db = TuningDb::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->put_baseline(baseline(300)).ok());
  ASSERT_TRUE(db->connection().exec("UPDATE baselines SET samples_per_s = -5").ok());
  auto got = db->find_baseline(sample_key("ab12", 1, 1), kHashA, "core");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message().find(path), std::string::npos) << got.error().message();
  EXPECT_NE(got.error().message().find("samples_per_s"), std::string::npos);
}

TEST(Baselines, AVersion6DatabaseMigratesAndTakesThem) {
  TempDir dir;
  const std::string path = dir.file("v6.db");
  {
    auto conn = Connection::open(path, OpenMode::kReadWrite);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(migrate(*conn, 6).ok());
    auto st = conn->prepare("SELECT count(*) FROM sqlite_master WHERE name = 'baselines'");
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE(*st->step());
    EXPECT_EQ(st->integer(0), 0);
  }
  auto db = TuningDb::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.error().message();
  EXPECT_EQ(db->counts()->schema_version, kSchemaVersion);
  ASSERT_TRUE(db->put_baseline(baseline(250)).ok());
  EXPECT_EQ(db->counts()->baselines, 1);
}

TEST(Baselines, PrunedByAgeVersionOrFingerprint) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->put_baseline(baseline(300)).ok());
  ASSERT_TRUE(db->put_baseline(baseline(301, kHashB)).ok());
  PruneSpec p;
  p.fingerprint = "cd34";
  EXPECT_EQ(*db->prune(p), 0);
  p.fingerprint = "ab12";
  EXPECT_EQ(*db->prune(p), 2);
  EXPECT_EQ(db->counts()->baselines, 0);
}

// Baselines are this machine's measurements: an export carries plans, measurements and trials,
// never them.
TEST(Baselines, NotCarriedInBundles) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->put_baseline(baseline(300)).ok());
  auto bundle = export_bundle(*db, Filter{}, "siteA");
  ASSERT_TRUE(bundle.ok()) << bundle.error().message();
  EXPECT_TRUE(bundle->plans.empty());
  const std::string text = bundle_to_json(*bundle);
  EXPECT_EQ(text.find("baseline"), std::string::npos) << text;
}

}  // namespace
}  // namespace dltune::tuner::db
