// Loads the built plugin with dlopen exactly as NCCL does (symbol names, struct versions,
// newest first) and drives init / getCollInfo / finalize with cost tables.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "plugins/nccl_tuner/nccl_tuner_abi.h"
#include "plugins/nccl_tuner/tests/cost_table.h"
#include "topology/topology.h"
#include "tuner/db/key.h"
#include "tuner/db/store.h"

#include "dltune/config.h"

namespace {

std::vector<std::string> g_log;

void logger(int level, unsigned long /*flags*/, const char* /*file*/, int /*line*/, const char* fmt,
            ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  g_log.push_back(std::to_string(level) + " " + buf);
}

using Table = dltune::plugins::testing::CostTable;

class Harness : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(DLTUNE_NCCL_TUNER_SO, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    g_log.clear();
    plan_ = ::testing::TempDir() + "dltune_nccl_plan.json";
    // Never the real user database: DLTUNE_PLAN-less cases look up this (absent) one.
    db_ = ::testing::TempDir() + "dltune_nccl_harness.db";
    std::remove(db_.c_str());
    setenv("DLTUNE_DB", db_.c_str(), 1);
    unsetenv("DLTUNE_SITE_DB");
  }
  void TearDown() override {
    if (handle_) dlclose(handle_);
    unsetenv("DLTUNE_PLAN");
    unsetenv("DLTUNE_DB");
    unsetenv("DLTUNE_TOPO_XML");
    std::remove(db_.c_str());
  }
  void write_plan(const std::string& text) {
    std::ofstream(plan_) << text;
    setenv("DLTUNE_PLAN", plan_.c_str(), 1);
  }
  template <typename T>
  const T* sym(const char* name) {
    return static_cast<const T*>(dlsym(handle_, name));
  }
  bool logged(const std::string& needle) const {
    for (const auto& l : g_log)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
  void* handle_ = nullptr;
  std::string plan_;
  std::string db_;
};

const char* kPlan = R"({"version": 1, "job": {"nodes": 1, "ranks_per_node": 4},
  "training": {"per_rank_batch": 1, "global_batch": 4, "scaling": "weak"},
  "collectives": {"allreduce": [
    {"min_bytes": 0, "max_bytes": 1048576, "algo": "nccl_tree_ll"},
    {"min_bytes": 1048576, "max_bytes": 18446744073709551615, "algo": "nccl_ring_simple"}]}})";

// What a database holds: a whole plan (recipes/plan.h), which names NCCL's algorithms only
// (NCCL then takes its cheapest protocol for the algorithm).
const char* kDbPlan = R"({"version": 1, "job": {"nodes": 1, "ranks_per_node": 4},
  "training": {"per_rank_batch": 1, "global_batch": 4, "scaling": "weak"},
  "collectives": {"allreduce": [
    {"min_bytes": 0, "max_bytes": 1048576, "algo": "nccl_tree"},
    {"min_bytes": 1048576, "max_bytes": 18446744073709551615, "algo": "nccl_ring"}]}})";

TEST_F(Harness, ExportsTheVersionsNcclLooksFor) {
  const auto* v5 = sym<nccl_tuner_v5_t>("ncclTunerPlugin_v5");
  const auto* v4 = sym<nccl_tuner_v4_t>("ncclTunerPlugin_v4");
  const auto* v3 = sym<nccl_tuner_v3_t>("ncclTunerPlugin_v3");
  ASSERT_NE(v5, nullptr);
  ASSERT_NE(v4, nullptr);
  ASSERT_NE(v3, nullptr);
  EXPECT_STREQ(v5->name, "dltune");
  // Nothing else of dltune leaks out of the library.
  EXPECT_EQ(dlsym(handle_, "_ZN6dltune3env3getERKNS_6EnvVarE"), nullptr);
}

