// Following what the ranks report while they run: a thread that tails a JSON-lines file (the
// ranks append one object per line and flush) and hands each complete object to a handler.
// The launcher turns these events into its progress display (common/progress.h): the
// collective sweep's sizes, the trial search's rounds and candidates, the training's steps.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace dltune::launcher {

class EventFollower {
 public:
  using Handler = std::function<void(const nlohmann::json& event)>;
  // Starts following `path` (which need not exist yet) from its current end when `from_end`
  // (a file that is appended to, as a resumed run's metrics), else from its start; a file
  // replaced by a shorter one is followed from its start. Lines that are incomplete or not
  // JSON objects are skipped. The handler runs on the follower's thread.
  EventFollower(std::string path, Handler handler, bool from_end = true);
  ~EventFollower();  // stops
  EventFollower(const EventFollower&) = delete;
  EventFollower& operator=(const EventFollower&) = delete;
  // Reads what was appended since the last poll, hands it over, and ends the thread.
  void stop();

 private:
  void loop();
  std::string path_;
  Handler handler_;
  bool from_end_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dltune::launcher
