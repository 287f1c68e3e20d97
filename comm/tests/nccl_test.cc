// The NCCL communicator: choice names everywhere; without a device, the reason create() gives;
// with a device (NcclGpuTest, registered as nccl_gpu_test), a 1-rank communicator over the
// singleton Bootstrap checked on cudaMalloc'd buffers for every algorithm / protocol choice.
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/bootstrap/bootstrap.h"
#include "comm/nccl_communicator.h"

#include "dltune/config.h"

#if DLTUNE_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace dltune::comm {
namespace {

TEST(NcclChoiceTest, NamesRoundTrip) {
  std::vector<NcclOptions> all = {{"", ""}};
  for (const auto& a : nccl_algo_names()) {
    all.push_back({a, ""});
    for (const auto& p : nccl_proto_names()) all.push_back({a, p});
  }
  for (const auto& p : nccl_proto_names()) all.push_back({"", p});
  std::set<std::string> names;
  for (const auto& o : all) {
    const std::string name = nccl_choice_name(o);
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    auto back = parse_nccl_choice(name);
    ASSERT_TRUE(back.ok()) << name << ": " << back.error().message();
    EXPECT_EQ(back->algo, o.algo) << name;
    EXPECT_EQ(back->proto, o.proto) << name;
  }
  EXPECT_EQ(nccl_choice_name({}), "nccl");
  EXPECT_EQ(nccl_choice_name({"ring", "ll"}), "nccl:ring/ll");
  EXPECT_EQ(nccl_choice_name({"", "simple"}), "nccl:/simple");
  EXPECT_EQ(names.size(), 1 + 7 * 4 + 3u);
}

TEST(NcclChoiceTest, ShortFormsParse) {
  auto a = parse_nccl_choice("nccl:tree");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->algo, "tree");
  EXPECT_EQ(a->proto, "");
  auto p = parse_nccl_choice("nccl:/ll128");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->algo, "");
  EXPECT_EQ(p->proto, "ll128");
}

TEST(NcclChoiceTest, RejectsBadNamesWithTheAcceptedValues) {
  struct Case {
    std::string text, says;
  };
  const std::vector<Case> cases = {
      {"", "not an NCCL choice"},
      {"ring", "not an NCCL choice"},
      {"NCCL:ring", "not an NCCL choice"},
      {"nccl:", "names neither"},
      {"nccl:/", "names neither"},
      {"nccl:rign/ll", "unknown NCCL algorithm 'rign'"},
      {"nccl:Ring", "unknown NCCL algorithm 'Ring'"},
      {"nccl:ring/LL", "unknown NCCL protocol 'LL'"},
      {"nccl:ring/ll/x", "unknown NCCL protocol 'll/x'"},
  };
  for (const auto& c : cases) {
    auto r = parse_nccl_choice(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidInput) << c.text;
    EXPECT_NE(r.error().message().find(c.says), std::string::npos) << r.error().message();
  }
  auto r = parse_nccl_choice("nccl:ring/bogus");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("ll, ll128, simple"), std::string::npos);
  r = parse_nccl_choice("nccl:bogus");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("ring, tree, collnet_direct"), std::string::npos);
}

TEST(NcclChoiceTest, DefaultChoicesAreValidAndDistinct) {
  std::set<std::string> seen;
  for (const auto& o : default_nccl_choices()) {
    const std::string name = nccl_choice_name(o);
    EXPECT_TRUE(parse_nccl_choice(name).ok()) << name;
    EXPECT_TRUE(seen.insert(name).second) << name;
  }
  EXPECT_TRUE(seen.count("nccl"));
  EXPECT_TRUE(seen.count("nccl:ring/ll128"));
}

TEST(NcclBuildTest, AvailabilityMatchesTheBuild) {
  EXPECT_EQ(nccl_available(), DLTUNE_HAVE_NCCL == 1);
  const std::string v = nccl_version_string();
  if (nccl_available()) {
    EXPECT_EQ(v.rfind("2.", 0), 0u) << v;
  } else {
    EXPECT_EQ(v, "");
  }
}

// Runs everywhere: the answer create() gives depends on the machine, and each is checked.
TEST(NcclBuildTest, CreateSaysWhyItCannotOrRejectsABadDevice) {
  unsetenv("PMIX_NAMESPACE");
  auto boot = Bootstrap::init();
  ASSERT_TRUE(boot.ok());
  auto bad = NcclCommunicator::create(*boot, 0, {"bogus", ""});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kInvalidInput) << bad.error().message();

  auto n = cuda_device_count();
  if (!n) {
    EXPECT_EQ(n.error().kind(), ErrorKind::kUnsupported);
    EXPECT_NE(n.error().message().find("no CUDA device"), std::string::npos);
    auto c = NcclCommunicator::create(*boot, 0, {});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().kind(), ErrorKind::kUnsupported);
    const std::string& m = c.error().message();
    EXPECT_TRUE(m.find("no CUDA device") != std::string::npos ||
                m.find("built without NCCL") != std::string::npos)
        << m;
  } else {
    auto c = NcclCommunicator::create(*boot, *n, {});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().kind(), ErrorKind::kInvalidInput) << c.error().message();
    EXPECT_NE(c.error().message().find("does not exist"), std::string::npos);
  }
}

