// Non-blocking collectives: several outstanding requests complete in order while the caller
// computes; blocking calls queue behind them; broadcasts from every root.
#include <atomic>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "comm/allreduce.h"
#include "comm/tests/test_util.h"
#include "comm/thread_communicator.h"

namespace dltune::comm {
namespace {

using testing::make_input;
using testing::reference;

TEST(Async, SeveralOutstandingInOrderWithComputation) {
  constexpr int kBuckets = 6;
  constexpr size_t kCount = 20000;
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner,
                         Algorithm::kTree, Algorithm::kShm}) {
    const auto want = reference<float>(4, kCount, ReduceOp::kSum);
    Status s = spawn(4, [&](Communicator& c) -> Status {
      std::vector<std::vector<float>> buckets(kBuckets, make_input<float>(c.rank(), kCount));
      std::vector<Request> reqs;
      std::vector<int> finished_order;
      AllreduceOptions o;
      o.algorithm = algo;
      double acc = 0;
      for (int b = 0; b < kBuckets; ++b) {
        reqs.push_back(allreduce_async(c, buckets[b].data(), buckets[b].data(), kCount,
                                       DataType::kF32, ReduceOp::kSum, o));
        // "Backward computation" of the next bucket, overlapped with communication.
        for (int i = 0; i < 20000; ++i) acc += std::sqrt(static_cast<double>(i + b));
      }
      // Requests complete in order: once request k is done, every earlier one is too.
      for (int b = kBuckets - 1; b >= 0; --b) {
        DLTUNE_TRY(reqs[static_cast<size_t>(b)].wait());
        for (int e = 0; e < b; ++e) {
          if (!reqs[static_cast<size_t>(e)].test()) {
            return internal_error("request " + std::to_string(e) + " finished after " +
                                  std::to_string(b));
          }
        }
      }
      for (int b = 0; b < kBuckets; ++b) {
        if (buckets[b] != want) return internal_error("bucket " + std::to_string(b) + " wrong");
      }
      return acc > 0 ? ok_status() : internal_error("computation vanished");
    });
    ASSERT_TRUE(s.ok()) << algorithm_name(algo) << ": " << s.error().message();
  }
}

TEST(Async, BlockingCallQueuesBehindOutstanding) {
  constexpr size_t kCount = 5000;
  const auto want = reference<float>(3, kCount, ReduceOp::kSum);
  Status s = spawn(3, [&](Communicator& c) -> Status {
    auto a = make_input<float>(c.rank(), kCount);
    auto b = make_input<float>(c.rank(), kCount);
    AllreduceOptions o;
    Request r = allreduce_async(c, a.data(), a.data(), kCount, DataType::kF32, ReduceOp::kSum, o);
    DLTUNE_TRY(allreduce(c, b.data(), b.data(), kCount, DataType::kF32, ReduceOp::kSum, o));
    if (!r.test()) return internal_error("the blocking call overtook the outstanding request");
    DLTUNE_TRY(r.wait());
    DLTUNE_TRY(r.wait());  // waiting twice is fine
    return a == want && b == want ? ok_status() : internal_error("wrong result");
  });
  ASSERT_TRUE(s.ok()) << s.error().message();
}

TEST(Broadcast, EveryRootAlgorithmAndSize) {
  for (auto algo : {BroadcastAlgorithm::kBinomial, BroadcastAlgorithm::kChain}) {
    for (int ranks : {1, 2, 3, 5, 8}) {
      for (size_t bytes : {size_t{0}, size_t{1}, size_t{1000}, size_t{300000}}) {
        for (int root = 0; root < ranks; root += 2) {
          Status s = spawn(ranks, [&](Communicator& c) -> Status {
            std::vector<uint8_t> data(bytes, static_cast<uint8_t>(c.rank()));
            if (c.rank() == root) std::iota(data.begin(), data.end(), uint8_t{7});
            std::vector<uint8_t> want(bytes);
            std::iota(want.begin(), want.end(), uint8_t{7});
            BroadcastOptions o;
            o.algorithm = algo, o.root = root, o.segment_bytes = 65536;
            if (c.rank() % 2 == 0) {
              DLTUNE_TRY(broadcast(c, data.data(), bytes, o));
            } else {
              DLTUNE_TRY(broadcast_async(c, data.data(), bytes, o).wait());
            }
            return data == want ? ok_status() : internal_error("wrong broadcast data");
          });
          ASSERT_TRUE(s.ok()) << "ranks " << ranks << " bytes " << bytes << " root " << root << ": "
                              << s.error().message();
        }
      }
    }
  }
}

}  // namespace
}  // namespace dltune::comm
