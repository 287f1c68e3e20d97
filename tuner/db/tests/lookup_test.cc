// Layered look-up: user before site, site databases never written, exact vs near hits, speed.
#include "tuner/db/lookup.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <stdlib.h>

#include "common/hash.h"
#include "common/paths.h"
#include "tuner/db/schema.h"
#include "tuner/db/store.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

using testing::sample_key;
using testing::sample_plan;
using testing::TempDir;

// Writes `plans` to a new database at `path`, all with site name `site`, and closes it.
void make_db(const std::string& path, std::vector<PlanRecord> plans, const std::string& site) {
  auto db = TuningDb::open(path, OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.error().message();
  for (PlanRecord& p : plans) {
    p.provenance.site = site;
    ASSERT_TRUE(db->put_plan(p).ok());
  }
}

PlanRecord plan_with(Key key, uint64_t switch_bytes) {
  const JobShape shape = key.shape;
  PlanRecord p = sample_plan(std::move(key));
  p.plan_json = testing::sample_plan_json(switch_bytes, "ring", shape.nodes, shape.ranks_per_node);
  return p;
}

std::string file_digest(const std::string& path) {
  auto text = paths::read_file(path);
  return text ? sha256_hex(*text) : "";
}

TEST(Lookup, UserDatabaseComesBeforeSites) {
  TempDir dir;
  const Key key = sample_key();
  make_db(dir.file("user.db"), {plan_with(key, 111)}, "");
  make_db(dir.file("site.db"), {plan_with(key, 222)}, "siteA");
  auto r = lookup_plan({dir.file("user.db"), {dir.file("site.db")}}, key);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->kind, HitKind::kExact);
  EXPECT_FALSE(r->from_site);
  EXPECT_EQ(r->db_path, dir.file("user.db"));
  EXPECT_EQ(r->plan.plan_json, testing::sample_plan_json(111));
}

TEST(Lookup, SitesInOrderAndNeverWritten) {
  TempDir dir;
  const Key key = sample_key();
  make_db(dir.file("s1.db"), {plan_with(sample_key("ee"), 1)}, "siteA");
  make_db(dir.file("s2.db"), {plan_with(key, 222)}, "siteB");
  make_db(dir.file("s3.db"), {plan_with(key, 333)}, "siteC");
  const std::string before2 = file_digest(dir.file("s2.db"));
  const std::string before1 = file_digest(dir.file("s1.db"));
  ASSERT_FALSE(before2.empty());
  // The user database does not exist yet: a miss there, and it is not created.
  const Layers layers{
      dir.file("user.db"),
      {dir.file("missing.db"), dir.file("s1.db"), dir.file("s2.db"), dir.file("s3.db")}};
  auto r = lookup_plan(layers, key);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->kind, HitKind::kExact);
  EXPECT_TRUE(r->from_site);
  EXPECT_EQ(r->site, "siteB");
  EXPECT_EQ(r->db_path, dir.file("s2.db"));
  ASSERT_EQ(r->warnings.size(), 1u);  // missing.db
  EXPECT_NE(r->warnings[0].find("missing.db"), std::string::npos);
  EXPECT_FALSE(paths::exists(dir.file("user.db")));
  EXPECT_EQ(file_digest(dir.file("s2.db")), before2);
  EXPECT_EQ(file_digest(dir.file("s1.db")), before1);
  // A site database opened through the store refuses writes.
  auto site = TuningDb::open(dir.file("s2.db"), OpenMode::kReadOnly);
  ASSERT_TRUE(site.ok());
  EXPECT_FALSE(site->put_plan(sample_plan()).ok());
  EXPECT_FALSE(site->connection().exec("DELETE FROM plans").ok());
  EXPECT_EQ(file_digest(dir.file("s2.db")), before2);
}