#if DLTUNE_HAVE_NCCL

class NcclGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = cuda_device_count();
    if (!n) GTEST_SKIP() << n.error().message();
    unsetenv("PMIX_NAMESPACE");
    auto b = Bootstrap::init();
    ASSERT_TRUE(b.ok()) << b.error().message();
    boot_.emplace(std::move(*b));
  }

  // A device buffer of `values`; freed by the fixture.
  template <typename T>
  T* upload(const std::vector<T>& values) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, values.size() * sizeof(T) + 1), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
    buffers_.push_back(p);
    return static_cast<T*>(p);
  }
  template <typename T>
  std::vector<T> download(const T* p, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  void TearDown() override {
    for (void* p : buffers_) cudaFree(p);
  }

  std::optional<Bootstrap> boot_;
  std::vector<void*> buffers_;
};

template <typename T>
std::vector<T> ramp(size_t n, T start) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + static_cast<T>(i % 1000));
  return v;
}

TEST_F(NcclGpuTest, OneRankAllreduceBroadcastAndNative) {
  auto c = NcclCommunicator::create(*boot_, 0, {});
  ASSERT_TRUE(c.ok()) << c.error().message();
  NcclCommunicator& nccl = **c;
  EXPECT_EQ(nccl.rank(), 0);
  EXPECT_EQ(nccl.size(), 1);
  EXPECT_EQ(nccl.node_count(), 1);
  EXPECT_EQ(&nccl.local(), &nccl);
  EXPECT_NE(nccl.describe().find("NCCL rank 0 of 1 on GPU 0"), std::string::npos);

  const size_t n = 100003;  // odd count
  const auto in = ramp<float>(n, -7.f);
  float* send = upload(in);
  float* recv = upload(std::vector<float>(n, 0.f));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    ASSERT_EQ(cudaMemset(recv, 0, n * sizeof(float)), cudaSuccess);
    ASSERT_TRUE(nccl.allreduce_device(send, recv, n, DataType::kF32, op, stream).ok());
    ASSERT_TRUE(nccl.synchronize(stream).ok());
    EXPECT_EQ(download(recv, n), in) << op_name(op);
  }
  cudaStreamDestroy(stream);

  const auto d = ramp<double>(777, 0.5);
  double* dd = upload(d);
  ASSERT_TRUE(nccl.native_allreduce(dd, dd, d.size(), DataType::kF64, ReduceOp::kSum).ok());
  EXPECT_EQ(download(dd, d.size()), d);
  const auto l = ramp<int64_t>(33, int64_t{1} << 40);
  int64_t* ld = upload(l);
  ASSERT_TRUE(nccl.native_allreduce(ld, ld, l.size(), DataType::kI64, ReduceOp::kMax).ok());
  EXPECT_EQ(download(ld, l.size()), l);
  ASSERT_TRUE(nccl.native_allreduce(ld, ld, 0, DataType::kI64, ReduceOp::kMax).ok());

  const auto bytes = ramp<int32_t>(4099, 3);
  int32_t* b = upload(bytes);
  ASSERT_TRUE(nccl.broadcast_device(b, bytes.size() * 4, 0, nullptr).ok());
  ASSERT_TRUE(nccl.synchronize(nullptr).ok());
  EXPECT_EQ(download(b, bytes.size()), bytes);
  auto root = nccl.broadcast_device(b, 4, 1, nullptr);
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(root.error().kind(), ErrorKind::kInvalidInput);

  // Point-to-point with itself.
  int32_t* r = upload(std::vector<int32_t>(bytes.size(), 0));
  ASSERT_TRUE(
      nccl.sendrecv(0, 1, b, bytes.size() * 4, 0, 1, r, bytes.size() * 4, nccl.deadline_from_now())
          .ok());
  EXPECT_EQ(download(r, bytes.size()), bytes);
}

TEST_F(NcclGpuTest, EveryAlgorithmAndProtocolIsAccepted) {
  unsetenv("NCCL_ALGO");
  setenv("NCCL_PROTO", "^LL128", 1);  // a user's value survives the override
  std::vector<NcclOptions> all = {{"", ""}};
  for (const auto& a : nccl_algo_names()) {
    all.push_back({a, ""});
    for (const auto& p : nccl_proto_names()) all.push_back({a, p});
  }
  for (const auto& p : nccl_proto_names()) all.push_back({"", p});
  const auto in = ramp<float>(4097, 1.f);
  float* buf = upload(in);
  for (const auto& o : all) {
    const std::string name = nccl_choice_name(o);
    auto c = NcclCommunicator::create(*boot_, 0, o);
    ASSERT_TRUE(c.ok()) << name << ": " << c.error().message();
    EXPECT_EQ(nccl_choice_name((*c)->options()), name);
    ASSERT_TRUE((*c)->native_allreduce(buf, buf, in.size(), DataType::kF32, ReduceOp::kSum).ok())
        << name;
    EXPECT_EQ(download(buf, in.size()), in) << name;
    EXPECT_EQ(std::getenv("NCCL_ALGO"), nullptr) << name;
    ASSERT_NE(std::getenv("NCCL_PROTO"), nullptr) << name;
    EXPECT_STREQ(std::getenv("NCCL_PROTO"), "^LL128") << name;
  }
  unsetenv("NCCL_PROTO");
}

