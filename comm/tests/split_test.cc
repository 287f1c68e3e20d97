// split() with ranks as threads: every algorithm on every group of R x S layouts (simulated
// nodes included, so that groups span nodes), undefined colours, and lifetimes.
#include <gtest/gtest.h>

#include "comm/tests/comm_checks.h"
#include "comm/thread_communicator.h"

namespace dltune::comm {
namespace {

using testing::Layout;

struct LayoutCase {
  Layout layout;
  int ranks_per_node;  // 0: one node
};

class SplitTest : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(SplitTest, EveryAlgorithmOnEveryGroup) {
  const LayoutCase& c = GetParam();
  const int size = c.layout.replicas * c.layout.stages;
  Status s = spawn(
      size, [&](Communicator& w) { return testing::check_split_layout(w, c.layout, false); },
      c.ranks_per_node);
  ASSERT_TRUE(s.ok()) << s.error().message();
}

INSTANTIATE_TEST_SUITE_P(Layouts, SplitTest,
                         ::testing::Values(LayoutCase{{2, 2}, 0}, LayoutCase{{2, 2}, 2},
                                           LayoutCase{{3, 1}, 0}, LayoutCase{{1, 3}, 0},
                                           LayoutCase{{3, 2}, 0}, LayoutCase{{3, 2}, 2},
                                           LayoutCase{{2, 3}, 3}, LayoutCase{{5, 1}, 2},
                                           LayoutCase{{1, 1}, 0}),
                         [](const ::testing::TestParamInfo<LayoutCase>& param) {
                           const LayoutCase& c = param.param;
                           return std::to_string(c.layout.replicas) + "x" +
                                  std::to_string(c.layout.stages) + "_nodes_of_" +
                                  std::to_string(c.ranks_per_node);
                         });

TEST(Split, UndefinedColourGetsNothing) {
  for (int ranks : {1, 2, 3, 5, 6}) {
    Status s = spawn(ranks, testing::check_split_undefined);
    ASSERT_TRUE(s.ok()) << ranks << " ranks: " << s.error().message();
  }
}

TEST(Split, GroupsOutliveTheirParentsAndQueueBehindCollectives) {
  for (int ranks : {1, 2, 3, 4}) {
    Status s = spawn(ranks, testing::check_split_lifetimes, ranks > 2 ? 2 : 0);
    ASSERT_TRUE(s.ok()) << ranks << " ranks: " << s.error().message();
  }
}

TEST(Split, AbsentRankTimesOut) {
  Status s = spawn(
      3,
      [](Communicator& c) -> Status {
        if (c.rank() == 2) return ok_status();  // never joins the split
        auto g = c.split(0, 0);
        if (g.ok()) return internal_error("a split without rank 2 succeeded");
        return g.error().kind() == ErrorKind::kTimeout ? ok_status() : Status(g.error());
      },
      0, std::chrono::milliseconds(300));
  ASSERT_TRUE(s.ok()) << s.error().message();
}

}  // namespace
}  // namespace dltune::comm
