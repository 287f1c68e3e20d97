#include "plugins/slurm/policy.h"

#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

namespace dltune::plugins::slurm {
namespace {

TEST(SpankPolicy, UserOption) {
  auto none = parse_user_option(nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->enabled);
  EXPECT_EQ(none->profile, "default");
  EXPECT_FALSE(parse_user_option("off")->enabled);
  EXPECT_EQ(parse_user_option("fast-v2.1")->profile, "fast-v2.1");
  // Hostile values change nothing: each is rejected, so the job runs untouched.
  const std::string long_value(5000, 'a');
  for (const char* bad : {"a;rm -rf /", "$(id)", "`id`", "../../etc/passwd", "a/b", "a b", "..",
                          "x\ny", long_value.c_str()}) {
    auto r = parse_user_option(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(SpankPolicy, PlugstackArgumentsAndDefault) {
  char a0[] = "site_db=/etc/dltune/site.db";
  char a1[] = "default=on";
  char* argv[] = {a0, a1};
  auto site = parse_plugstack_args(2, argv);
  ASSERT_TRUE(site.ok());
  EXPECT_EQ(site->site_db, "/etc/dltune/site.db");
  EXPECT_TRUE(site->default_on);
  EXPECT_TRUE(applies(std::nullopt, *site));
  EXPECT_FALSE(applies(UserRequest{false, ""}, *site));  // --dltune=off wins
  EXPECT_FALSE(applies(std::nullopt, SiteConfig{}));
  EXPECT_TRUE(applies(UserRequest{true, "default"}, SiteConfig{}));
  char b0[] = "site_db=relative.db";
  char b1[] = "colour=blue";
  char* bad1[] = {b0};
  char* bad2[] = {b1};
  EXPECT_FALSE(parse_plugstack_args(1, bad1).ok());
  EXPECT_FALSE(parse_plugstack_args(1, bad2).ok());
}

// Lassen (topology/tests/data, from LLNL mpibind): 4 V100 GPUs, 2 dual-port ConnectX-5.
topology::Topology lassen() {
  const char* src = std::getenv("DLTUNE_SOURCE_DIR");
  auto t = topology::load_xml(std::string(src ? src : ".") +
                              "/topology/tests/data/mpibind_coral-lassen.xml");
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message());
  return t.ok() ? *t : topology::Topology{};
}

TEST(SpankPolicy, TaskSettingsFollowThePlacementAndTheAllowList) {
  const auto topo = lassen();
  ASSERT_EQ(topo.gpus.size(), 4u);
  std::map<std::string, std::string> seen_gpu;
  for (int task = 0; task < 4; ++task) {
    auto s = settings_for_task(topo, {1, 4, task}, "/tmp/step/plan.json", "/tmp/step/rules.conf");
    ASSERT_TRUE(s.ok());
    std::map<std::string, std::string> env(s->env.begin(), s->env.end());
    for (const auto& [name, value] : env) EXPECT_TRUE(is_allowed_variable(name)) << name;
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], std::to_string(task));
    EXPECT_EQ(env["DLTUNE_PLAN"], "/tmp/step/plan.json");
    EXPECT_EQ(env["OMPI_MCA_coll_tuned_use_dynamic_rules"], "1");
    EXPECT_EQ(env["OMPI_MCA_coll_tuned_dynamic_rules_filename"], "/tmp/step/rules.conf");
    EXPECT_EQ(env["DLTUNE_LOCAL_RANK"], std::to_string(task));
    EXPECT_FALSE(env["NCCL_IB_HCA"].empty());
    EXPECT_FALSE(s->cpus.empty());
  }
  EXPECT_FALSE(settings_for_task(topo, {1, 4, 4}, "", "").ok());
  auto no_plan = settings_for_task(topo, {1, 2, 0}, "", "");
  ASSERT_TRUE(no_plan.ok());
  for (const auto& [name, value] : no_plan->env) EXPECT_NE(name, "DLTUNE_PLAN");
}

TEST(SpankPolicy, AllowList) {
  EXPECT_TRUE(is_allowed_variable("CUDA_VISIBLE_DEVICES"));
  for (const char* name : {"LD_PRELOAD", "PATH", "LD_LIBRARY_PATH", "SLURM_JOB_ID", ""}) {
    EXPECT_FALSE(is_allowed_variable(name)) << name;
  }
}

}  // namespace
}  // namespace dltune::plugins::slurm
