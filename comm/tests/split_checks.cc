// split() checks of comm/tests/comm_checks.h.
#include <algorithm>
#include <string>
#include <vector>

#include "comm/allreduce.h"
#include "comm/tests/comm_checks.h"
#include "comm/tests/test_util.h"

namespace dltune::comm::testing {
namespace {

#define EXPECT_OR_FAIL(cond, what)                                                        \
  do {                                                                                    \
    if (!(cond)) return internal_error(std::string("expected ") + #cond + ": " + (what)); \
  } while (0)

// The serial reference of a group whose members (world ranks) fed make_input(world rank).
std::vector<float> group_reference(const std::vector<int>& members, size_t count) {
  std::vector<float> out(count, 0.0f);
  for (int w : members) {
    const auto in = make_input<float>(w, count);
    for (size_t i = 0; i < count; ++i) out[i] += in[i];
  }
  return out;
}

std::string ranks_text(const std::vector<int>& members) {
  std::string s;
  for (int w : members) s += (s.empty() ? "" : ",") + std::to_string(w);
  return "group {" + s + "}";
}

// Every algorithm on `g` (whose rank i is world rank members[i]) at several counts.
Status check_algorithms(Communicator& g, const std::vector<int>& members, bool native) {
  const int me = members[static_cast<size_t>(g.rank())];
  for (Algorithm algo : all_algorithms()) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, size_t{65539}}) {
      for (bool in_place : {true, false}) {
        auto in = make_input<float>(me, count);
        std::vector<float> out(count, -1.0f);
        AllreduceOptions o;
        o.algorithm = algo;
        o.segment_bytes = 16 << 10;
        Status s = allreduce(g, in.data(), in_place ? in.data() : out.data(), count, DataType::kF32,
                             ReduceOp::kSum, o);
        const std::string what = std::string(algorithm_name(algo)) + " count " +
                                 std::to_string(count) + (in_place ? " in place" : "") + " on " +
                                 ranks_text(members);
        if (algo == Algorithm::kNative && !native && count > 0) {
          EXPECT_OR_FAIL(!s.ok() && s.error().kind() == ErrorKind::kUnsupported, what);
          continue;
        }
        if ((algo == Algorithm::kShm || algo == Algorithm::kCma) &&
            g.node_count() > 1) {  // count 0 validates too
          EXPECT_OR_FAIL(!s.ok() && s.error().kind() == ErrorKind::kInvalidInput, what);
          continue;
        }
        if (!s) return std::move(s).error().wrap(what);
        if (algo == Algorithm::kNative && !native) continue;  // count 0: nothing was reduced
        EXPECT_OR_FAIL((in_place ? in : out) == group_reference(members, count), what);
      }
    }
  }
  return ok_status();
}

// Broadcast, local() / leaders() and a node-shared buffer on `g`.
Status check_group_services(Communicator& g, const std::vector<int>& members) {
  const std::string where = ranks_text(members);
  std::vector<int> data(777, g.rank() == g.size() - 1 ? 42 : -1);
  BroadcastOptions bo;
  bo.root = g.size() - 1;
  DLTUNE_TRY_CTX(broadcast(g, data.data(), data.size() * sizeof(int), bo), where);
  EXPECT_OR_FAIL(data == std::vector<int>(777, 42), "broadcast on " + where);

  Communicator& loc = g.local();
  EXPECT_OR_FAIL(loc.size() >= 1 && loc.size() <= g.size(), where);
  EXPECT_OR_FAIL(g.node_count() > 1 || loc.size() == g.size(), where);
  if (loc.rank() == 0) {
    Communicator* lead = g.leaders();
    EXPECT_OR_FAIL(lead != nullptr && lead->size() == g.node_count(), where);
  }

  const size_t count = 5000;
  auto buf = g.alloc_shared(count * sizeof(float));
  if (!buf) return buf.error().wrap(where);
  const auto in = make_input<float>(members[static_cast<size_t>(g.rank())], count);
  std::copy(in.begin(), in.end(), buf->as<float>());
  AllreduceOptions o;
  o.algorithm = g.node_count() == 1 ? Algorithm::kShm : Algorithm::kHierarchical;
  DLTUNE_TRY_CTX(allreduce(g, buf->data(), buf->data(), count, DataType::kF32, ReduceOp::kSum, o),
                 "shared buffer on " + where);
  const auto want = group_reference(members, count);
  EXPECT_OR_FAIL(std::equal(want.begin(), want.end(), buf->as<float>()),
                 "shared buffer on " + where);
  return ok_status();
}

}  // namespace

