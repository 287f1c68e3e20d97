// Slurm nodes that are one machine (network namespaces of one host): how many of the job's
// nodes share a machine's cores, what the prediction, the pre-launch warning and the summary
// say about it (launch_prediction.h, launch_dry_run.h, launch_outcome.h).
#include "launcher/flow/launch_prediction.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "launcher/cli/launch_dry_run.h"
#include "launcher/report/launch_outcome.h"

namespace dltune::launcher {
namespace {

NodeMachines found(int machines) {
  NodeMachines m;
  m.asked = true;
  m.machines = machines;
  return m;
}

TEST(NodeMachines, NodesPerMachineRoundsUp) {
  EXPECT_EQ(nodes_per_machine(NodeMachines{}, 4), 1);  // not asked: every node a machine
  NodeMachines unknown = found(0);
  unknown.unknown_why = "srun did not finish within 10 s";
  EXPECT_EQ(nodes_per_machine(unknown, 4), 1);
  EXPECT_EQ(nodes_per_machine(found(1), 2), 2);
  EXPECT_EQ(nodes_per_machine(found(2), 4), 2);
  EXPECT_EQ(nodes_per_machine(found(2), 3), 2);  // the busier machine
  EXPECT_EQ(nodes_per_machine(found(4), 4), 1);
  // The local backend and one node ask nothing.
  EXPECT_FALSE(ask_node_machines(false, 4).asked);
  EXPECT_FALSE(ask_node_machines(true, 1).asked);
  EXPECT_FALSE(ask_node_machines(false, 1, {"n1", "n2"}).asked);  // one node of two hosts
  // Hosts that cannot be reached: asked, and unknown with why (ssh fails at once: no such
  // host), never an error.
  setenv("DLTUNE_SSH", "/bin/false", 1);
  const NodeMachines unreached = ask_node_machines(false, 2, {"no-such-host-a", "no-such-host-b"});
  unsetenv("DLTUNE_SSH");
  EXPECT_TRUE(unreached.asked);
  EXPECT_EQ(unreached.machines, 0);
  EXPECT_FALSE(unreached.unknown_why.empty());
}

TEST(NodeMachines, ThePredictionSaysWhatItFound) {
  EXPECT_EQ(node_machines_note(NodeMachines{}, 1, 2, 2), "");
  EXPECT_EQ(node_machines_note(found(1), 2, 2, 2),
            "the job's 2 nodes are 1 machine (same boot_id): 4 ranks share its 2 cores");
  EXPECT_EQ(node_machines_note(found(2), 4, 1, 8),
            "the job's 4 nodes are 2 machines (by boot_id): 2 ranks share each one's 8 cores");
  EXPECT_EQ(node_machines_note(found(2), 3, 2, 4),
            "the job's 3 nodes are 2 machines (by boot_id): up to 4 ranks share each one's 4 "
            "cores");
  EXPECT_EQ(node_machines_note(found(2), 2, 2, 2),
            "the job's 2 nodes are 2 machines (distinct boot_ids)");
  NodeMachines unknown = found(0);
  unknown.unknown_why = "srun did not finish within 10 s";
  EXPECT_EQ(node_machines_note(unknown, 2, 2, 2),
            "could not tell whether the job's 2 nodes are separate machines (srun did not finish "
            "within 10 s): predicted as if they were");
}

TEST(NodeMachines, TheWarningCountsTheRanksOfAMachine) {
  Job job;
  job.ranks = 4;
  job.shape = {2, 2};
  EXPECT_EQ(oversubscription_warning(job, 2), "");
  const std::string w = oversubscription_warning(job, 2, 2);
  EXPECT_EQ(w.rfind("warning: 4 ranks per machine (2 nodes each) on 2 cores: ", 0), 0u) << w;
  EXPECT_NE(w.find("use -n 2 or fewer"), std::string::npos) << w;  // 1 rank a node
  job.shape = {1, 4};
  EXPECT_EQ(oversubscription_warning(job, 2, 2).rfind("warning: 4 ranks per node on 2 cores", 0),
            0u);
}

TEST(NodeMachines, TheSummaryCountsTheRanksOfAMachine) {
  RunFacts f;
  f.recipe = "r";
  f.ranks = 4;
  f.nodes = 2;
  f.cores_per_node = 2;
  f.worker = {{"steps", 10}, {"throughput_sps", 100.0}};
  f.prediction.ok = true;
  f.prediction.job.step_s = 0.02;
  f.prediction.machines_note = "the job's 2 nodes are 1 machine (same boot_id)";
  const RunDir dir{"/tmp/run"};
  auto s = make_summary(f, MetricsLog{}, dir);
  EXPECT_FALSE(s["ranks_shared_cores"].get<bool>());
  EXPECT_EQ(s["prediction"]["machines_note"], f.prediction.machines_note);
  EXPECT_NE(format_summary(s).find("    machines         the job's 2 nodes are 1 machine"),
            std::string::npos)
      << format_summary(s);
  f.nodes_per_machine = 2;
  s = make_summary(f, MetricsLog{}, dir);
  EXPECT_TRUE(s["ranks_shared_cores"].get<bool>());
  bool warned = false;
  for (const auto& w : s["warnings"]) {
    const std::string text = w.get<std::string>();
    if (text.rfind("4 ranks per machine (2 nodes each) shared 2 cores", 0) == 0) {
      warned = true;
      EXPECT_NE(text.find("use -n 2 or fewer"), std::string::npos) << text;
    }
  }
  EXPECT_TRUE(warned) << s["warnings"].dump(1);
}

}  // namespace
}  // namespace dltune::launcher
