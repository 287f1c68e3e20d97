// The measured interference kept for later predictions (predict_interference.h): a measurement
// as a database row and back, which stored row a prediction takes (the job's threads, the
// nearest batch), and the databases it reads (the user's first; a missing one is no error, a
// damaged one is skipped saying why).
#include <gtest/gtest.h>

#include "launcher/backend/temp_dir.h"
#include "launcher/flow/predict_interference.h"
#include "tuner/db/store.h"

namespace dltune::launcher {
namespace {

namespace tdb = tuner::db;

tdb::Key key() {
  tdb::Key k;
  k.fingerprint = "ab12";
  k.family = "fa01";
  k.versions = {"4.1.4", "4.2.2", "", "0.1.0"};
  k.shape = {1, 2};
  k.recipe = std::string(64, 'c');
  return k;
}

predict::Interference measured(double compute) {
  predict::Interference i;
  i.points = {{65536, compute / 2, 0.5}, {4194304, compute, 1.5}};
  i.low = {{65536, compute / 4, 0.25}, {4194304, compute / 2, 1.0}};
  i.high = {{65536, compute, 0.75}, {4194304, compute * 2, 2.0}};
  i.source = "measured here by dltune-worker overlap: 2 ranks x 1 thread(s) training m";
  return i;
}

tdb::InterferenceRecord row(int threads, int batch, double compute = 0.2) {
  tdb::InterferenceRecord r = interference_record(measured(compute), key(), threads, batch);
  r.provenance.host = "node07";
  r.provenance.created_at = 1700000000;  // 2023-11-14
  return r;
}

TEST(StoredInterference, AMeasurementIsStoredWithItsRange) {
  const tdb::InterferenceRecord r = interference_record(measured(0.2), key(), 1, 64);
  ASSERT_TRUE(tdb::validate_interference(r).ok())
      << tdb::validate_interference(r).error().message();
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_DOUBLE_EQ(r.points[1].compute, 0.2);
  EXPECT_DOUBLE_EQ(r.points[1].compute_low, 0.1);
  EXPECT_DOUBLE_EQ(r.points[1].compute_high, 0.4);
  EXPECT_DOUBLE_EQ(r.points[0].comm_low, 0.25);
  // Without a range, the range is the value itself.
  predict::Interference exact = measured(0.2);
  exact.low.clear(), exact.high.clear();
  const tdb::InterferenceRecord e = interference_record(exact, key(), 1, 64);
  EXPECT_DOUBLE_EQ(e.points[1].compute_low, 0.2);
  EXPECT_DOUBLE_EQ(e.points[1].comm_high, 1.5);
}

TEST(StoredInterference, TheJobsThreadsAndTheNearestBatch) {
  const std::vector<tdb::InterferenceRecord> rows = {row(1, 32, 0.1), row(1, 128, 0.3),
                                                     row(2, 64, 0.5)};
  auto i = pick_interference(rows, 1, 100);  // 128 is nearer than 32 by ratio
  ASSERT_TRUE(i.has_value());
  EXPECT_DOUBLE_EQ(i->points[1].compute, 0.3);
  ASSERT_TRUE(i->has_range());
  EXPECT_DOUBLE_EQ(i->high[1].compute, 0.6);
  EXPECT_NE(i->source.find("stored measurement of node07, 2023-11-14: dltune-worker overlap: 2 "
                           "ranks x 1 thread(s)"),
            std::string::npos)
      << i->source;
  EXPECT_NE(i->source.find("measured at batch 128, this one's is 100"), std::string::npos)
      << i->source;
  i = pick_interference(rows, 1, 32);
  ASSERT_TRUE(i.has_value());
  EXPECT_DOUBLE_EQ(i->points[1].compute, 0.1);
  EXPECT_EQ(i->source.find("measured at batch"), std::string::npos) << i->source;
  // Equally near: the first (the user's database comes first).
  EXPECT_DOUBLE_EQ(pick_interference(rows, 1, 64)->points[1].compute, 0.1);
  EXPECT_DOUBLE_EQ(pick_interference(rows, 2, 8)->points[1].compute, 0.5);
  // No measurement of these threads: none, not another thread count's.
  EXPECT_FALSE(pick_interference(rows, 4, 64).has_value());
  EXPECT_FALSE(pick_interference({}, 1, 64).has_value());
}

TEST(StoredInterference, TheUsersDatabaseFirstAndADamagedOneSkipped) {
  auto dir = TempDir::create_in_tmp("dltune-test-");
  ASSERT_TRUE(dir.ok());
  const std::string user = dir->path() + "/user.db", site = dir->path() + "/site.db",
                    damaged = dir->path() + "/damaged.db";
  for (const auto& [path, compute] : {std::pair{user, 0.1}, std::pair{site, 0.9}}) {
    auto db = tdb::TuningDb::open(path, tdb::OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.error().message();
    ASSERT_TRUE(db->put_interference(row(1, 64, compute)).ok());
  }
  {
    auto db = tdb::TuningDb::open(damaged, tdb::OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->put_interference(row(1, 64)).ok());
    ASSERT_TRUE(db->connection().exec("UPDATE interference SET points_json = '[[1]]'").ok());
  }
  tdb::Layers layers;
  layers.user_db = user;
  layers.site_dbs = {dir->path() + "/absent.db", damaged, site};
  std::string skipped;
  const auto rows = stored_interference(layers, key(), &skipped);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(pick_interference(rows, 1, 64)->points[1].compute, 0.1);  // the user's
  EXPECT_NE(skipped.find(damaged), std::string::npos) << skipped;
  EXPECT_NE(skipped.find("interference.points_json"), std::string::npos) << skipped;
  EXPECT_EQ(skipped.find("absent.db"), std::string::npos) << skipped;
  // Another machine's key finds nothing.
  tdb::Key other = key();
  other.fingerprint = "cd34";
  EXPECT_TRUE(stored_interference(layers, other).empty());
}

}  // namespace
}  // namespace dltune::launcher
