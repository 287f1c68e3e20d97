// Checks of split() and non-blocking point-to-point written once over any Communicator, run by
// comm/tests (ranks as threads, spawn()) and tests/comm (MPI processes under mpirun).
//
// Every check is collective over the communicator it is given (every rank calls it, in the
// same order as the other checks) and returns OK, or an error saying what was wrong on this
// rank.
#pragma once

#include "comm/communicator.h"
#include "common/result.h"

namespace dltune::comm::testing {

// A job of replicas x stages ranks, rank = replica * stages + stage: `stages` replica groups
// (the ranks of one stage, ranked by replica) and `replicas` pipeline groups (the ranks of one
// replica, ranked by stage).
struct Layout {
  int replicas = 1;
  int stages = 1;
};

// Splits `world` (of replicas x stages ranks) into both kinds of group and runs every
// allreduce algorithm at several counts, in place and out of place, on every group at once
// (the groups of one kind reduce different data at the same time), plus a broadcast,
// local() / leaders() and a node-shared buffer on each group. `native`: whether the transport
// has its own allreduce (else kNative must fail as unsupported). kShm and kCma must fail as
// invalid input on a group that spans several nodes.
Status check_split_layout(Communicator& world, Layout layout, bool native);
// Ranks with rank % 3 == 2 pass kUndefined (or another negative colour) and get nullptr; the
// others form two groups ranked by a decreasing key, checked by an allreduce.
Status check_split_undefined(Communicator& world);
// A split of a split outlives its parent; a split queued behind an outstanding collective;
// a group's own communication thread runs while its parent reduces on the caller's thread.
Status check_split_lifetimes(Communicator& world);

// Point-to-point around the ring (to rank + 1, from rank - 1; both directions where noted).
// Communicators of one rank pass trivially.
//
// Receives posted for several tags complete in the order their messages arrive (the peer
// sends the highest tag first and waits for an acknowledgement before the next): wait_any
// must return exactly the request whose message came. Sizes include a rendezvous-sized one.
Status check_p2p_out_of_order(Communicator& c);
// 32 messages each way in flight at once, sends and receives mixed in one wait_any loop; then
// the same traffic as one start_batch() and wait_all().
Status check_p2p_many_in_flight(Communicator& c);
// Messages with one tag arrive in send order, across blocking and non-blocking calls.
Status check_p2p_same_tag_order(Communicator& c);
// wait_any: timeout leaves requests pending, consumption, an operation's error, no valid one.
Status check_wait_any(Communicator& c);
// A rank blocked in wait_any for ~0.3 s uses little CPU (it sleeps; generous bound: < 0.1 s).
Status check_wait_any_sleeps(Communicator& c);
// Zero-byte messages, blocking and not, with null buffers.
Status check_p2p_zero_bytes(Communicator& c);
// Receives of the wrong size fail with invalid input (larger and smaller messages).
Status check_p2p_size_mismatch(Communicator& c);
// A receive nobody answers ends in kTimeout at its deadline.
Status check_p2p_timeout(Communicator& c);
// Bad peers and tags are rejected before anything is sent.
Status check_p2p_bad_arguments(Communicator& c);
// Destroying a communicator finishes its pending receives with an error.
Status check_p2p_cancel_on_destroy(Communicator& world);
// A pipeline's traffic: point-to-point on `world` and on a replica group from this thread,
// while the replica group's communication thread reduces gradient buckets.
Status check_p2p_with_group_allreduce(Communicator& world);

}  // namespace dltune::comm::testing
