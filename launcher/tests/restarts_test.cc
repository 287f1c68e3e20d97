// A job's restarts (launch.restarts, launcher/flow/restarts.h): when a failed attempt is
// restarted, where it continues from, and how the summary reports it; and the outcome file
// `dltune run --outcome-file` writes for the launch to decide with.
#include "launcher/flow/restarts.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/io/checkpoint.h"
#include "launcher/backend/temp_dir.h"

namespace dltune::launcher {
namespace {

using json = nlohmann::json;

TEST(Restarts, RestartsRankFailuresWhileAnyAreLeftButNeverAnInterrupt) {
  const LaunchOutcome killed{137, "rank 1 on n0 was killed by signal 9 (SIGKILL)", false, "n0"};
  EXPECT_EQ(restart_refusal(killed, 0, 2), "");
  EXPECT_EQ(restart_refusal(killed, 1, 2), "");
  EXPECT_EQ(restart_refusal(killed, 2, 2), "the 2 restarts of launch.restarts are used up");
  EXPECT_EQ(restart_refusal(killed, 1, 1), "the 1 restart of launch.restarts is used up");
  EXPECT_EQ(restart_refusal(killed, 0, 0), "launch.restarts is 0");
  // A rank killed by SIGTERM exits 143 as an interrupted launch does: only the flag tells.
  const LaunchOutcome term{143, "rank 0 on n0 was killed by signal 15 (SIGTERM)", false, ""};
  EXPECT_EQ(restart_refusal(term, 0, 2), "");
  const LaunchOutcome interrupted{143, "interrupted", true, ""};
  EXPECT_EQ(restart_refusal(interrupted, 0, 2), "interrupted");
}

TEST(Restarts, OutcomeFileRoundTripsAndRefusesWhatItDidNotWrite) {
  const LaunchOutcome o{137, "rank 1 on \"n0\" was killed by signal 9 (SIGKILL)", false, "n0"};
  auto back = outcome_from_json(outcome_to_json(o));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->exit_code, 137);
  EXPECT_EQ(back->message, o.message);
  EXPECT_FALSE(back->interrupted);
  EXPECT_EQ(back->host, "n0");
  // Without a host (a local launch) the key is left out, and an outcome without it reads back.
  auto local = outcome_from_json(outcome_to_json({1, "x", false, ""}));
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->host, "");
  EXPECT_EQ(outcome_to_json({1, "x", false, ""}).find("host"), std::string::npos);
  for (const char* bad : {"", "{", "[]", "{\"hello\":1}",
                          "{\"exit_code\":\"1\",\"message\":\"\",\"interrupted\":false}",
                          "{\"exit_code\":-1,\"message\":\"\",\"interrupted\":false}",
                          "{\"exit_code\":256,\"message\":\"\",\"interrupted\":false}",
                          "{\"exit_code\":1,\"message\":2,\"interrupted\":false}",
                          "{\"exit_code\":1,\"message\":\"\",\"interrupted\":1}",
                          "{\"exit_code\":1,\"message\":\"\",\"interrupted\":false,\"host\":3}"}) {
    auto r = outcome_from_json(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(Restarts, ContinuesFromTheCheckpointsStepOrFromTheStart) {
  auto dir = TempDir::create_in_tmp("dltune-restarts-test-");
  ASSERT_TRUE(dir.ok());
  const std::string path = dir->path() + "/checkpoint.bin";
  EXPECT_EQ(checkpoint_step(path), 0);  // none yet: from the start
  engine::Checkpoint ck;
  ck.model = "lenet";
  ck.step = 30;
  ck.params = {1.0f, 2.0f};
  ck.slots = {{0.5f, 0.25f}};
  ASSERT_TRUE(engine::save_checkpoint(path, ck).ok());
  EXPECT_EQ(checkpoint_step(path), 30);
  std::ofstream(path, std::ios::trunc) << "not a checkpoint";
  EXPECT_EQ(checkpoint_step(path), 0);  // unreadable: the ranks would refuse it too
}

// A hung rank says nothing itself: the peer that gave up waiting for it left its timeout in
// failures/, and the restart's why carries the lowest such rank's words after the launcher's.
TEST(Restarts, ATimedOutRanksWordsNameTheHungOne) {
  auto dir = TempDir::create_in_tmp("dltune-restarts-test-");
  ASSERT_TRUE(dir.ok());
  const std::string outcome = "rank 0 on vm exited with code 1";
  EXPECT_EQ(failure_why(outcome, dir->path()), outcome);  // no notes: the outcome as it is
  std::filesystem::create_directories(dir->path() + "/failures");
  std::ofstream(dir->path() + "/failures/rank-2.txt") << "rank 3 did not answer in time\n";
  std::ofstream(dir->path() + "/failures/rank-0.txt")
      << "allreducing gradients at step 39: rank 1 did not answer in time\n";
  std::ofstream(dir->path() + "/failures/notes.txt") << "not a rank's";
  EXPECT_EQ(failure_why(outcome, dir->path()),
            outcome +
                "; rank 0 had timed out: allreducing gradients at step 39: rank 1 did not "
                "answer in time");
  // Control characters in a note never reach the terminal.
  std::ofstream(dir->path() + "/failures/rank-0.txt", std::ios::trunc) << "a\x1b[31mb";
  EXPECT_EQ(failure_why(outcome, dir->path()).find('\x1b'), std::string::npos);
  clear_failure_notes(dir->path());
  EXPECT_FALSE(std::filesystem::exists(dir->path() + "/failures"));
  EXPECT_EQ(failure_why(outcome, dir->path()), outcome);
}

// A rank killed while writing a checkpoint leaves its temporary file; the next attempt starts
// without it, the checkpoint itself untouched.
TEST(Restarts, PartialCheckpointWritesAreRemovedTheCheckpointKept) {
  auto dir = TempDir::create_in_tmp("dltune-restarts-test-");
  ASSERT_TRUE(dir.ok());
  remove_partial_checkpoints(dir->path());  // no checkpoints/ yet: nothing to do
  const std::string ck = dir->path() + "/checkpoints";
  std::filesystem::create_directories(ck);
  std::ofstream(ck + "/checkpoint.bin") << "whole";
  std::ofstream(ck + "/checkpoint.bin.tmp.4242") << "half";
  std::ofstream(ck + "/other.tmp.1") << "not ours";
  remove_partial_checkpoints(dir->path());
  EXPECT_TRUE(std::filesystem::exists(ck + "/checkpoint.bin"));
  EXPECT_FALSE(std::filesystem::exists(ck + "/checkpoint.bin.tmp.4242"));
  EXPECT_TRUE(std::filesystem::exists(ck + "/other.tmp.1"));
}

TEST(Restarts, TheSummarySaysWhenWhichRankWhyAndWhereItContinued) {
  Restart a;
  a.at_s = 12.34;
  a.exit_code = 137;
  a.why = "rank 1 on n0 was killed by signal 9 (SIGKILL)";
  a.from_step = 30;
  a.lost_s = 2.06;
  Restart b;  // no sentence, no checkpoint, and no step trained after it
  b.at_s = 20;
  b.exit_code = 3;
  const json j = restarts_json({a, b});
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["exit_code"], 137);
  EXPECT_EQ(j[0]["from_step"], 30);
  EXPECT_TRUE(j[1]["lost_s"].is_null());
  EXPECT_EQ(restart_text(j[0]),
            "at 12.3 s: rank 1 on n0 was killed by signal 9 (SIGKILL); continued from the "
            "checkpoint at step 30, training again 2.1 s after the failure");
  EXPECT_EQ(restart_text(j[1]),
            "at 20.0 s: the ranks failed with exit code 3; continued from the start (no "
            "checkpoint yet)");
  // A restart on fewer ranks (launch.min_ranks) says so.
  Restart c = a;
  c.ranks = 1;
  c.fewer = true;
  const json k = restarts_json({c});
  EXPECT_EQ(k[0]["ranks"], 1);
  EXPECT_EQ(restart_text(k[0]),
            "at 12.3 s: rank 1 on n0 was killed by signal 9 (SIGKILL); continued from the "
            "checkpoint at step 30, on 1 rank, planned again, training again 2.1 s after the "
            "failure");
  // A node lost under Slurm (launch.min_nodes) is named with the nodes the job went on with.
  Restart d = a;
  d.ranks = 4;
  d.fewer = true;
  d.lost_node = "n3";
  d.nodes = 2;
  const json m = restarts_json({d, c});
  EXPECT_EQ(m[0]["lost_node"], "n3");
  EXPECT_EQ(m[0]["nodes"], 2);
  EXPECT_FALSE(m[1].contains("lost_node"));
  EXPECT_EQ(restart_text(m[0]),
            "at 12.3 s: rank 1 on n0 was killed by signal 9 (SIGKILL); continued from the "
            "checkpoint at step 30, without node n3 (it no longer answered), on 4 ranks on 2 "
            "nodes, planned again, training again 2.1 s after the failure");
  // A spare node in the lost one's place (launch.spare_nodes): the same shape, nothing replanned.
  Restart e = a;
  e.ranks = 4;
  e.lost_node = "n2";
  e.spare_node = "n4";
  e.nodes = 2;
  const json p = restarts_json({e, d});
  EXPECT_EQ(p[0]["spare_node"], "n4");
  EXPECT_FALSE(p[0]["fewer"].get<bool>());
  EXPECT_FALSE(p[1].contains("spare_node"));
  EXPECT_EQ(restart_text(p[0]),
            "at 12.3 s: rank 1 on n0 was killed by signal 9 (SIGKILL); continued from the "
            "checkpoint at step 30, without node n2 (it no longer answered), on spare node n4 in "
            "its place, training again 2.1 s after the failure");
  // A node the allocation grew by (--nodes MIN-MAX) in the lost one's place.
  Restart g = e;
  g.spare_node = "n5";
  g.grown = true;
  const json q = restarts_json({g, e});
  EXPECT_TRUE(q[0]["grown"].get<bool>());
  EXPECT_FALSE(q[1].contains("grown"));
  EXPECT_EQ(restart_text(q[0]),
            "at 12.3 s: rank 1 on n0 was killed by signal 9 (SIGKILL); continued from the "
            "checkpoint at step 30, without node n2 (it no longer answered), on node n5 (the "
            "allocation grew by it) in its place, training again 2.1 s after the failure");
  // A hand-edited summary.json never throws: wrong types read as absent.
  EXPECT_EQ(restart_text(json::array()), "");
  EXPECT_EQ(restart_text({{"why", 5}, {"at_s", "x"}, {"exit_code", 1}}),
            "at 0.0 s: the ranks failed with exit code 1; continued from the start (no "
            "checkpoint yet)");
}

}  // namespace
}  // namespace dltune::launcher
