// Multi-process check of split() and non-blocking point-to-point over MPI: run under mpirun
// -np N (ctest does it for N = 2, 3, 4). The checks of comm/tests/comm_checks.h (the same the
// thread communicator passes): R x S layouts with every algorithm, native included, on every
// group at once; undefined colours; lifetimes; tagged messages in flight both ways,
// out-of-order completion, wait_any, zero bytes, size mismatches, timeouts, cancellation, and
// point-to-point concurrent with collectives on a split communicator's communication thread.
// Prints one line per failure; exit code 0 when all passed, 1 otherwise.
#include <cstdio>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/tests/comm_checks.h"

namespace dltune::comm {
namespace {

int g_failures = 0;

void run(Communicator& c, const std::string& name, const Status& s) {
  if (!s) {
    ++g_failures;
    std::fprintf(stderr, "FAIL rank %d: %s: %s\n", c.rank(), name.c_str(),
                 s.error().message().c_str());
  }
}

// The layouts of a world of `p` ranks: p x 1, 1 x p, and R x S for each other factorisation.
std::vector<testing::Layout> layouts(int p) {
  std::vector<testing::Layout> out = {{p, 1}, {1, p}};
  for (int s = 2; s < p; ++s) {
    if (p % s == 0) out.push_back({p / s, s});
  }
  return out;
}

}  // namespace
}  // namespace dltune::comm

int main() {
  using namespace dltune::comm;
  {
    auto world = create_mpi_world();
    if (!world) {
      std::fprintf(stderr, "FAIL: %s\n", world.error().message().c_str());
      return 1;
    }
    Communicator& c = **world;
    c.set_timeout(std::chrono::seconds(60));  // a failing rank must not stall the others long
    for (const auto& l : layouts(c.size())) {
      run(c, std::to_string(l.replicas) + "x" + std::to_string(l.stages) + " layout",
          testing::check_split_layout(c, l, /*native=*/true));
    }
    run(c, "undefined colour", testing::check_split_undefined(c));
    run(c, "lifetimes", testing::check_split_lifetimes(c));
    run(c, "out of order", testing::check_p2p_out_of_order(c));
    run(c, "many in flight", testing::check_p2p_many_in_flight(c));
    run(c, "same tag order", testing::check_p2p_same_tag_order(c));
    run(c, "wait_any", testing::check_wait_any(c));
    run(c, "wait_any sleeps", testing::check_wait_any_sleeps(c));
    run(c, "zero bytes", testing::check_p2p_zero_bytes(c));
    run(c, "size mismatch", testing::check_p2p_size_mismatch(c));
    run(c, "timeout", testing::check_p2p_timeout(c));
    run(c, "bad arguments", testing::check_p2p_bad_arguments(c));
    run(c, "cancel on destroy", testing::check_p2p_cancel_on_destroy(c));
    run(c, "with group allreduce", testing::check_p2p_with_group_allreduce(c));
    if (c.rank() == 0) std::printf("%d ranks: %d failure(s)\n", c.size(), g_failures);
  }
  mpi_finalize();
  return g_failures == 0 ? 0 : 1;
}
