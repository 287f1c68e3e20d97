#include "plugins/slurm/policy.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/slurm/tune.h"

namespace dltune::plugins::slurm {
namespace {

TEST(SpankPolicy, UserOption) {
  auto none = parse_user_option(nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->enabled);
  EXPECT_EQ(none->profile, Profile::kDefault);
  EXPECT_FALSE(parse_user_option("off")->enabled);
  EXPECT_EQ(parse_user_option("default")->profile, Profile::kDefault);
  EXPECT_EQ(parse_user_option("bind-only")->profile, Profile::kBindOnly);
  EXPECT_EQ(parse_user_option("collectives-only")->profile, Profile::kCollectivesOnly);
  EXPECT_EQ(parse_user_option("tuned")->profile, Profile::kTuned);
  EXPECT_STREQ(profile_name(Profile::kCollectivesOnly), "collectives-only");
  EXPECT_FALSE(parse_user_option("fast-v2.1").ok());  // unknown profiles are refused
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
  const SiteConfig site = parse_plugstack_args(2, argv);
  EXPECT_TRUE(site.ignored.empty());
  EXPECT_EQ(ignored_arguments_line(site), "");
  EXPECT_EQ(site.site_db, "/etc/dltune/site.db");
  EXPECT_TRUE(site.default_on);
  EXPECT_TRUE(applies(std::nullopt, site));
  EXPECT_FALSE(applies(UserRequest{false, {}}, site));  // --dltune=off wins
  EXPECT_FALSE(applies(std::nullopt, SiteConfig{}));
  EXPECT_TRUE(applies(UserRequest{true, Profile::kDefault}, SiteConfig{}));
  char b0[] = "site_db=relative.db";
  char b1[] = "colour=blue";
  char* bad1[] = {b0};
  char* bad2[] = {b1};
  EXPECT_EQ(parse_plugstack_args(1, bad1).ignored,
            std::vector<std::string>{"'site_db=relative.db'"});
  EXPECT_EQ(parse_plugstack_args(1, bad2).site_db, "");
  EXPECT_EQ(parse_plugstack_args(1, bad2).ignored.size(), 1u);

  char c0[] = "dltune=/opt/dltune/bin/dltune";
  char c1[] = "tune_timeout=60";
  char c2[] = "tune_max_bytes=65536";
  char* tune_args[] = {c0, c1, c2};
  const SiteConfig t = parse_plugstack_args(3, tune_args);
  EXPECT_TRUE(t.ignored.empty());
  EXPECT_EQ(t.dltune_bin, "/opt/dltune/bin/dltune");
  EXPECT_EQ(t.tune_timeout_s, 60);
  EXPECT_EQ(t.tune_max_bytes, 65536u);
  EXPECT_EQ(SiteConfig{}.tune_timeout_s, 300);
  for (const char* bad : {"dltune=dltune", "dltune=/opt/../tmp/dltune", "tune_timeout=0",
                          "tune_timeout=99999", "tune_timeout=5s", "tune_max_bytes=-1"}) {
    std::string copy = bad;
    char* argv1[] = {copy.data()};
    EXPECT_EQ(parse_plugstack_args(1, argv1).ignored.size(), 1u) << bad;
  }
}

// One bad argument used to drop every setting on the line, site_db included, while the log said
// "dltune stays off" and --dltune still applied: now only the bad one is ignored, and said so.
TEST(SpankPolicy, OneBadPlugstackArgumentKeepsTheOthers) {
  char a0[] = "site_db=/etc/dltune/site.db";
  char a1[] = "tune_timeout=5s";
  char a2[] = "default=on";
  char a3[] = "colour=\x1b[31mred";
  char* argv[] = {a0, a1, a2, a3};
  const SiteConfig site = parse_plugstack_args(4, argv);
  EXPECT_EQ(site.site_db, "/etc/dltune/site.db");
  EXPECT_TRUE(site.default_on);
  EXPECT_EQ(site.tune_timeout_s, 300);
  ASSERT_EQ(site.ignored.size(), 2u);
  EXPECT_EQ(ignored_arguments_line(site),
            "plugstack arguments 'tune_timeout=5s', 'colour=?[31mred' ignored (expected "
            "site_db=/absolute/path, default=on|off, dltune=/absolute/path, tune_timeout=SECONDS "
            "or tune_max_bytes=N); the other settings on the line apply");
  EXPECT_EQ(ignored_arguments_line(site).find("stays off"), std::string::npos);
}

TEST(SpankPolicy, ProfilesAndTheTuneOption) {
  SiteConfig off, on;
  on.default_on = true;
  EXPECT_FALSE(resolve(std::nullopt, false, off).enabled);
  const JobRequest tune_only = resolve(std::nullopt, true, off);  // --dltune-tune alone
  EXPECT_TRUE(tune_only.enabled);
  EXPECT_TRUE(tune_only.tune);
  EXPECT_EQ(tune_only.profile, Profile::kDefault);
  EXPECT_FALSE(resolve(UserRequest{false, {}}, true, on).enabled);  // off wins over both
  EXPECT_TRUE(resolve(UserRequest{true, Profile::kTuned}, false, off).tune);
  EXPECT_FALSE(resolve(UserRequest{true, Profile::kBindOnly}, false, off).tune);
  EXPECT_TRUE(resolve(std::nullopt, false, on).enabled);
  EXPECT_FALSE(resolve(std::nullopt, false, on).tune);
  EXPECT_TRUE(effects(Profile::kBindOnly).placement);
  EXPECT_FALSE(effects(Profile::kBindOnly).collectives);
  EXPECT_FALSE(effects(Profile::kCollectivesOnly).placement);
  EXPECT_TRUE(effects(Profile::kCollectivesOnly).collectives);
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

TEST(SpankPolicy, ProfilesSelectWhatATaskGets) {
  const auto topo = lassen();
  auto env_of = [&](Profile p) {
    auto s = settings_for_task(topo, {1, 4, 1}, "/s/plan.json", "/s/rules.conf", p);
    EXPECT_TRUE(s.ok());
    return std::make_pair(std::map<std::string, std::string>(s->env.begin(), s->env.end()),
                          s->cpus);
  };
  const auto [bind_env, bind_cpus] = env_of(Profile::kBindOnly);
  EXPECT_EQ(bind_env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_TRUE(bind_env.count("NCCL_IB_HCA"));
  EXPECT_FALSE(bind_env.count("DLTUNE_PLAN"));
  EXPECT_FALSE(bind_env.count("OMPI_MCA_coll_tuned_dynamic_rules_filename"));
  EXPECT_FALSE(bind_cpus.empty());
  const auto [coll_env, coll_cpus] = env_of(Profile::kCollectivesOnly);
  EXPECT_EQ(coll_env.at("DLTUNE_PLAN"), "/s/plan.json");
  EXPECT_EQ(coll_env.at("OMPI_MCA_coll_tuned_dynamic_rules_filename"), "/s/rules.conf");
  EXPECT_EQ(coll_env.at("DLTUNE_LOCAL_RANK"), "1");
  EXPECT_FALSE(coll_env.count("CUDA_VISIBLE_DEVICES"));
  EXPECT_FALSE(coll_env.count("NCCL_IB_HCA"));
  EXPECT_FALSE(coll_env.count("DLTUNE_CPUS"));
  EXPECT_TRUE(coll_cpus.empty());
  const auto [tuned_env, tuned_cpus] = env_of(Profile::kTuned);
  EXPECT_EQ(tuned_env, env_of(Profile::kDefault).first);
  EXPECT_EQ(tuned_cpus, bind_cpus);
}

TEST(SpankTune, CommandAndEnvironmentAreFixed) {
  TuneRequest r;
  r.dltune_bin = "/opt/dltune/bin/dltune";
  r.local_tasks = 4;
  r.max_bytes = 64;
  r.user_db = "/home/u/.local/share/dltune/dltune.db";
  r.site_dbs = "/etc/dltune/site.db";
  r.topo_xml = "relative.xml";  // dropped
  r.home = "/home/u";
  const TuneCommand c = tune_command(r);
  EXPECT_EQ(c.argv, (std::vector<std::string>{"/opt/dltune/bin/dltune", "tune", "--collectives",
                                              "-n", "4", "--max-bytes", "64", "--db",
                                              "/home/u/.local/share/dltune/dltune.db"}));
  EXPECT_EQ(c.env,
            (std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C",
                                      "DLTUNE_SITE_DB=/etc/dltune/site.db", "HOME=/home/u"}));
}

TEST(SpankTune, OnlyRootOwnedProgramsAreTrusted) {
  EXPECT_FALSE(trusted_binary("dltune").ok());
  EXPECT_FALSE(trusted_binary("/nonexistent/dltune").ok());
  EXPECT_TRUE(trusted_binary("/bin/true").ok());
  const std::string dir = ::testing::TempDir() + "dltune-trust";
  ::mkdir(dir.c_str(), 0755);
  const std::string prog = dir + "/dltune";
  std::ofstream(prog) << "#!/bin/sh\n";
  ::chmod(prog.c_str(), 0777);  // writable by everyone
  EXPECT_FALSE(trusted_binary(prog).ok());
  ::chmod(prog.c_str(), 0755);
  if (::geteuid() == 0) {
    EXPECT_TRUE(trusted_binary(prog).ok());
    ::chmod(dir.c_str(), 0777);  // in a directory anyone can write to
    EXPECT_FALSE(trusted_binary(prog).ok());
    ::chmod(dir.c_str(), 0755);
    ASSERT_EQ(::chown(prog.c_str(), 65534, 65534), 0);  // owned by nobody
    EXPECT_FALSE(trusted_binary(prog).ok());
  }
  ::unlink(prog.c_str());
  ::rmdir(dir.c_str());
}

TEST(SpankTune, RunsAsTheGivenUserWithATimeout) {
  const uid_t uid = ::geteuid() == 0 ? 65534 : ::geteuid();
  const gid_t gid = ::geteuid() == 0 ? 65534 : ::getegid();
  // A descriptor the child must not inherit.
  const int leak = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(leak, 3);
  // The child checks its own ids and environment; exit 0 only when they are as promised.
  const std::string check =
      "[ \"$(id -u)\" = " + std::to_string(uid) + " ] && [ \"$(id -g)\" = " + std::to_string(gid) +
      " ] && [ \"$PATH\" = /usr/local/bin:/usr/bin:/bin ]" +
      " && [ -z \"${DLTUNE_LEAK_CHECK:-}\" ] && [ ! -e /proc/$$/fd/" + std::to_string(leak) + " ]";
  ::setenv("DLTUNE_LEAK_CHECK", "1", 1);  // nothing of the parent's environment leaks
  auto rc =
      run_as_user({{"/bin/sh", "-c", check}, {"PATH=/usr/local/bin:/usr/bin:/bin"}}, uid, gid, 10);
  ::unsetenv("DLTUNE_LEAK_CHECK");
  ::close(leak);
  ASSERT_TRUE(rc.ok()) << rc.error().message();
  EXPECT_EQ(*rc, 0);
  auto failing = run_as_user({{"/bin/sh", "-c", "exit 3"}, {}}, uid, gid, 10);
  ASSERT_TRUE(failing.ok());
  EXPECT_EQ(*failing, 3);
  auto slow = run_as_user({{"/bin/sleep", "30"}, {}}, uid, gid, 1);
  EXPECT_FALSE(slow.ok());
  EXPECT_FALSE(run_as_user({{"sleep", "1"}, {}}, uid, gid, 1).ok());  // not absolute
}

TEST(SpankPolicy, AllowList) {
  EXPECT_TRUE(is_allowed_variable("CUDA_VISIBLE_DEVICES"));
  for (const char* name : {"LD_PRELOAD", "PATH", "LD_LIBRARY_PATH", "SLURM_JOB_ID", ""}) {
    EXPECT_FALSE(is_allowed_variable(name)) << name;
  }
}

}  // namespace
}  // namespace dltune::plugins::slurm
