// Schema v8: measured interference (store, replace, read by key; refuse malformed rows and a
// hostile row another program put in the file; migrate from v7; prune; not exported in
// bundles).
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

InterferenceRecord measured(int64_t batch, double compute_at_1mib = 0.31) {
  InterferenceRecord r;
  r.key = sample_key("ab12", 1, 2);
  r.threads = 1;
  r.batch = batch;
  r.points = {{65536, 0.12, 0.05, 0.2, 0.4, 0.3, 0.6},
              {1048576, compute_at_1mib, 0.2, 0.5, 0.9, 0.7, 1.1}};
  r.source = "measured here by dltune-worker overlap";
  r.provenance = testing::sample_provenance();
  return r;
}

TEST(InterferenceDb, StoredReplacedAndReadByKey) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.error().message();
  ASSERT_TRUE(db->put_interference(measured(64)).ok());
  ASSERT_TRUE(db->put_interference(measured(32)).ok());
  InterferenceRecord again = measured(64, 0.44);
  again.provenance.created_at += 60;
  ASSERT_TRUE(db->put_interference(again).ok());  // measured again: replaces the row
  EXPECT_EQ(db->counts()->interference, 2);

  auto got = db->interference(sample_key("ab12", 1, 2));
  ASSERT_TRUE(got.ok()) << got.error().message();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].batch, 32);  // by threads, then batch
  const InterferenceRecord& r = (*got)[1];
  EXPECT_EQ(r.batch, 64);
  EXPECT_EQ(r.threads, 1);
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_DOUBLE_EQ(r.points[1].bytes, 1048576);
  EXPECT_DOUBLE_EQ(r.points[1].compute, 0.44);
  EXPECT_DOUBLE_EQ(r.points[1].compute_low, 0.2);
  EXPECT_DOUBLE_EQ(r.points[1].comm_high, 1.1);
  EXPECT_EQ(r.source, again.source);
  EXPECT_EQ(r.provenance, again.provenance);
  EXPECT_EQ(r.key.family, "fa01");

  // Another machine, another shape or another dltune: none.
  EXPECT_TRUE(db->interference(sample_key("cd34", 1, 2))->empty());
  EXPECT_TRUE(db->interference(sample_key("ab12", 1, 4))->empty());
  Key newer = sample_key("ab12", 1, 2);
  newer.versions.dltune = "0.2.0";
  EXPECT_TRUE(db->interference(newer)->empty());
}

TEST(InterferenceDb, MalformedRowsAreRefusedAndNothingIsWritten) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  struct Case {
    InterferenceRecord row;
    const char* field;
  };
  std::vector<Case> cases;
  cases.push_back({measured(64), "interference.points"});
  cases.back().row.points.clear();
  cases.push_back({measured(64), "interference.points"});
  cases.back().row.points.resize(kMaxInterferencePoints + 1, cases.back().row.points[0]);
  cases.push_back({measured(64), "interference.points.bytes"});  // not ascending
  std::swap(cases.back().row.points[0], cases.back().row.points[1]);
  cases.push_back({measured(64, std::nan("")), "interference.points.compute"});
  cases.push_back({measured(64, 12), "interference.points.compute"});   // above the cap
  cases.push_back({measured(64, 0.1), "interference.points.compute"});  // below its range
  cases.push_back({measured(64), "interference.points.comm"});
  cases.back().row.points[0].comm_low = -1;
  cases.push_back({measured(0), "interference.batch"});
  cases.push_back({measured(64), "interference.threads"});
  cases.back().row.threads = 0;
  cases.push_back({measured(64), "interference.source"});
  cases.back().row.source = "say \"hi\"; rm";
  for (const Case& c : cases) {
    auto s = db->put_interference(c.row);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_NE(s.error().message().find(c.field), std::string::npos) << s.error().message();
  }
  EXPECT_EQ(db->counts()->interference, 0);
}

// A row written into the file by something else is refused when read, naming the database, not
// used as a measurement.
TEST(InterferenceDb, AHostileStoredRowIsAnErrorNotAMeasurement) {
  TempDir dir;
  const std::string path = dir.file("db.sqlite");
  auto db = TuningDb::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->put_interference(measured(64)).ok());
  for (const char* text : {"'[[65536, 50, 0, 99, 0, 0, 0]]'", "'{\"a\": 1}'", "'[[1, 2]]'",
                           "'not json'", "'[[65536, \"x\", 0, 0, 0, 0, 0]]'"}) {
    ASSERT_TRUE(db->connection()
                    .exec((std::string("UPDATE interference SET points_json = ") + text).c_str())
                    .ok());
    auto got = db->interference(sample_key("ab12", 1, 2));
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_NE(got.error().message().find(path), std::string::npos) << got.error().message();
    EXPECT_NE(got.error().message().find("interference.points"), std::string::npos)
        << got.error().message();
  }
}

TEST(InterferenceDb, AVersion7DatabaseMigratesAndTakesThem) {
  TempDir dir;
  const std::string path = dir.file("v7.db");
  {
    auto conn = Connection::open(path, OpenMode::kReadWrite);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(migrate(*conn, 7).ok());
  }
  {
    // Read-only, it is upgraded in memory and reads as holding none.
    auto ro = TuningDb::open(path, OpenMode::kReadOnly);
    ASSERT_TRUE(ro.ok()) << ro.error().message();
    auto got = ro->interference(sample_key("ab12", 1, 2));
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_TRUE(got->empty());
  }
  auto db = TuningDb::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.error().message();
  EXPECT_EQ(db->counts()->schema_version, 8);
  ASSERT_TRUE(db->put_interference(measured(64)).ok());
  EXPECT_EQ(db->counts()->interference, 1);
}

TEST(InterferenceDb, PrunedByFingerprintAndNotCarriedInBundles) {
  TempDir dir;
  auto db = TuningDb::open(dir.file("db.sqlite"), OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db->put_interference(measured(64)).ok());
  auto bundle = export_bundle(*db, Filter{}, "siteA");
  ASSERT_TRUE(bundle.ok()) << bundle.error().message();
  EXPECT_EQ(bundle_to_json(*bundle).find("interference"), std::string::npos);
  PruneSpec p;
  p.fingerprint = "cd34";
  EXPECT_EQ(*db->prune(p), 0);
  p.fingerprint = "ab12";
  EXPECT_EQ(*db->prune(p), 1);
  EXPECT_EQ(db->counts()->interference, 0);
}

}  // namespace
}  // namespace dltune::tuner::db
