// How `dltune launch` shows what its ranks report while they run (common/progress.h): each
// kind of rank event becomes a status of the current phase, and for scripts (--json) a status
// event that carries the rank event's figures.
//   collective sweep (dltune-tune-rank --progress): "size 3 of 8 (1 MiB): ring, rd, tree"
//   trial search (dltune-worker trial --progress): "round 1 of 3, candidate 5 of 12, step 2 of
//     4: b64 weak bucket=1MiB overlap; leading b32 weak ... at 4,100 samples/s" (the leader's
//     mean rate so far: it settles, and may fall, as the leader's steps accrue)
//   training start-up (metrics.jsonl "status" events): "generating 18000 samples"
#pragma once

#include <atomic>
#include <chrono>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/progress.h"
#include "launcher/flow/event_follower.h"

namespace dltune::launcher {

// The status line of one rank event; "" for events that change nothing on screen.
std::string status_text(const nlohmann::json& event);

// Shows `event` on `progress`: its status_text() as the phase's status (with the event's own
// fields for JSON), nothing when the text is empty.
void show_rank_event(Progress& progress, const nlohmann::json& event);

// Tails a metrics.jsonl file (engine/metrics.h) on a thread and feeds the progress display
// until stop(): steps as progress updates, evaluations as updates and (JSON) "eval" events,
// the ranks' start-up "status" events as the phase's status. Lines that are not complete or
// not JSON are skipped; a file that is appended to (a resumed run) is followed from its end.
class MetricsFollower {
 public:
  MetricsFollower(std::string path, long total_steps, Progress* progress);
  void stop() { follower_.stop(); }
  // When the first step event was seen (the follower's clock, within its polling interval);
  // nullopt before one. Call after stop(), or accept a value that lags.
  std::optional<std::chrono::steady_clock::time_point> first_step_at() const;

 private:
  void on_event(const nlohmann::json& e);
  ProgressState state_;
  Progress* progress_;
  std::atomic<int64_t> first_step_ns_{0};  // steady_clock since its epoch; 0: none yet
  EventFollower follower_;                 // last: its thread uses the members above
};

}  // namespace dltune::launcher