TEST_F(Harness, V5AppliesThePlan) {
  write_plan(kPlan);
  const auto* v5 = sym<nccl_tuner_v5_t>("ncclTunerPlugin_v5");
  void* ctx = nullptr;
  nccl_nvl_domain_info_v5_t nvl{1, 4, 4};
  nccl_tuner_constants_v5_t constants{};
  ASSERT_EQ(v5->init(&ctx, 42, 4, 1, logger, &nvl, &constants), kNcclSuccess);
  EXPECT_TRUE(logged("loaded with 2 rule(s)"));
  Table small, large;
  int channels = -1;
  EXPECT_EQ(v5->getCollInfo(ctx, kNcclFuncAllReduce, 4096, 1, small.rows, kNcclNumAlgorithms,
                            kNcclNumProtocols, 0, &channels),
            kNcclSuccess);
  EXPECT_EQ(v5->getCollInfo(ctx, kNcclFuncAllReduce, 64 << 20, 1, large.rows, kNcclNumAlgorithms,
                            kNcclNumProtocols, 0, &channels),
            kNcclSuccess);
  EXPECT_EQ(small.pick(), std::make_pair(int{kNcclAlgoTree}, int{kNcclProtoLL}));
  EXPECT_EQ(large.pick(), std::make_pair(int{kNcclAlgoRing}, int{kNcclProtoSimple}));
  EXPECT_EQ(channels, -1);  // dltune leaves the channel count to NCCL
  EXPECT_EQ(v5->finalize(ctx), kNcclSuccess);
  EXPECT_TRUE(logged("applied the plan to 2 collective call(s)"));
}

TEST_F(Harness, V4AndV3ApplyThePlan) {
  write_plan(kPlan);
  const auto* v4 = sym<nccl_tuner_v4_t>("ncclTunerPlugin_v4");
  const auto* v3 = sym<nccl_tuner_v3_t>("ncclTunerPlugin_v3");
  void* c4 = nullptr;
  void* c3 = nullptr;
  ASSERT_EQ(v4->init(4, 1, logger, &c4), kNcclSuccess);
  ASSERT_EQ(v3->init(4, 1, logger, &c3), kNcclSuccess);
  Table t4, t3;
  int ch = 0;
  v4->getCollInfo(c4, kNcclFuncAllReduce, 2 << 20, 1, t4.rows, kNcclNumAlgorithms,
                  kNcclNumProtocols, 1, &ch);
  v3->getCollInfo(c3, kNcclFuncAllReduce, 100, 1, t3.rows, kNcclNumAlgorithms, kNcclNumProtocols,
                  &ch);
  EXPECT_EQ(t4.pick(), std::make_pair(int{kNcclAlgoRing}, int{kNcclProtoSimple}));
  EXPECT_EQ(t3.pick(), std::make_pair(int{kNcclAlgoTree}, int{kNcclProtoLL}));
  EXPECT_EQ(v4->destroy(c4), kNcclSuccess);
  EXPECT_EQ(v3->destroy(c3), kNcclSuccess);
}

