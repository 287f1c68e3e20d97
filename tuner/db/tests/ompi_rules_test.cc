// Open MPI rules: plan parsing, algorithm mapping, the writer, and the strict parser against the
// real files in ../shared/fixtures/mpi_tuning (copied into tests/data with their origin).
#include "tuner/db/ompi_rules.h"

#include <string>

#include <gtest/gtest.h>

#include "common/paths.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

std::string data_file(const std::string& name) {
  return std::string(DLTUNE_DB_TEST_DATA) + "/" + name;
}

TEST(PlanCollectives, ParsesTheAgreedShape) {
  auto p = parse_plan_collectives(testing::sample_plan_json(4096));
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->count("allreduce"), 1u);
  const auto& r = p->at("allreduce");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].algo, "rd");
  EXPECT_EQ(r[1].min_bytes, 4096u);
  EXPECT_EQ(r[1].max_bytes, UINT64_MAX);
}

TEST(PlanCollectives, RejectsGapsAndBadTypes) {
  const char* bad[] = {
      R"({"version":1,"collectives":{"allreduce":[{"min_bytes":8,"max_bytes":16,"algo":"rd"}]}})",
      R"({"version":1,"collectives":{"allreduce":[{"min_bytes":0,"max_bytes":16,"algo":"rd"},)"
      R"({"min_bytes":32,"max_bytes":64,"algo":"ring"}]}})",
      R"({"version":1,"collectives":{"allreduce":[{"min_bytes":0,"max_bytes":0,"algo":"rd"}]}})",
      R"({"version":1,"collectives":{"allreduce":[{"min_bytes":-1,"max_bytes":4,"algo":"rd"}]}})",
      R"({"version":1,"collectives":{"allreduce":[]}})",
      R"({"version":1,"collectives":[1,2]})",
      R"(not json)",
      // A range that stops short: it once became a rule for every size ("a ring for [0,100)
      // becomes a ring for every size"); the Plan's reader refuses the gap it leaves.
      R"({"version":1,"collectives":{"allreduce":[{"min_bytes":0,"max_bytes":100,"algo":"ring"}]},)"
      R"("training":{"per_rank_batch":1,"global_batch":2,"scaling":"weak"},)"
      R"("job":{"nodes":1,"ranks_per_node":2}})",
  };
  for (const char* j : bad) {
    auto p = parse_plan_collectives(j);
    EXPECT_FALSE(p.ok()) << j;
    if (!p.ok()) {
      EXPECT_EQ(p.error().exit_code(), 2);
    }
  }
}

TEST(OmpiMapping, AllreduceTable) {
  struct Case {
    const char* algo;
    uint64_t segment;
    int id;
    bool approximated;
  };
  const Case cases[] = {
      {"rd", 0, 3, false},           {"ring", 0, 4, false}, {"ring", 65536, 5, false},
      {"rabenseifner", 0, 6, false}, {"tree", 0, 2, true},  {"native", 0, 0, false},
      {"hier", 0, 6, true},          {"shm", 0, 3, true},   {"cma", 0, 6, true}};
  for (const Case& c : cases) {
    auto m = map_to_ompi("allreduce", {0, 8, c.algo, c.segment});
    ASSERT_TRUE(m.ok()) << c.algo;
    EXPECT_EQ(m->algorithm, c.id) << c.algo;
    EXPECT_EQ(!m->note.empty(), c.approximated) << c.algo;
    if (c.id == 5) {
      EXPECT_EQ(m->segment_bytes, c.segment);
    }
  }
  EXPECT_FALSE(map_to_ompi("allreduce", {0, 8, "magic", 0}).ok());
  EXPECT_EQ(map_to_ompi("broadcast", {0, 8, "tree", 0})->algorithm, 6);
}

