// Chrome trace events of training steps (chrome://tracing, Perfetto).
//
// Each rank writes its own part, <trace_path>.rank<R>, in the JSON array format: "[" then one
// complete event per line ({"name", "ph": "X", "ts", "dur" in microseconds, "pid": rank,
// "tid": 0 compute / 1 communication, "args"}) separated by commas, then "]" at close. A part
// a crashed rank left without its "]" still merges. After the job, merge_traces() joins the
// parts into trace_path.
//
// Timestamps: whole wall-clock microseconds (system_clock at open, advanced by steady_clock), so
// parts written on different hosts line up as well as their clocks do; the merge shifts them
// so the first event is at 0.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/result.h"

namespace dltune::engine {

inline constexpr int kTraceCompute = 0;  // tid of compute events
inline constexpr int kTraceComm = 1;     // tid of communication events

class TraceWriter {
 public:
  using Clock = std::chrono::steady_clock;

  TraceWriter() = default;  // disabled: every call is a no-op
  ~TraceWriter();           // close()s, ignoring errors
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Opens (truncating) <trace_path>.rank<rank>; trace_path "" gives a disabled writer.
  // Error: io_error naming the file when it cannot be created.
  static Result<std::unique_ptr<TraceWriter>> open(const std::string& trace_path, int rank);

  bool enabled() const { return f_ != nullptr; }
  // Whether events of training step `step` (0-based) are recorded: the first 200 steps, then
  // every 10th, so long runs keep a bounded trace.
  static bool traced_step(int64_t step) { return step < 200 || step % 10 == 0; }

  // Records a complete event [begin, end) named `name` on thread `tid`, with `step` (-1 =
  // none) as its argument. No-op when disabled.
  void complete(const std::string& name, int tid, Clock::time_point begin, Clock::time_point end,
                int64_t step = -1);
  // Writes the closing "]" and closes the file; io_error when the write fails.
  Status close();

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
  int rank_ = 0;
  bool first_ = true;
  Clock::time_point steady0_;
  int64_t wall0_us_ = 0;
};

// "allreduce bucket 3 (ring, 1.2 MB)".
std::string bucket_event_name(size_t index, std::string_view algorithm, uint64_t bytes);

// Merges <trace_path>.rank0 .. .rank<ranks-1> into trace_path as
// {"traceEvents": [...], "displayTimeUnit": "ms"}, with a process_name metadata event
// "rank N" per rank, events sorted by time and shifted so the earliest starts at 0; then
// removes the parts, and those of ranks `ranks`, `ranks` + 1, ... that an earlier attempt of a
// job now on fewer ranks left. Parts that do not exist are skipped (a rank that died before its
// first step); the output is written atomically. Errors: invalid_input for ranks < 1;
// not_found when no part exists; invalid_input naming a part that is not a JSON event array;
// io_error when the output cannot be written. On error nothing is written and no part is
// removed.
Status merge_traces(const std::string& trace_path, int ranks);

}  // namespace dltune::engine
