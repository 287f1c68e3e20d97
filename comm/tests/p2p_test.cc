// Non-blocking point-to-point with ranks as threads: tags, ordering, wait_any, sizes,
// timeouts, cancellation, and traffic concurrent with collectives on a split communicator's
// communication thread.
#include <thread>

#include <gtest/gtest.h>

#include "comm/tests/comm_checks.h"
#include "comm/thread_communicator.h"

namespace dltune::comm {
namespace {

using std::chrono::milliseconds;

struct Check {
  const char* name;
  Status (*fn)(Communicator&);
};

class P2pTest : public ::testing::TestWithParam<Check> {};

TEST_P(P2pTest, PassesOnEveryRankCount) {
  for (int ranks : {1, 2, 3, 4}) {
    Status s = spawn(ranks, GetParam().fn, ranks > 2 ? 2 : 0, std::chrono::seconds(30));
    ASSERT_TRUE(s.ok()) << ranks << " ranks: " << s.error().message();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Checks, P2pTest,
    ::testing::Values(Check{"OutOfOrder", testing::check_p2p_out_of_order},
                      Check{"ManyInFlight", testing::check_p2p_many_in_flight},
                      Check{"SameTagOrder", testing::check_p2p_same_tag_order},
                      Check{"WaitAny", testing::check_wait_any},
                      Check{"WaitAnySleeps", testing::check_wait_any_sleeps},
                      Check{"ZeroBytes", testing::check_p2p_zero_bytes},
                      Check{"SizeMismatch", testing::check_p2p_size_mismatch},
                      Check{"Timeout", testing::check_p2p_timeout},
                      Check{"BadArguments", testing::check_p2p_bad_arguments},
                      Check{"CancelOnDestroy", testing::check_p2p_cancel_on_destroy},
                      Check{"WithGroupAllreduce", testing::check_p2p_with_group_allreduce}),
    [](const ::testing::TestParamInfo<Check>& param) { return std::string(param.param.name); });

// A blocking receive issued while an earlier irecv of the same channel is still posted takes
// the second message (the sender waits until both receives are surely posted).
TEST(P2p, BlockingReceiveQueuesBehindPostedReceive) {
  Status s = spawn(2, [](Communicator& c) -> Status {
    int a = 0, b = 0;
    if (c.rank() == 0) {
      std::this_thread::sleep_for(milliseconds(50));
      const int one = 1, two = 2;
      DLTUNE_TRY(c.send(1, 5, &one, sizeof one, c.deadline_from_now()));
      return c.send(1, 5, &two, sizeof two, c.deadline_from_now());
    }
    Request first = c.irecv(0, 5, &a, sizeof a);
    DLTUNE_TRY(c.recv(0, 5, &b, sizeof b, c.deadline_from_now()));
    DLTUNE_TRY(first.wait());
    return a == 1 && b == 2 ? ok_status() : internal_error("out of order");
  });
  ASSERT_TRUE(s.ok()) << s.error().message();
}

}  // namespace
}  // namespace dltune::comm