// split(): a group of one, which outlives its parent; kUndefined gets nothing.
TEST_F(NcclGpuTest, SplitGivesAWorkingGroupOrNothing) {
  auto c = NcclCommunicator::create(*boot_, 0, {});
  ASSERT_TRUE(c.ok()) << c.error().message();
  auto none = (*c)->split(kUndefined, 0);
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_EQ(*none, nullptr);
  auto g = (*c)->split(3, 0);
  ASSERT_TRUE(g.ok()) << g.error().message();
  ASSERT_NE(*g, nullptr);
  Communicator& group = **g;
  EXPECT_EQ(group.size(), 1);
  EXPECT_EQ(group.rank(), 0);
  EXPECT_EQ(group.node_count(), 1);
  const auto in = ramp<float>(1001, 2.f);
  float* buf = upload(in);
  ASSERT_TRUE(group.native_allreduce(buf, buf, in.size(), DataType::kF32, ReduceOp::kSum).ok());
  EXPECT_EQ(download(buf, in.size()), in);
  c->reset();
  Status s = group.native_allreduce(buf, buf, in.size(), DataType::kF32, ReduceOp::kMax);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(download(buf, in.size()), in);
}

// Non-blocking batches (a send and a receive in one group) to itself, several in flight on a
// caller's stream, completed through wait_any; the generic form on the internal stream.
TEST_F(NcclGpuTest, BatchesOfSendsAndReceivesToItself) {
  auto c = NcclCommunicator::create(*boot_, 0, {});
  ASSERT_TRUE(c.ok()) << c.error().message();
  NcclCommunicator& nccl = **c;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const size_t n = (size_t{1} << 20) + 3;
  std::vector<std::vector<int32_t>> want;
  std::vector<int32_t*> outs;
  std::vector<Request> reqs;
  for (int b = 0; b < 3; ++b) {
    want.push_back(ramp<int32_t>(n, 10 * b));
    int32_t* in = upload(want.back());
    outs.push_back(upload(std::vector<int32_t>(n, -1)));
    const std::vector<P2pOp> ops = {P2pOp::send(0, b, in, n * 4),
                                    P2pOp::recv(0, b, outs.back(), n * 4)};
    for (Request& r : nccl.start_batch_on(ops, stream)) reqs.push_back(r);
  }
  for (size_t k = 0; k < reqs.size(); ++k) {
    auto i = wait_any(reqs, nccl.deadline_from_now());
    ASSERT_TRUE(i.ok()) << i.error().message();
  }
  for (size_t b = 0; b < outs.size(); ++b) EXPECT_EQ(download(outs[b], n), want[b]) << b;

  int32_t* out = upload(std::vector<int32_t>(n, 0));
  const std::vector<P2pOp> ops = {P2pOp::send(0, 7, outs[1], n * 4), P2pOp::recv(0, 7, out, n * 4)};
  auto generic = nccl.start_batch(ops);
  ASSERT_TRUE(wait_all(generic).ok());
  EXPECT_EQ(download(out, n), want[1]);

  Status bad = nccl.isend_on(0, -1, out, 4, stream).wait();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kInvalidInput);
  cudaStreamDestroy(stream);
}

// A receive nobody sends times out (the communicator is aborted, nothing hangs); one pending
// when its communicator is destroyed fails at once.
TEST_F(NcclGpuTest, UnmatchedReceivesTimeOutOrAreCancelled) {
  int32_t* buf = upload(std::vector<int32_t>(16, 0));
  {
    auto c = NcclCommunicator::create(*boot_, 0, {});
    ASSERT_TRUE(c.ok()) << c.error().message();
    (*c)->set_timeout(std::chrono::milliseconds(500));
    const auto start = Clock::now();
    Status s = (*c)->irecv(0, 1, buf, 64).wait();
    ASSERT_FALSE(s.ok());
    // kTimeout; or internal when NCCL itself refuses a lone receive from its own rank.
    EXPECT_TRUE(s.error().kind() == ErrorKind::kTimeout || s.error().kind() == ErrorKind::kInternal)
        << s.error().message();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
  }
  auto c = NcclCommunicator::create(*boot_, 0, {});
  ASSERT_TRUE(c.ok()) << c.error().message();
  Request r = (*c)->irecv(0, 1, buf, 64);
  if (r.test()) GTEST_SKIP() << "NCCL finished a lone receive from its own rank at once";
  c->reset();
  ASSERT_TRUE(r.test());
  Status s = r.wait();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("destroyed"), std::string::npos) << s.error().message();
}

#else

TEST(NcclGpuTest, NeedsNccl) { GTEST_SKIP() << "this dltune was built without NCCL"; }

#endif

}  // namespace
}  // namespace dltune::comm
