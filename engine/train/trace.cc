#include "engine/train/trace.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/json_input.h"
#include "common/paths.h"

namespace dltune::engine {

using nlohmann::json;

namespace {
std::string part_path(const std::string& trace_path, int rank) {
  return trace_path + ".rank" + std::to_string(rank);
}
}  // namespace

TraceWriter::~TraceWriter() { (void)close(); }

Result<std::unique_ptr<TraceWriter>> TraceWriter::open(const std::string& trace_path, int rank) {
  auto w = std::make_unique<TraceWriter>();
  if (trace_path.empty()) return w;
  w->path_ = part_path(trace_path, rank);
  w->f_ = std::fopen(w->path_.c_str(), "w");
  if (!w->f_) return errno_error("creating trace file '" + w->path_ + "'");
  w->rank_ = rank;
  w->steady0_ = Clock::now();
  w->wall0_us_ = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  std::fputs("[\n", w->f_);
  return w;
}

void TraceWriter::complete(const std::string& name, int tid, Clock::time_point begin,
                           Clock::time_point end, int64_t step) {
  if (!f_) return;
  // Whole microseconds: exact as JSON numbers, and back-to-back events stay back to back.
  auto us = [&](Clock::time_point t) {
    return wall0_us_ + std::chrono::round<std::chrono::microseconds>(t - steady0_).count();
  };
  json e = {{"name", name},    {"ph", "X"},
            {"ts", us(begin)}, {"dur", std::max<int64_t>(0, us(end) - us(begin))},
            {"pid", rank_},    {"tid", tid}};
  if (step >= 0) e["args"] = {{"step", step}};
  std::fputs(first_ ? "" : ",\n", f_);
  std::fputs(e.dump().c_str(), f_);
  first_ = false;
}

Status TraceWriter::close() {
  if (!f_) return ok_status();
  const bool ok = std::fputs("\n]\n", f_) >= 0;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok || !closed) return io_error("writing trace file '" + path_ + "'");
  return ok_status();
}

std::string bucket_event_name(size_t index, std::string_view algorithm, uint64_t bytes) {
  char mb[32];
  std::snprintf(mb, sizeof mb, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return "allreduce bucket " + std::to_string(index) + " (" + std::string(algorithm) + ", " + mb +
         ")";
}

Status merge_traces(const std::string& trace_path, int ranks) {
  if (ranks < 1) return invalid_input("merge_traces: ranks must be at least 1");
  json events = json::array();
  std::vector<std::string> parts;
  for (int r = 0; r < ranks; ++r) {
    const std::string part = part_path(trace_path, r);
    if (!std::filesystem::exists(part)) continue;
    auto text = paths::read_file(part);
    if (!text) return text.error();
    json list = parse_json_bounded(*text).value_or(json());
    if (list.is_null()) list = parse_json_bounded(*text + "\n]").value_or(json());  // no "]" yet
    if (!list.is_array())
      return invalid_input("trace part '" + part + "' is not a JSON array of trace events");
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r},
                      {"tid", 0},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    for (auto& e : list) {
      if (!e.is_object() || !e.contains("ts") || !e["ts"].is_number())
        return invalid_input("trace part '" + part + "' holds an event without a numeric ts");
      events.push_back(std::move(e));
    }
    parts.push_back(part);
  }
  if (parts.empty())
    return not_found("no trace parts " + part_path(trace_path, 0) + " .. .rank" +
                     std::to_string(ranks - 1) + " to merge");
  double t0 = -1.0;
  for (const auto& e : events)
    if (e.contains("ts") && (t0 < 0 || e["ts"].get<double>() < t0)) t0 = e["ts"].get<double>();
  for (auto& e : events)
    if (e.contains("ts")) e["ts"] = e["ts"].get<double>() - t0;
  std::stable_sort(events.begin(), events.end(), [](const json& a, const json& b) {
    const bool ma = !a.contains("ts"), mb = !b.contains("ts");  // metadata first
    if (ma || mb) return ma && !mb;
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  const json out = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  DLTUNE_TRY(paths::write_file_atomic(trace_path, out.dump()));
  for (const auto& part : parts) std::filesystem::remove(part);
  // Parts of ranks the job no longer has (it continued on fewer): an earlier attempt's, stale.
  std::error_code ec;
  for (int r = ranks; std::filesystem::exists(part_path(trace_path, r), ec); ++r)
    std::filesystem::remove(part_path(trace_path, r), ec);
  return ok_status();
}

}  // namespace dltune::engine