// Every failure leaves NCCL's own choice and says why in one line.
TEST_F(Harness, FallsBackToNcclDefaults) {
  const auto* v5 = sym<nccl_tuner_v5_t>("ncclTunerPlugin_v5");
  struct Case {
    const char* plan;
    const char* expect;
  };
  const Case cases[] = {
      {nullptr, "DLTUNE_PLAN is not set"},
      {"{ truncated", "ignoring plan"},
      {R"({"collectives": {"allreduce": "x"}})", "ignoring plan"},
      // Not a plan (a launch once handed its ranks an engine configuration): refused, not read.
      {R"({"model": "lenet", "steps": 10})", "ignoring plan"},
      {R"({"version": 1, "job": {"nodes": 4, "ranks_per_node": 8}, "collectives": {},
           "training": {"per_rank_batch": 1, "global_batch": 32, "scaling": "weak"}})",
       "tuned for 4 node(s)"},
  };
  for (const Case& c : cases) {
    g_log.clear();
    if (c.plan)
      write_plan(c.plan);
    else
      unsetenv("DLTUNE_PLAN");
    void* ctx = nullptr;
    ASSERT_EQ(v5->init(&ctx, 1, 4, 1, logger, nullptr, nullptr), kNcclSuccess);
    Table t;
    const auto before = t.pick();
    int ch = 0;
    EXPECT_EQ(v5->getCollInfo(ctx, kNcclFuncAllReduce, 4096, 1, t.rows, kNcclNumAlgorithms,
                              kNcclNumProtocols, 0, &ch),
              kNcclSuccess);
    EXPECT_EQ(t.pick(), before) << c.expect;
    EXPECT_TRUE(logged(c.expect)) << c.expect;
    v5->finalize(ctx);
  }
  setenv("DLTUNE_PLAN", "/nonexistent/plan.json", 1);
  g_log.clear();
  void* ctx = nullptr;
  ASSERT_EQ(v5->init(&ctx, 1, 4, 1, logger, nullptr, nullptr), kNcclSuccess);
  EXPECT_TRUE(logged("No such file"));
  v5->finalize(ctx);
  EXPECT_EQ(v5->getCollInfo(nullptr, kNcclFuncAllReduce, 1, 1, nullptr, 0, 0, 0, nullptr),
            kNcclSuccess);
}

