// Chrome traces: the per-rank parts a training run writes and merge_traces().
#include "engine/train/trace.h"

#include <filesystem>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/paths.h"
#include "engine/data/dataset.h"
#include "engine/train/trainer.h"

namespace dltune::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct TempDir {
  fs::path dir =
      fs::temp_directory_path() / ("dltune-trace-test-" + std::to_string(getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::create_directories(dir); }
  ~TempDir() { fs::remove_all(dir); }
  std::string path(const char* name) const { return (dir / name).string(); }
};

json read_json(const std::string& path) {
  auto text = paths::read_file(path);
  EXPECT_TRUE(text.ok());
  return json::parse(text.ok() ? *text : "null", nullptr, false);
}

// Trains `steps` steps of a small model as rank 0 of 1, tracing to `trace_path`.
void train_traced(const std::string& trace_path, int64_t steps) {
  TrainConfig c;
  c.model = "mlp";
  c.train_size = 256;
  c.heldout_size = 64;
  c.global_batch = 32;
  c.steps = steps;
  c.eval_every = steps;
  c.trace_path = trace_path;
  Dataset train = synthetic_digits(c.train_size, 1);
  Dataset held = synthetic_digits(c.heldout_size, 2);
  auto t = Trainer::create(c, nullptr, train, &held);
  ASSERT_TRUE(t.ok()) << t.error().message();
  MetricsWriter none;
  auto s = (*t)->run(none);
  ASSERT_TRUE(s.ok()) << s.error().message();
}

TEST(Trace, StepsSampledFirst200ThenEvery10th) {
  EXPECT_TRUE(TraceWriter::traced_step(0));
  EXPECT_TRUE(TraceWriter::traced_step(199));
  EXPECT_FALSE(TraceWriter::traced_step(201));
  EXPECT_TRUE(TraceWriter::traced_step(210));
  EXPECT_EQ(bucket_event_name(3, "ring", 1200000), "allreduce bucket 3 (ring, 1.2 MB)");
}

TEST(Trace, TrainingPartsMergeIntoOneChromeTrace) {
  TempDir t;
  const std::string trace = t.path("trace.json");
  train_traced(trace, 5);  // rank 0's part, from a real run
  // Rank 1's part: written by hand, and cut short (no closing "]") as a killed rank leaves it.
  {
    auto w = TraceWriter::open(trace, 1);
    ASSERT_TRUE(w.ok());
    const auto now = TraceWriter::Clock::now();
    (*w)->complete("forward", kTraceCompute, now, now + std::chrono::milliseconds(2), 0);
    (*w)->complete("allreduce bucket 0 (rd, 0.1 MB)", kTraceComm, now,
                   now + std::chrono::milliseconds(1), 0);
  }
  auto text = paths::read_file(trace + ".rank1");
  ASSERT_TRUE(text.ok());
  ASSERT_TRUE(paths::write_file_atomic(trace + ".rank1", text->substr(0, text->rfind(']'))).ok());

  ASSERT_TRUE(merge_traces(trace, 2).ok());
  EXPECT_FALSE(fs::exists(trace + ".rank0"));
  EXPECT_FALSE(fs::exists(trace + ".rank1"));
  const json j = read_json(trace);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  const json& events = j["traceEvents"];
  ASSERT_TRUE(events.is_array());

  std::map<int, std::string> process_names;
  std::map<int, std::map<std::string, int>> names;                // pid -> name -> count
  std::map<int, std::vector<std::pair<double, double>>> compute;  // pid -> [begin, end)
  double min_ts = 1e300;
  for (const json& e : events) {
    if (e["ph"] == "M") {
      EXPECT_EQ(e["name"], "process_name");
      process_names[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e.dump();
    const int pid = e["pid"].get<int>();
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    EXPECT_GE(dur, 0.0);
    min_ts = std::min(min_ts, ts);
    ++names[pid][e["name"].get<std::string>()];
    if (e["tid"] == kTraceCompute) compute[pid].emplace_back(ts, ts + dur);
  }
  EXPECT_EQ(process_names, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  EXPECT_DOUBLE_EQ(min_ts, 0.0);
  // Rank 0: one forward, backward and optimizer event per step, one evaluation.
  EXPECT_EQ(names[0]["forward"], 5);
  EXPECT_EQ(names[0]["backward"], 5);
  EXPECT_EQ(names[0]["optimizer"], 5);
  EXPECT_EQ(names[0]["eval"], 1);
  EXPECT_EQ(names[1]["forward"], 1);
  EXPECT_EQ(names[1]["allreduce bucket 0 (rd, 0.1 MB)"], 1);
  // Compute events of a rank never overlap (sorted by start, each ends before the next starts).
  for (auto& [pid, spans] : compute) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      EXPECT_LE(spans[i - 1].second, spans[i].first) << "rank " << pid << " event " << i;
  }
  // Events are sorted by time after the metadata.
  double prev = -1.0;
  for (const json& e : events)
    if (e.contains("ts")) {
      EXPECT_GE(e["ts"].get<double>(), prev);
      prev = e["ts"].get<double>();
    }
}

// A job that continued on fewer ranks: the parts its earlier attempt's higher ranks left are
// removed with the merge, and not merged (the trace is the ranks the job ended with).
TEST(Trace, MergeRemovesThePartsOfRanksTheJobNoLongerHas) {
  TempDir t;
  const std::string trace = t.path("trace.json");
  const std::string event = "[{\"name\": \"step\", \"ph\": \"X\", \"ts\": 5, \"dur\": 1}]";
  for (int r = 0; r < 3; ++r)
    ASSERT_TRUE(paths::write_file_atomic(trace + ".rank" + std::to_string(r), event).ok());
  ASSERT_TRUE(merge_traces(trace, 1).ok());
  EXPECT_FALSE(fs::exists(trace + ".rank1"));
  EXPECT_FALSE(fs::exists(trace + ".rank2"));
  auto text = paths::read_file(trace);
  ASSERT_TRUE(text.ok());
  const json merged = json::parse(*text);
  int ranks = 0;
  for (const json& e : merged["traceEvents"]) ranks += e.value("name", "") == "process_name";
  EXPECT_EQ(ranks, 1);
}

TEST(Trace, MergeErrors) {
  TempDir t;
  const std::string trace = t.path("trace.json");
  auto none = merge_traces(trace, 2);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind(), ErrorKind::kNotFound);
  EXPECT_FALSE(merge_traces(trace, 0).ok());
  ASSERT_TRUE(paths::write_file_atomic(trace + ".rank0", "{\"not\": \"a list\"}").ok());
  auto bad = merge_traces(trace, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(bad.error().message().find("trace.json.rank0"), std::string::npos);
  EXPECT_FALSE(fs::exists(trace));            // nothing written
  EXPECT_TRUE(fs::exists(trace + ".rank0"));  // nothing removed
  auto unwritable = TraceWriter::open(t.path("no/such/dir/trace.json"), 0);
  ASSERT_FALSE(unwritable.ok());
}

}  // namespace
}  // namespace dltune::engine