Status check_split_layout(Communicator& world, Layout layout, bool native) {
  const int stages = layout.stages, replicas = layout.replicas;
  DLTUNE_CHECK(world.size() == replicas * stages, "layout does not match the world");
  const int me = world.rank(), replica = me / stages, stage = me % stages;
  const std::string name = std::to_string(replicas) + "x" + std::to_string(stages) +
                           " layout, world rank " + std::to_string(me);

  auto rep = world.split(stage, replica);  // same stage: a replica group
  if (!rep) return rep.error().wrap(name);
  auto pipe = world.split(replica, stage);  // same replica: a pipeline group
  if (!pipe) return pipe.error().wrap(name);
  EXPECT_OR_FAIL(*rep != nullptr && *pipe != nullptr, name);
  EXPECT_OR_FAIL((*rep)->size() == replicas && (*rep)->rank() == replica, name);
  EXPECT_OR_FAIL((*pipe)->size() == stages && (*pipe)->rank() == stage, name);
  EXPECT_OR_FAIL((*rep)->timeout() == world.timeout(), name);

  std::vector<int> rep_members, pipe_members;
  for (int r = 0; r < replicas; ++r) rep_members.push_back(r * stages + stage);
  for (int s = 0; s < stages; ++s) pipe_members.push_back(replica * stages + s);
  DLTUNE_TRY_CTX(check_algorithms(**rep, rep_members, native), name);
  DLTUNE_TRY_CTX(check_algorithms(**pipe, pipe_members, native), name);
  DLTUNE_TRY_CTX(check_group_services(**rep, rep_members), name);
  DLTUNE_TRY_CTX(check_group_services(**pipe, pipe_members), name);
  return ok_status();
}

Status check_split_undefined(Communicator& world) {
  const int me = world.rank();
  const int colour = me % 3 == 2 ? (me % 2 == 0 ? kUndefined : -7) : me % 2;
  auto g = world.split(colour, -me);  // decreasing key: the group is in reverse rank order
  if (!g) return g.error();
  if (colour < 0) {
    EXPECT_OR_FAIL(*g == nullptr, "rank " + std::to_string(me) + " has no colour");
    return ok_status();
  }
  std::vector<int> members;  // by key: descending world rank
  for (int r = world.size() - 1; r >= 0; --r) {
    if (r % 3 != 2 && r % 2 == colour) members.push_back(r);
  }
  EXPECT_OR_FAIL(*g != nullptr && (*g)->size() == static_cast<int>(members.size()),
                 ranks_text(members));
  EXPECT_OR_FAIL(members[static_cast<size_t>((*g)->rank())] == me, ranks_text(members));
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kTree}) {
    auto v = make_input<float>(me, 1001);
    AllreduceOptions o;
    o.algorithm = algo;
    DLTUNE_TRY(allreduce(**g, v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum, o));
    EXPECT_OR_FAIL(v == group_reference(members, v.size()),
                   std::string(algorithm_name(algo)) + " on " + ranks_text(members));
  }
  return ok_status();
}

Status check_split_lifetimes(Communicator& world) {
  const int me = world.rank(), p = world.size();
  std::vector<int> all(static_cast<size_t>(p)), halves;
  for (int r = 0; r < p; ++r) all[static_cast<size_t>(r)] = r;
  for (int r = me % 2; r < p; r += 2) halves.push_back(r);

  // A split queued behind an outstanding collective on the parent.
  auto bucket = make_input<float>(me, 30000);
  AllreduceOptions o;
  Request pending = allreduce_async(world, bucket.data(), bucket.data(), bucket.size(),
                                    DataType::kF32, ReduceOp::kSum, o);
  auto whole = world.split(0, me);
  if (!whole) return whole.error();
  DLTUNE_TRY(pending.wait());
  EXPECT_OR_FAIL(bucket == group_reference(all, bucket.size()), "collective before a split");

  // A split of a split, which then outlives its parent.
  auto half = (*whole)->split(me % 2, me);
  if (!half) return half.error();
  whole->reset();
  std::unique_ptr<Communicator> h = std::move(*half);
  EXPECT_OR_FAIL(h != nullptr && h->size() == static_cast<int>(halves.size()), "nested split");

  // The group's communication thread reduces while its parent reduces on this thread.
  auto a = make_input<float>(me, 20000);
  auto b = make_input<float>(me, 20001);
  o.algorithm = Algorithm::kRecursiveDoubling;
  Request on_group =
      allreduce_async(*h, a.data(), a.data(), a.size(), DataType::kF32, ReduceOp::kSum, o);
  DLTUNE_TRY(allreduce(world, b.data(), b.data(), b.size(), DataType::kF32, ReduceOp::kSum, o));
  DLTUNE_TRY(on_group.wait());
  EXPECT_OR_FAIL(a == group_reference(halves, a.size()), "the group's async allreduce");
  EXPECT_OR_FAIL(b == group_reference(all, b.size()), "the parent's allreduce");

  auto again = h->split(0, 0);  // the orphaned group still splits
  if (!again) return again.error();
  EXPECT_OR_FAIL(*again != nullptr && (*again)->size() == h->size(), "split of an orphan");
  return ok_status();
}

}  // namespace dltune::comm::testing