// Without DLTUNE_PLAN the plugin looks the plan up in the databases, under the key `dltune
// tune` stores it with: this node's topology (Lassen's here, through DLTUNE_TOPO_XML) and the
// communicator's shape (nNodes x nRanks/nNodes).
class DbHarness : public Harness {
 protected:
  void SetUp() override {
    Harness::SetUp();
    const char* src = std::getenv("DLTUNE_SOURCE_DIR");
    const std::string xml =
        std::string(src ? src : ".") + "/topology/tests/data/mpibind_coral-lassen.xml";
    setenv("DLTUNE_TOPO_XML", xml.c_str(), 1);
    unsetenv("DLTUNE_PLAN");
  }
  // Stores kPlan for Lassen and `shape`; with_nccl=false is how `dltune tune` keys CPU runs.
  void store(dltune::tuner::db::JobShape shape, bool with_nccl) {
    namespace tdb = dltune::tuner::db;
    auto topo = dltune::topology::discover_default();
    ASSERT_TRUE(topo.ok()) << topo.error().message();
    auto db = tdb::TuningDb::open(db_, tdb::OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.error().message();
    const tdb::PlanRecord rec{dltune::tuner::db::make_key(*topo, shape, "", with_nccl), kDbPlan,
                              tdb::local_provenance()};
    auto s = db->put_plan(rec);
    ASSERT_TRUE(s.ok()) << s.error().message();
  }
  // init (v5) for n_ranks on n_nodes, one 64 MiB allreduce; returns what NCCL would pick
  // (the plan says ring/simple there; the untouched table says tree/LL).
  std::pair<int, int> run(size_t n_ranks, size_t n_nodes) {
    const auto* v5 = sym<nccl_tuner_v5_t>("ncclTunerPlugin_v5");
    void* ctx = nullptr;
    EXPECT_EQ(v5->init(&ctx, 7, n_ranks, n_nodes, logger, nullptr, nullptr), kNcclSuccess);
    Table t;
    int ch = 0;
    EXPECT_EQ(v5->getCollInfo(ctx, kNcclFuncAllReduce, 64 << 20, 1, t.rows, kNcclNumAlgorithms,
                              kNcclNumProtocols, 0, &ch),
              kNcclSuccess);
    EXPECT_EQ(v5->finalize(ctx), kNcclSuccess);
    for (const auto& l : g_log) std::printf("  nccl log: %s\n", l.c_str());
    return t.pick();
  }
};

const std::pair<int, int> kPlanned{kNcclAlgoRing, kNcclProtoLL};

TEST_F(DbHarness, ExactHitInTheUserDatabaseIsApplied) {
  store({1, 4}, /*with_nccl=*/true);
  const auto untouched = Table().pick();
  EXPECT_EQ(run(4, 1), kPlanned);
  EXPECT_NE(untouched, kPlanned);
  EXPECT_TRUE(logged("database plan (exact hit for fingerprint"));
  EXPECT_TRUE(logged("loaded with 2 rule(s)"));
  EXPECT_TRUE(logged("applied the plan to 1 collective call(s)"));
}

TEST_F(DbHarness, PlanStoredByDltuneTuneIsANearHitAndApplied) {
  // `dltune tune` keys plans without the NCCL version; the plugin asks with it, so in a build
  // with NCCL that is a near hit. Without NCCL both keys have no NCCL version: an exact hit.
  store({1, 4}, /*with_nccl=*/false);
  EXPECT_EQ(run(4, 1), kPlanned);
  EXPECT_TRUE(logged(DLTUNE_HAVE_NCCL ? "database plan (near hit" : "database plan (exact hit"));
}

TEST_F(DbHarness, SiteDatabaseLayerIsSearched) {
  store({1, 4}, true);
  const std::string site = db_ + ".site";
  ASSERT_EQ(std::rename(db_.c_str(), site.c_str()), 0);
  setenv("DLTUNE_SITE_DB", site.c_str(), 1);
  EXPECT_EQ(run(4, 1), kPlanned);
  EXPECT_TRUE(logged("in " + site));
  unsetenv("DLTUNE_SITE_DB");
  std::remove(site.c_str());
}

// Each miss or failure leaves NCCL's choice and logs one line.
TEST_F(DbHarness, MissesFallBackToNccl) {
  const auto nccl = Table().pick();
  EXPECT_EQ(run(4, 1), nccl);  // no database file at all
  EXPECT_TRUE(logged("have no plan for fingerprint"));
  EXPECT_EQ(g_log.size(), 2u);  // the miss, and finalize's count

  store({1, 4}, true);
  g_log.clear();
  EXPECT_EQ(run(16, 2), nccl);  // only a plan for another shape (a near hit): not applied
  EXPECT_TRUE(logged("tuned for 1 node(s) x 4 rank(s)"));
  g_log.clear();
  EXPECT_EQ(run(5, 2), nccl);
  EXPECT_TRUE(logged("not a nodes x ranks-per-node shape"));

  std::ofstream(db_, std::ios::trunc) << "this is not a database";
  g_log.clear();
  EXPECT_EQ(run(4, 1), nccl);
  EXPECT_TRUE(logged("database look-up failed"));

  setenv("DLTUNE_TOPO_XML", "/nonexistent/topo.xml", 1);
  g_log.clear();
  EXPECT_EQ(run(4, 1), nccl);
  EXPECT_TRUE(logged("database look-up failed"));
}

// An hwloc export libhwloc 2.9 crashes on (the reported reproducer) never reaches hwloc in the
// training job: the topology helper refuses it, NCCL keeps its choice, one line says why. (Were
// hwloc to run in this process, this test would die of SIGSEGV.)
TEST_F(DbHarness, AHostileTopologyExportCannotCrashTheJob) {
  store({1, 4}, true);
  const char* src = std::getenv("DLTUNE_SOURCE_DIR");
  const std::string crash = std::string(src ? src : ".") +
                            "/topology/tests/data/hostile/machine-without-complete-cpuset.xml";
  setenv("DLTUNE_TOPO_XML", crash.c_str(), 1);
  g_log.clear();
  EXPECT_EQ(run(4, 1), Table().pick());
  EXPECT_TRUE(logged("database look-up failed: reading this node's topology: '" + crash +
                     "' is not a valid hwloc XML export: line 3: the Machine object has no "
                     "complete_cpuset attribute"));
  EXPECT_EQ(g_log.size(), 2u);  // that line, and finalize's count
}

}  // namespace
