// run_sweep and its formats over the in-process ThreadCommunicator: every candidate at every
// size, the bounds of each size, identical reports on every rank, DESIGN.md's JSON, bad input.
#include "comm/bench_sweep.h"

#include <mutex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "comm/thread_communicator.h"

namespace dltune::comm {
namespace {

SweepOptions small_sweep() {
  SweepOptions o;
  o.algorithms = {Algorithm::kRecursiveDoubling, Algorithm::kShm, Algorithm::kRing};
  o.min_bytes = 4;
  o.max_bytes = 8 << 10;
  o.rounds = 3;
  o.round_ms = 0.2;
  return o;
}

// Runs the sweep on `ranks` threads; returns every rank's report (JSON and table).
struct SweepRun {
  std::vector<SweepReport> reports;
  std::vector<std::string> json;
  Status status;
};

SweepRun sweep_on_threads(int ranks, const SweepOptions& options) {
  SweepRun out;
  out.reports.resize(static_cast<size_t>(ranks));
  out.json.resize(static_cast<size_t>(ranks));
  std::mutex mu;
  out.status = spawn(ranks, [&](Communicator& c) -> Status {
    auto rep = run_sweep(c, options);
    if (!rep) return rep.error();
    std::lock_guard<std::mutex> lock(mu);
    out.json[static_cast<size_t>(c.rank())] = format_json(*rep);
    out.reports[static_cast<size_t>(c.rank())] = std::move(*rep);
    return ok_status();
  });
  return out;
}

TEST(BenchSweep, MeasuresEveryAlgorithmAtEverySizeWithItsBounds) {
  const SweepOptions o = small_sweep();
  SweepRun r = sweep_on_threads(2, o);
  ASSERT_TRUE(r.status.ok()) << r.status.error().message();
  const SweepReport& rep = r.reports[0];
  EXPECT_EQ(rep.ranks, 2);
  EXPECT_EQ(rep.nodes, 1);
  EXPECT_GT(rep.alpha_us, 0);
  EXPECT_GT(rep.pingpong_gbs, 0);
  const std::vector<size_t> sizes{4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  ASSERT_EQ(rep.bounds.size(), sizes.size());
  ASSERT_EQ(rep.results.size(), sizes.size() * o.algorithms.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const SweepBound& b = rep.bounds[i];
    EXPECT_EQ(b.bytes, sizes[i]);
    EXPECT_GT(b.alpha_beta_us, 0) << b.bytes;
    EXPECT_GT(b.membw_us, 0) << b.bytes;
    EXPECT_GT(b.pingpong_us, 0) << b.bytes;
    // Two ranks on one node: the line exchange runs up to 4 KiB.
    EXPECT_EQ(b.exchange_us > 0, b.bytes <= 4096) << b.bytes;
    for (Algorithm a : o.algorithms) {
      const SweepPoint* p = rep.find(b.bytes, a);
      ASSERT_NE(p, nullptr) << algorithm_name(a) << " at " << b.bytes;
      EXPECT_EQ(p->samples_us.size(), 3u);
      EXPECT_GT(p->median_us, 0);
      EXPECT_LE(p->p10_us, p->median_us);
      EXPECT_LE(p->median_us, p->p90_us);
      EXPECT_GT(p->busbw_gbs, 0);
    }
    const SweepPoint* best = rep.best(b.bytes);
    ASSERT_NE(best, nullptr);
    for (Algorithm a : o.algorithms) EXPECT_LE(best->median_us, rep.find(b.bytes, a)->median_us);
  }
  // Every rank reports the slowest rank's times: identical reports.
  EXPECT_EQ(r.json[1], r.json[0]);
}

TEST(BenchSweep, JsonHasTheShapeDesignGives) {
  SweepOptions o = small_sweep();
  o.max_bytes = 16;
  SweepRun r = sweep_on_threads(2, o);
  ASSERT_TRUE(r.status.ok()) << r.status.error().message();
  const auto j = nlohmann::json::parse(r.json[0]);
  EXPECT_EQ(j.at("ranks"), 2);
  EXPECT_EQ(j.at("nodes"), 1);
  ASSERT_EQ(j.at("results").size(), 3u * 3u);
  for (const auto& e : j.at("results")) {
    for (const char* k : {"bytes", "algo", "median_us", "p10_us", "p90_us", "busbw_gbs"}) {
      EXPECT_TRUE(e.contains(k)) << k;
    }
  }
  EXPECT_EQ(j.at("results")[0].at("algo"), "rd");
  ASSERT_EQ(j.at("bounds").size(), 3u);
  for (const auto& e : j.at("bounds")) {
    for (const char* k : {"bytes", "alpha_beta_us", "membw_us", "exchange_us"}) {
      EXPECT_TRUE(e.contains(k)) << k;
    }
  }
  const std::string table = format_table(r.reports[0]);
  EXPECT_NE(table.find("2 ranks on 1 node(s)"), std::string::npos) << table;
  EXPECT_NE(table.find("exchange"), std::string::npos) << table;
}

// With private buffers every algorithm is measured twice, on the node-shared buffer and on a
// private one, as separate points; each bound states the traffic it stands for, and the JSON
// carries the buffer, the per-round samples and the bound's traffic.
TEST(BenchSweep, PrivateBuffersAreCandidatesOfTheirOwnAndBoundsStateTheirTraffic) {
  SweepOptions o = small_sweep();
  o.max_bytes = 256;
  o.private_buffers = true;
  SweepRun r = sweep_on_threads(2, o);
  ASSERT_TRUE(r.status.ok()) << r.status.error().message();
  const SweepReport& rep = r.reports[0];
  ASSERT_EQ(rep.results.size(), rep.bounds.size() * o.algorithms.size() * 2);
  for (const SweepBound& b : rep.bounds) {
    EXPECT_EQ(b.read_bytes, b.bytes);
    EXPECT_EQ(b.write_bytes, b.bytes);
    EXPECT_GT(b.membw_us, 0) << b.bytes;
    EXPECT_GT(b.copy_us, 0) << b.bytes;
    for (Algorithm a : o.algorithms) {
      const SweepPoint* shared = rep.find(b.bytes, a, Buffer::kShared);
      const SweepPoint* priv = rep.find(b.bytes, a, Buffer::kPrivate);
      ASSERT_NE(shared, nullptr);
      ASSERT_NE(priv, nullptr);
      EXPECT_NE(shared, priv);
      EXPECT_EQ(priv->samples_us.size(), 3u);
    }
    ASSERT_NE(rep.best(b.bytes, {}, Buffer::kPrivate), nullptr);
    EXPECT_EQ(rep.best(b.bytes, {}, Buffer::kPrivate)->buffer, Buffer::kPrivate);
  }
  const auto j = nlohmann::json::parse(r.json[0]);
  size_t priv = 0;
  for (const auto& e : j.at("results")) {
    priv += e.at("buffer") == "private" ? 1 : 0;
    EXPECT_EQ(e.at("samples_us").size(), 3u);
  }
  EXPECT_EQ(priv, j.at("results").size() / 2);
  for (const auto& e : j.at("bounds")) {
    EXPECT_EQ(e.at("read_bytes"), e.at("bytes"));
    EXPECT_EQ(e.at("write_bytes"), e.at("bytes"));
    EXPECT_TRUE(e.at("in_cache").is_boolean());
    EXPECT_GT(e.at("copy_us").get<double>(), 0);
  }
  const std::string table = format_table(rep);
  EXPECT_NE(table.find("ring (private)"), std::string::npos) << table;
  EXPECT_NE(table.find("each rank reading N and writing N bytes"), std::string::npos) << table;
}

// One rank has no peer: no ping-pong, no exchange, but every algorithm still runs.
TEST(BenchSweep, OneRankAndThreeRanksHaveNoLineExchange) {
  SweepOptions o = small_sweep();
  o.max_bytes = 64;
  for (int ranks : {1, 3}) {
    SweepRun r = sweep_on_threads(ranks, o);
    ASSERT_TRUE(r.status.ok()) << r.status.error().message();
    const SweepReport& rep = r.reports[0];
    EXPECT_EQ(rep.results.size(), 5u * 3u);
    for (const SweepBound& b : rep.bounds) EXPECT_EQ(b.exchange_us, 0) << ranks;
    EXPECT_EQ(nlohmann::json::parse(r.json[0]).at("bounds")[0].contains("exchange_us"), false);
  }
}

TEST(BenchSweep, RejectsBadSizesAndEmptyLists) {
  auto bad = [](SweepOptions o) {
    SweepRun r = sweep_on_threads(2, o);
    EXPECT_FALSE(r.status.ok());
    return r.status.ok() ? std::string() : r.status.error().message();
  };
  SweepOptions o = small_sweep();
  o.min_bytes = 2;
  EXPECT_NE(bad(o).find("4 <= min-bytes <= max-bytes"), std::string::npos);
  o = small_sweep();
  o.max_bytes = 2;
  EXPECT_NE(bad(o).find("min-bytes"), std::string::npos);
  o = small_sweep();
  o.max_bytes = size_t{2} << 30;
  EXPECT_NE(bad(o).find("limited to 1 GiB"), std::string::npos);
  o = small_sweep();
  o.algorithms.clear();
  EXPECT_NE(bad(o).find("no algorithm"), std::string::npos);
  o = small_sweep();
  o.algorithms = {Algorithm::kNative};  // the thread communicator has no native allreduce
  EXPECT_NE(bad(o).find("none of the requested algorithms works here"), std::string::npos);
}

}  // namespace
}  // namespace dltune::comm