TEST(OmpiRules, WriterOutputParsesBackAndMergesEqualNeighbours) {
  auto plan = parse_plan_collectives(
      R"({"version":1,"collectives":{"allreduce":[)"
      R"({"min_bytes":0,"max_bytes":4096,"algo":"rd","segment_bytes":0},)"
      R"({"min_bytes":4096,"max_bytes":8192,"algo":"shm","segment_bytes":0},)"
      R"({"min_bytes":8192,"max_bytes":65536,"algo":"ring","segment_bytes":0},)"
      R"({"min_bytes":65536,"max_bytes":18446744073709551615,"algo":"ring","segment_bytes":0}]},)"
      R"("training":{"per_rank_batch":8,"global_batch":32,"scaling":"weak"},)"
      R"("job":{"nodes":1,"ranks_per_node":4}})");
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  std::vector<std::string> notes;
  auto rules = rules_from_plan(*plan, 4, &notes);
  ASSERT_TRUE(rules.ok()) << rules.error().message();
  ASSERT_EQ(rules->collectives.size(), 1u);
  const auto& comm = rules->collectives[0].comm_sizes.at(0);
  EXPECT_EQ(comm.comm_size, 4);
  // rd 0, shm -> rd merged away, ring at 8192 (the 64 KiB ring range merged into it).
  ASSERT_EQ(comm.rules.size(), 2u);
  EXPECT_EQ(comm.rules[0].algorithm, 3);
  EXPECT_EQ(comm.rules[1].msg_bytes, 8192u);
  EXPECT_EQ(comm.rules[1].algorithm, 4);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("shm"), std::string::npos);

  const std::string text = format_ompi_rules(*rules);
  auto back = parse_ompi_rules(text);
  ASSERT_TRUE(back.ok()) << back.error().message() << "\n" << text;
  EXPECT_EQ(back->collectives.at(0).collective_id, 2);
  EXPECT_EQ(back->collectives.at(0).comm_sizes.at(0).rules.size(), 2u);
}

TEST(OmpiRules, ParsesTheOpenMpiDocsExample) {
  auto text = paths::read_file(data_file("ompi_docs_tuned_rules_v2_alltoall.txt"));
  ASSERT_TRUE(text.ok()) << text.error().message();
  auto f = parse_ompi_rules(*text);
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->version, 2);
  ASSERT_EQ(f->collectives.size(), 1u);
  EXPECT_EQ(f->collectives[0].collective_id, 3);
  const auto& rules = f->collectives[0].comm_sizes.at(0).rules;
  ASSERT_EQ(rules.size(), 14u);
  EXPECT_EQ(rules[1].msg_bytes, 512000u);
  EXPECT_EQ(rules[1].max_requests, 64);
}

// The real decision file from ompi-collectives-tuning declares one rule more than it holds in
// every table: the parser must say so, pointing at the line.
TEST(OmpiRules, RejectsTheMalformedRealFileClearly) {
  auto text = paths::read_file(data_file("ompi_collectives_tuning_example_decision.file"));
  ASSERT_TRUE(text.ok()) << text.error().message();
  auto f = parse_ompi_rules(*text);
  ASSERT_FALSE(f.ok());
  const std::string& msg = f.error().message();
  EXPECT_NE(msg.find("line 16:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rule 11 of 11 for allgather comm size 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("declared on line 5 (11)"), std::string::npos) << msg;
  EXPECT_EQ(f.error().exit_code(), 2);
}

TEST(OmpiRules, RejectsOtherDamage) {
  const char* bad[] = {
      "",                                   // empty
      "1\n2\n1\n4\n2\n0 3 0 0\n",           // a rule missing
      "1\n2\n1\n4\n1\n0 3 0 0\n99\n",       // trailing data
      "1\n2\n1\n4\n2\n0 3 0 0\n0 4 0 0\n",  // sizes not increasing
      "1\n2\n1\n4\n1\n0 42 0 0\n",          // no such allreduce algorithm
      "1\n77\n1\n4\n1\n0 1 0 0\n",          // no such collective
      "1\n2\n1\n4\n1\n0 x 0 0\n",           // not a number
      "rule-file-version-9\n1\n",           // unknown version
  };
  for (const char* t : bad) {
    auto f = parse_ompi_rules(t);
    EXPECT_FALSE(f.ok()) << t;
    if (!f.ok()) {
      EXPECT_EQ(f.error().exit_code(), 2) << f.error().message();
    }
  }
}

}  // namespace
}  // namespace dltune::tuner::db
