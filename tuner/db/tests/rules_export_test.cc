// `dltune db rules`' plan selection: one shape, or every communicator size at once from the
// user and site databases, in each format.
#include "tuner/db/rules_export.h"

#include <string>

#include <gtest/gtest.h>

#include "common/strings.h"
#include "recipes/plan.h"
#include "tuner/db/ompi_rules.h"
#include "tuner/db/tests/db_fixture.h"

namespace dltune::tuner::db {
namespace {

// A plan of `nodes` x `rpn` ranks whose allreduce is `algo` for every size.
PlanRecord plan_of(int64_t nodes, int64_t rpn, const char* algo, int64_t created_at) {
  PlanRecord p = testing::sample_plan(testing::sample_key("ab12", nodes, rpn), created_at);
  // The sample's plan (whole and valid: the store refuses less), its allreduce set to `algo`.
  auto plan = recipes::parse_plan(p.plan_json);
  EXPECT_TRUE(plan.ok()) << plan.error().message();
  recipes::SizeRange all;
  all.algo = *recipes::parse_algorithm(algo);
  plan->collectives[recipes::Collective::kAllreduce] = {all};
  p.plan_json = recipes::serialize_plan(*plan);
  return p;
}

class RulesExport : public ::testing::Test {
 protected:
  void SetUp() override {
    layers_.user_db = dir_.file("user.db");
    layers_.site_dbs = {dir_.file("site.db")};
    auto user = TuningDb::open(layers_.user_db, OpenMode::kReadWrite);
    ASSERT_TRUE(user.ok());
    ASSERT_TRUE(user->put_plan(plan_of(1, 2, "ring", 1700000100)).ok());
    ASSERT_TRUE(user->put_plan(plan_of(1, 4, "tree", 1700000200)).ok());
    ASSERT_TRUE(user->put_plan(plan_of(2, 2, "rd", 1700000300)).ok());  // newer, same size 4
    auto site = TuningDb::open(layers_.site_dbs[0], OpenMode::kReadWrite);
    ASSERT_TRUE(site.ok());
    ASSERT_TRUE(site->put_plan(plan_of(1, 8, "rabenseifner", 1700000000)).ok());
    ASSERT_TRUE(site->put_plan(plan_of(1, 2, "rd", 1700009999)).ok());  // the user's 1x2 wins
  }
  testing::TempDir dir_;
  Layers layers_;
};

TEST_F(RulesExport, OpenMpiFileHoldsEveryCommSize) {
  auto out = export_rules(layers_, {}, RulesFormat::kOmpi);
  ASSERT_TRUE(out.ok()) << out.error().message();
  auto rules = parse_ompi_rules(out->text);
  ASSERT_TRUE(rules.ok()) << rules.error().message() << "\n" << out->text;
  ASSERT_EQ(rules->collectives.size(), 1u);
  const auto& sizes = rules->collectives[0].comm_sizes;
  ASSERT_EQ(sizes.size(), 3u) << out->text;
  EXPECT_EQ(sizes[0].comm_size, 2);
  EXPECT_EQ(sizes[0].rules[0].algorithm, 4);  // ring: the user's, not the site's rd
  EXPECT_EQ(sizes[1].comm_size, 4);
  EXPECT_EQ(sizes[1].rules[0].algorithm, 3);  // 2x2's rd, newer than 1x4's tree
  EXPECT_EQ(sizes[2].comm_size, 8);
  EXPECT_EQ(sizes[2].rules[0].algorithm, 6);  // the site's rabenseifner
  EXPECT_EQ(out->sources.size(), 3u);
  const std::string notes = strings::join(out->notes, "\n");
  EXPECT_NE(notes.find("comm size 4: plans of 2x2 and 1x4; using 2x2's"), std::string::npos)
      << notes;
}

TEST_F(RulesExport, OneShapeWhenAsked) {
  Filter f;
  f.shape = JobShape{1, 4};
  auto out = export_rules(layers_, f, RulesFormat::kOmpi);
  ASSERT_TRUE(out.ok()) << out.error().message();
  auto rules = parse_ompi_rules(out->text);
  ASSERT_TRUE(rules.ok());
  ASSERT_EQ(rules->collectives[0].comm_sizes.size(), 1u);
  EXPECT_EQ(rules->collectives[0].comm_sizes[0].rules[0].algorithm, 2);  // tree: nonoverlapping

  auto mv = export_rules(layers_, f, RulesFormat::kMvapich);
  ASSERT_TRUE(mv.ok()) << mv.error().message();
  EXPECT_NE(mv->text.find("MV2_INTER_ALLREDUCE_TUNING='1:0-+'"), std::string::npos) << mv->text;
}

TEST_F(RulesExport, MpichJsonHoldsEveryCommSize) {
  auto out = export_rules(layers_, {}, RulesFormat::kMpich);
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_NE(out->text.find("\"comm_size<4\""), std::string::npos) << out->text;
  EXPECT_NE(out->text.find("\"comm_size<8\""), std::string::npos) << out->text;
}

TEST_F(RulesExport, PerShapeFormatsNeedAShapeAndMissingPlansAreNamed) {
  auto mv = export_rules(layers_, {}, RulesFormat::kMvapich);
  ASSERT_FALSE(mv.ok());
  EXPECT_EQ(mv.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(mv.error().message().find("--shape is required"), std::string::npos);
  Filter f;
  f.shape = JobShape{3, 3};
  auto none = export_rules(layers_, f, RulesFormat::kOmpi);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind(), ErrorKind::kNotFound);
  EXPECT_NE(none.error().message().find("dltune tune --collectives -n 9"), std::string::npos);
  EXPECT_TRUE(parse_rules_format("nccl-env").ok());
  EXPECT_FALSE(parse_rules_format("bogus").ok());
}

}  // namespace
}  // namespace dltune::tuner::db