// One bad site file must not break every user's launch: a site database with a negative schema
// number is skipped with one warning naming it, and the next layer still serves (issue 43).
TEST(Lookup, SiteWithNegativeSchemaIsSkippedWithOneWarning) {
  TempDir dir;
  const Key key = sample_key();
  make_db(dir.file("bad.db"), {plan_with(key, 111)}, "siteBad");
  {
    auto conn = Connection::open(dir.file("bad.db"), OpenMode::kReadWrite);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(conn->exec("PRAGMA user_version = -1").ok());
  }
  make_db(dir.file("good.db"), {plan_with(key, 222)}, "siteGood");
  auto r = lookup_plan({dir.file("user.db"), {dir.file("bad.db"), dir.file("good.db")}}, key);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->kind, HitKind::kExact);
  EXPECT_EQ(r->site, "siteGood");
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("bad.db"), std::string::npos) << r->warnings[0];
  EXPECT_NE(r->warnings[0].find("schema version -1"), std::string::npos) << r->warnings[0];
}

TEST(Lookup, ExactInSiteBeatsNearInUser) {
  TempDir dir;
  const Key key = sample_key();
  make_db(dir.file("user.db"), {plan_with(sample_key("ab12", 2, 2), 1)}, "");
  make_db(dir.file("site.db"), {plan_with(key, 2)}, "siteA");
  auto r = lookup_plan({dir.file("user.db"), {dir.file("site.db")}}, key);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, HitKind::kExact);
  EXPECT_TRUE(r->from_site);
}

TEST(Lookup, NearHitSameFamilyOtherShapeReportedAsSuch) {
  TempDir dir;
  Key other_machine = sample_key("ff00", 1, 8);  // another node of the family, 8 ranks
  Key closer = sample_key("ab12", 1, 4);         // same fingerprint, 4 ranks
  Key other_family = sample_key("ab12", 1, 2);
  other_family.family = "fa02";
  other_family.recipe = "beef";
  make_db(dir.file("user.db"), {plan_with(other_machine, 1), plan_with(other_family, 3)}, "");
  make_db(dir.file("site.db"), {plan_with(closer, 2)}, "siteA");
  const Key want = sample_key("ab12", 1, 2);
  auto r = lookup_plan({dir.file("user.db"), {dir.file("site.db")}}, want);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, HitKind::kNear);
  // The user layer's near hit is reported first (look-up order), with what differs.
  EXPECT_FALSE(r->from_site);
  EXPECT_EQ(r->plan.key.fingerprint, "ff00");
  ASSERT_FALSE(r->differences.empty());
  EXPECT_NE(r->differences[0].find("fingerprint ff00"), std::string::npos);
  EXPECT_NE(r->differences[1].find("job shape 1x8 (wanted 1x2)"), std::string::npos);
  // Within one database the closest candidate wins.
  EXPECT_LT(near_distance(want, plan_with(closer, 0)),
            near_distance(want, plan_with(other_machine, 0)));
  // A key without a family never gets a near hit; another recipe is not a near hit either.
  Key no_family = want;
  no_family.family = "";
  auto miss = lookup_plan({dir.file("user.db"), {}}, no_family);
  ASSERT_TRUE(miss.ok());
  EXPECT_EQ(miss->kind, HitKind::kMiss);
}

TEST(Lookup, LayersFromEnvironment) {
  ::setenv("DLTUNE_SITE_DB", "/a/site1.db::/b/site2.db", 1);
  auto l = layers_from_env(std::string("/x/user.db"));
  ::unsetenv("DLTUNE_SITE_DB");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->user_db, "/x/user.db");
  EXPECT_EQ(l->site_dbs, (std::vector<std::string>{"/a/site1.db", "/b/site2.db"}));
}

// A cache look-up must add little to a launch (issue: <= 20 ms). Median of 15 whole look-ups
// (open user + site database, query, close) over databases holding 200 plans each.
TEST(Lookup, IsFast) {
  TempDir dir;
  std::vector<PlanRecord> many;
  for (int i = 0; i < 200; ++i) many.push_back(plan_with(sample_key("ab12", 1 + i, 2), 8));
  make_db(dir.file("user.db"), many, "");
  make_db(dir.file("site.db"), many, "siteA");
  const Key want = sample_key("ab12", 100, 2);
  std::vector<double> ms;
  for (int i = 0; i < 15; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = lookup_plan({dir.file("missing_user.db"), {dir.file("site.db")}}, want);
    const auto t1 = std::chrono::steady_clock::now();
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->kind, HitKind::kExact);
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("lookup: median %.3f ms, max %.3f ms\n", ms[ms.size() / 2], ms.back());
  EXPECT_LT(ms[ms.size() / 2], 20.0);
}

}  // namespace
}  // namespace dltune::tuner::db
