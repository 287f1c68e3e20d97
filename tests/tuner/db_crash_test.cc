// Crash safety of the tuning database, with real processes: a writer SIGKILLed in the middle of a
// transaction leaves a database that passes PRAGMA integrity_check and holds no partial plan, and
// four processes writing at once all succeed (they wait on the busy timeout instead of failing).
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tuner/db/sqlite.h"
#include "tuner/db/store.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

using testing::TempDir;

constexpr int kMeasurementsPerPlan = 400;

// One "tuning result": a plan and its measurements, all keyed by fingerprint `fp`.
void write_result(TuningDb& db, const std::string& fp, int* rc) {
  const Key key = testing::sample_key(fp);
  std::vector<Measurement> ms;
  for (int i = 0; i < kMeasurementsPerPlan; ++i) {
    Measurement m = testing::sample_measurement(uint64_t{4} << (i % 26), "ring", key);
    m.segment_bytes = static_cast<uint64_t>(i);  // distinct rows
    m.reason = std::string(200, 'r');            // bulk, so the transaction spills to the WAL
    ms.push_back(std::move(m));
  }
  const PlanRecord plan = testing::sample_plan(key);
  if (!db.put_results(&plan, ms).ok()) *rc = 1;
}

std::string integrity(const std::string& path) {
  auto conn = Connection::open(path, OpenMode::kReadWrite);
  if (!conn) return conn.error().message();
  auto st = conn->prepare("PRAGMA integrity_check");
  if (!st) return st.error().message();
  auto row = st->step();
  if (!row || !*row) return "no answer";
  return st->text(0);
}

// Every stored plan has all of its measurements, and no measurement is without its plan.
void expect_no_partial_results(const std::string& path) {
  auto db = TuningDb::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.error().message();
  auto plans = db->plans();
  ASSERT_TRUE(plans.ok());
  auto ms = db->measurements();
  ASSERT_TRUE(ms.ok());
  std::map<std::string, int> per_fp;
  for (const Measurement& m : *ms) ++per_fp[m.key.fingerprint];
  for (const PlanRecord& p : *plans) {
    if (p.key.fingerprint == "00") continue;  // the baseline plan has no measurements
    EXPECT_EQ(per_fp[p.key.fingerprint], kMeasurementsPerPlan) << p.key.fingerprint;
    per_fp.erase(p.key.fingerprint);
  }
  EXPECT_TRUE(per_fp.empty()) << "measurements without their plan, e.g. " << per_fp.begin()->first;
}

// The writer stops (forever) inside its transaction after `stop_after` rows and tells the parent
// through `ready`; the parent kills it there.
TEST(DbCrash, WriterKilledInsideATransactionLeavesNoPartialPlan) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  {
    auto db = TuningDb::open(path, OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(db->put_plan(testing::sample_plan(testing::sample_key("00"))).ok());
  }
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    auto db = TuningDb::open(path, OpenMode::kReadWrite);
    if (!db) ::_exit(3);
    (void)db->connection().exec("PRAGMA cache_size = 8");  // spill uncommitted pages to the WAL
    db->set_row_hook([&](int64_t rows) {
      if (rows == kMeasurementsPerPlan - 10) {
        (void)!::write(ready[1], "x", 1);
        while (true) ::pause();
      }
    });
    int rc = 0;
    write_result(*db, "dead", &rc);
    ::_exit(4);  // not reached: the parent kills us inside the transaction
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  // The WAL now holds frames of the uncommitted transaction.
  struct stat st {};
  ASSERT_EQ(::stat((path + "-wal").c_str(), &st), 0);
  EXPECT_GT(st.st_size, 100 * 1024) << "the transaction did not reach the WAL";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  EXPECT_EQ(integrity(path), "ok");
  auto db = TuningDb::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  auto dead = db->find_exact(testing::sample_key("dead"));
  ASSERT_TRUE(dead.ok());
  EXPECT_FALSE(dead->has_value());
  Filter f;
  f.fingerprint = "dead";
  EXPECT_EQ(db->measurements(f)->size(), 0u);
  EXPECT_TRUE(db->find_exact(testing::sample_key("00"))->has_value());
  // And the database is writable again.
  EXPECT_TRUE(db->put_plan(testing::sample_plan(testing::sample_key("01"))).ok());
}

// Kills a writer that commits one result after another at varied moments: whatever committed is
// whole, whatever did not is absent.
TEST(DbCrash, WriterKilledAtRandomMomentsNeverLeavesPartialResults) {
  TempDir dir;
  const std::string path = dir.file("t.db");
  for (int round = 0; round < 4; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto db = TuningDb::open(path, OpenMode::kReadWrite);
      if (!db) ::_exit(3);
      int rc = 0;
      for (int i = 0; rc == 0; ++i) {
        write_result(*db, "a" + std::to_string(round) + "b" + std::to_string(i), &rc);
      }
      ::_exit(rc);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + 110 * round));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status)) << "writer failed on its own: exit " << WEXITSTATUS(status);
    EXPECT_EQ(integrity(path), "ok") << "round " << round;
    expect_no_partial_results(path);
  }
}

TEST(DbCrash, FourConcurrentWritersAllSucceed) {
  TempDir dir;
  const std::string path = dir.file("t.db");  // created by the writers themselves, concurrently
  constexpr int kWriters = 4, kResults = 6;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto db = TuningDb::open(path, OpenMode::kReadWrite);
      if (!db) {
        std::fprintf(stderr, "writer %d: %s\n", w, db.error().message().c_str());
        ::_exit(3);
      }
      int rc = 0;
      for (int i = 0; i < kResults && rc == 0; ++i) {
        write_result(*db, "c" + std::to_string(w) + "d" + std::to_string(i), &rc);
      }
      ::_exit(rc);
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  EXPECT_EQ(integrity(path), "ok");
  auto db = TuningDb::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  auto c = db->counts();
  EXPECT_EQ(c->plans, kWriters * kResults);
  EXPECT_EQ(c->measurements, kWriters * kResults * kMeasurementsPerPlan);
  expect_no_partial_results(path);
}

}  // namespace
}  // namespace dltune::tuner::db
