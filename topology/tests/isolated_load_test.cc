// Loading a topology in dltune-topo-probe (isolated_load.h): the model comes back exactly; a
// bad export, a crashing, hanging, silent or chatty helper is an error in the parent, never a
// crash or a hang of it.
#include "topology/isolated_load.h"

#include <chrono>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topology/model_json.h"
#include "topology/tests/test_util.h"

namespace dltune::topology {
namespace {

using testing::data_path;
using testing::TempFile;

std::string probe() { return DLTUNE_TOPO_PROBE; }

// A shell script standing in for the helper.
class FakeHelper {
 public:
  explicit FakeHelper(const std::string& body) : file_("#!/bin/sh\n" + body + "\n", ".sh") {
    ::chmod(file_.path().c_str(), 0755);
  }
  const std::string& path() const { return file_.path(); }

 private:
  TempFile file_;
};

IsolatedLoad request(const std::string& helper, const std::string& xml) {
  IsolatedLoad r;
  r.helper = helper;
  r.xml_path = xml;
  r.env = {"PATH=/usr/bin:/bin", "HWLOC_HIDE_ERRORS=2"};
  return r;
}

TEST(ModelJson, RoundTripsEveryFixtureExactly) {
  for (const char* f : {"hwloc_nvidiaDGX2.xml", "mpibind_coral-lassen.xml", "mpibind_eas-tioga.xml",
                        "mpibind_g4dnmetal.xml"}) {
    const Topology t = testing::load_fixture(f);
    auto back = model_from_json(model_to_json(t));
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_TRUE(*back == t) << f;
    EXPECT_EQ(fingerprint(*back), fingerprint(t)) << f;
  }
  EXPECT_FALSE(model_from_json("{\"pus\": 1}").ok());
  EXPECT_FALSE(model_from_json(std::string(100000, '[')).ok());
}

TEST(IsolatedLoad, LoadsAnExportAsInProcess) {
  auto t = load_isolated(request(probe(), data_path("mpibind_coral-lassen.xml")));
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_TRUE(*t == testing::load_fixture("mpibind_coral-lassen.xml"));
}

// Some hosts ignore SIGCHLD (children are reaped for them): the model still comes back.
TEST(IsolatedLoad, WorksInAHostThatIgnoresSigchld) {
  struct sigaction ignore {
  }, before{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGCHLD, &ignore, &before), 0);
  auto t = load_isolated(request(probe(), data_path("mpibind_coral-lassen.xml")));
  ::sigaction(SIGCHLD, &before, nullptr);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->gpus.size(), 4u);
}

TEST(IsolatedLoad, DiscoversThisMachine) {
  IsolatedLoad r = request(probe(), "");
  r.env.push_back("DLTUNE_TOPO_CACHE=0");
  auto t = load_isolated(r);
  ASSERT_TRUE(t.ok()) << t.error().message();
  auto here = discover();
  ASSERT_TRUE(here.ok());
  EXPECT_EQ(fingerprint(*t), fingerprint(*here));
}

TEST(IsolatedLoad, TheCrashReproducerIsBadInputNotACrash) {
  const std::string path = data_path("hostile/machine-without-complete-cpuset.xml");
  auto t = load_isolated(request(probe(), path));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(t.error().message(),
            "'" + path +
                "' is not a valid hwloc XML export: line 3: the Machine object has no "
                "complete_cpuset attribute; export it again with `lstopo --of xml`");
}

// hwloc itself crashing in the child (lstopo 2.9 on the reproducer, the check bypassed) costs
// the parent nothing but an error.
TEST(IsolatedLoad, HwlocCrashingInTheChildIsAnError) {
  if (::access("/usr/bin/lstopo-no-graphics", X_OK) != 0) GTEST_SKIP() << "no lstopo-no-graphics";
  const std::string path = data_path("hostile/machine-without-complete-cpuset.xml");
  FakeHelper crash("exec /usr/bin/lstopo-no-graphics -i \"$2\" --of xml -");
  auto t = load_isolated(request(crash.path(), path));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(t.error().message().find("hwloc crashed (signal 11)"), std::string::npos)
      << t.error().message();
}

TEST(IsolatedLoad, MisbehavingHelpersAreErrors) {
  const std::string xml = data_path("mpibind_coral-lassen.xml");
  FakeHelper segv("kill -SEGV $$");
  auto r = load_isolated(request(segv.path(), ""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kInternal);  // no export: nothing of the user's to blame

  FakeHelper garbage("echo '{\"not\": \"a model\"}'");
  r = load_isolated(request(garbage.path(), xml));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kInternal);

  FakeHelper refuses("echo \"'x.xml' is truncated: it ends before </topology>\"; exit 2");
  r = load_isolated(request(refuses.path(), xml));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(r.error().message(), "'x.xml' is truncated: it ends before </topology>");

  FakeHelper flood("exec cat /dev/zero");
  r = load_isolated(request(flood.path(), xml));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("wrote too much"), std::string::npos);

  r = load_isolated(request("/nonexistent/dltune-topo-probe", xml));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("cannot run the topology helper"), std::string::npos);
  r = load_isolated(request("relative/dltune-topo-probe", xml));
  ASSERT_FALSE(r.ok());
}

TEST(IsolatedLoad, AHangingHelperIsKilledAtTheTimeout) {
  FakeHelper hang("sleep 30 & sleep 30");  // a grandchild keeping the pipe open too
  IsolatedLoad req = request(hang.path(), data_path("mpibind_coral-lassen.xml"));
  req.timeout_ms = 300;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = load_isolated(req);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kTimeout);
  EXPECT_LT(s, 5.0);
}

TEST(IsolatedLoad, TheChildGetsOnlyTheGivenEnvironment) {
  ::setenv("DLTUNE_SECRET_FOR_TEST", "x", 1);
  FakeHelper dump("env > \"$2\".env; exit 2");
  TempFile out("");
  auto r = load_isolated(request(dump.path(), out.path()));
  ASSERT_FALSE(r.ok());
  auto env = paths::read_file(out.path() + ".env");
  ::unlink((out.path() + ".env").c_str());
  ::unsetenv("DLTUNE_SECRET_FOR_TEST");
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->find("DLTUNE_SECRET_FOR_TEST"), std::string::npos) << *env;
  EXPECT_NE(env->find("HWLOC_HIDE_ERRORS=2"), std::string::npos) << *env;
}

}  // namespace
}  // namespace dltune::topology

namespace dltune::topology {
namespace {

// As slurmstepd calls it: real uid 0, effective uid already the job's. The helper must end up
// with every id, and no supplementary group, but the job's.
TEST(IsolatedLoad, RunsAsTheJobsUserWithNoRootLeft) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root";
  FakeHelper ids("echo \"$(id -u) $(id -ru) $(id -g) $(id -G)\"; exit 2");
  IsolatedLoad req = request(ids.path(), "");
  req.run_as = std::make_pair(uid_t{65534}, gid_t{65534});
  ASSERT_EQ(::setegid(65534), 0);
  ASSERT_EQ(::seteuid(65534), 0);
  auto r = load_isolated(req);
  ASSERT_EQ(::seteuid(0), 0);
  ASSERT_EQ(::setegid(0), 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "65534 65534 65534 65534");
}

}  // namespace
}  // namespace dltune::topology
