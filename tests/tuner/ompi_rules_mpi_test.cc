// The Open MPI rules file dltune writes is accepted by Open MPI 4.1 and changes the allreduce
// algorithm it runs. Real mpirun, 2 ranks; the algorithm is recognised by allreduce_probe's
// user-defined op (see allreduce_probe.c), and coll_base_verbose shows coll/tuned selected.
#include <string>

#include <gtest/gtest.h>
#include <stdio.h>

#include "common/paths.h"
#include "tuner/db/ompi_rules.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

struct RunResult {
  int rc = -1;
  std::string output;
};

RunResult mpirun(const std::string& rules_file, int count, int np = 2) {
  std::string cmd = std::string(DLTUNE_MPIEXEC) + " --allow-run-as-root --oversubscribe -np " +
                    std::to_string(np) +
                    " --mca pml ob1 --mca btl self,vader"
                    " --mca coll_base_verbose 100";
  if (!rules_file.empty()) {
    cmd += " --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename " +
           rules_file;
  }
  cmd += " " + std::string(DLTUNE_PROBE) + " " + std::to_string(count) + " 2>&1";
  RunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  r.rc = ::pclose(p);
  return r;
}

// "rank 0 calls 1 elems 512 ok" for both ranks, as a compact signature "r0=512 r1=512".
std::string signature(const std::string& out) {
  std::string sig;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string tag = "rank " + std::to_string(rank) + " calls ";
    const auto at = out.find(tag);
    if (at == std::string::npos) return "missing rank " + std::to_string(rank);
    const auto elems = out.find("elems ", at);
    const auto end = out.find(' ', elems + 6);
    sig += (rank ? " r1=" : "r0=") + out.substr(elems + 6, end - elems - 6);
    if (out.compare(end + 1, 2, "ok") != 0) return "wrong result";
  }
  return sig;
}

std::string write_rules(const testing::TempDir& dir, const std::string& name,
                        const std::string& plan_json) {
  auto coll = parse_plan_collectives(plan_json);
  if (!coll.ok()) {
    ADD_FAILURE() << coll.error().message();
    return "";
  }
  std::vector<std::string> notes;
  auto rules = rules_from_plan(*coll, 2, &notes);
  EXPECT_TRUE(rules.ok()) << rules.error().message();
  const std::string path = dir.file(name);
  EXPECT_TRUE(paths::write_file_atomic(path, format_ompi_rules(*rules)).ok());
  return path;
}

std::string one_algo_plan(const char* algo) {
  return std::string(R"({"version":1,"collectives":{"allreduce":[{"min_bytes":0,)") +
         R"("max_bytes":18446744073709551615,"algo":")" + algo + R"(","segment_bytes":0}]},)" +
         R"("training":{"per_rank_batch":8,"global_batch":16,"scaling":"weak"},)" +
         R"("job":{"nodes":1,"ranks_per_node":2}})";
}

TEST(OmpiRulesMpi, RulesFileIsAcceptedAndChangesTheAlgorithm) {
  testing::TempDir dir;
  // 1024 doubles = 8 KiB: Open MPI's fixed decision at 2 ranks is recursive doubling.
  const RunResult base = mpirun("", 1024);
  ASSERT_EQ(base.rc, 0) << base.output;
  EXPECT_EQ(signature(base.output), "r0=1024 r1=1024");

  const RunResult ring = mpirun(write_rules(dir, "ring.rules", one_algo_plan("ring")), 1024);
  ASSERT_EQ(ring.rc, 0) << ring.output;
  EXPECT_EQ(signature(ring.output), "r0=512 r1=512") << ring.output;
  EXPECT_NE(ring.output.find("selecting       tuned"), std::string::npos)
      << "coll/tuned was not selected:\n"
      << ring.output;

  const RunResult tree = mpirun(write_rules(dir, "tree.rules", one_algo_plan("tree")), 1024);
  ASSERT_EQ(tree.rc, 0) << tree.output;
  EXPECT_EQ(signature(tree.output), "r0=1024 r1=0") << tree.output;
}

// A plan with a size switch: ring below 4 KiB, recursive doubling from 4 KiB on.
TEST(OmpiRulesMpi, SizeRangesAreHonoured) {
  testing::TempDir dir;
  const std::string rules = write_rules(
      dir, "switch.rules",
      R"({"version":1,"collectives":{"allreduce":[)"
      R"({"min_bytes":0,"max_bytes":4096,"algo":"ring","segment_bytes":0},)"
      R"({"min_bytes":4096,"max_bytes":18446744073709551615,"algo":"rd","segment_bytes":0}]},)"
      R"("training":{"per_rank_batch":8,"global_batch":16,"scaling":"weak"},)"
      R"("job":{"nodes":1,"ranks_per_node":2}})");
  const RunResult small = mpirun(rules, 256);  // 2 KiB
  ASSERT_EQ(small.rc, 0) << small.output;
  EXPECT_EQ(signature(small.output), "r0=128 r1=128");
  const RunResult large = mpirun(rules, 2048);  // 16 KiB: Open MPI's default would be ring
  ASSERT_EQ(large.rc, 0) << large.output;
  EXPECT_EQ(signature(large.output), "r0=2048 r1=2048");
}

// One file for several job sizes (`dltune db rules` without --shape): Open MPI picks the rule
// set of the communicator's size. At 2 ranks the 2-rank plan's ring halves each reduction; at 4
// ranks the 4-rank plan's recursive doubling reduces all 1024 elements in each of its 2 steps
// (ring would reduce 3 x 256).
TEST(OmpiRulesMpi, OneFileServesEveryJobSize) {
  testing::TempDir dir;
  std::map<int, PlanCollectives> plans;
  plans[2] = *parse_plan_collectives(one_algo_plan("ring"));
  plans[4] = *parse_plan_collectives(one_algo_plan("rd"));
  std::vector<std::string> notes;
  auto rules = rules_from_plans(plans, &notes);
  ASSERT_TRUE(rules.ok()) << rules.error().message();
  const std::string path = dir.file("all.rules");
  ASSERT_TRUE(paths::write_file_atomic(path, format_ompi_rules(*rules)).ok());
  const RunResult two = mpirun(path, 1024, 2);
  ASSERT_EQ(two.rc, 0) << two.output;
  EXPECT_EQ(signature(two.output), "r0=512 r1=512") << two.output;
  const RunResult four = mpirun(path, 1024, 4);
  ASSERT_EQ(four.rc, 0) << four.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(four.output.find("rank " + std::to_string(rank) + " calls 2 elems 2048 ok"),
              std::string::npos)
        << four.output;
  }
}

}  // namespace
}  // namespace dltune::tuner::db
