// The NCCL tuner plugin reads the very file a launch hands its ranks (DLTUNE_PLAN: the run
// directory's plan.json) and finds the plan's NCCL choices in it. Before the ranks received
// the Plan they got an engine configuration, in which the plugin found no collectives and left
// NCCL on its defaults.
//
// The launch is a real one of a GPU recipe (comm.backend nccl, its allreduce fixed to NCCL's
// ring): the machine is described by a DGX-2 topology export
// (DLTUNE_TOPO_XML), so no GPU is needed to plan it. Where this machine has no GPU the ranks
// then fail at start, saying so; the run directory, written before they start, holds the plan
// either way.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "common/paths.h"
#include "plugins/nccl_tuner/decision.h"
#include "plugins/nccl_tuner/nccl_tuner_abi.h"

namespace dltune::plugins {
namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

TEST(NcclPlanFromLaunch, ThePluginReadsTheLaunchsPlanFile) {
  const std::string bin = env_or("DLTUNE_BINARY_DIR", ".") + std::string("/bin/dltune");
  const std::string src = env_or("DLTUNE_SOURCE_DIR", ".");
  const std::string topo = src + "/../shared/fixtures/topologies/hwloc_nvidiaDGX2.xml";
  if (!paths::exists(topo)) GTEST_SKIP() << "no " << topo << " beside the source tree";
  char tmpl[] = "/tmp/dltune-nccl-launch-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string recipe = dir + "/gpu.yaml";
  ASSERT_TRUE(paths::write_file_atomic(recipe,
                                       "name: gpu\n"
                                       "model: lenet\n"
                                       "data: {kind: synthetic-digits, samples: 512}\n"
                                       "training: {steps: 2, batch: {per_rank: 8}}\n"
                                       "comm: {backend: nccl, allreduce: nccl_ring}\n"
                                       "tune: {budget: 0}\n"
                                       "launch: {binding: none}\n")
                  .ok());
  const std::string cmd = "cd " + dir + " && DLTUNE_TOPO_XML=" + topo + " DLTUNE_DB=" + dir +
                          "/user.db DLTUNE_RUNS_DIR=" + dir + "/runs " + bin + " launch " + recipe +
                          " -n 2 > " + dir + "/out 2>&1";
  const int rc = std::system(cmd.c_str());
  auto out = paths::read_file(dir + "/out");
  // With a GPU the ranks train; without one they stop at start, naming the missing device.
  if (rc != 0) {
    ASSERT_TRUE(out.ok());
    EXPECT_TRUE(out->find("GPU") != std::string::npos || out->find("CUDA") != std::string::npos)
        << *out;
  }
  std::string run;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/runs")) run = e.path();
  ASSERT_FALSE(run.empty()) << (out.ok() ? *out : "");
  EXPECT_FALSE(paths::exists(run + "/train_config.json"));
  auto text = paths::read_file(run + "/plan.json");
  ASSERT_TRUE(text.ok()) << text.error().message();

  // As the plugin reads it in the ranks' communicator: 2 ranks on 1 node.
  auto d = Decision::from_plan_json(*text, 2, 1);
  ASSERT_TRUE(d.ok()) << d.error().message();
  ASSERT_EQ(d->rules().size(), 1u) << d->note();
  const NcclRule& r = d->rules()[0];
  EXPECT_EQ(r.coll, kNcclFuncAllReduce);
  EXPECT_EQ(r.algo, kNcclAlgoRing);
  EXPECT_EQ(r.proto, -1);  // no protocol fixed: the cheapest NCCL offers
  EXPECT_EQ(r.min_bytes, 0u);
  EXPECT_EQ(r.max_bytes, UINT64_MAX);
  // Another communicator shape: the plan is not applied there.
  auto other = Decision::from_plan_json(*text, 4, 1);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->rules().empty());
  (void)std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace dltune::plugins
