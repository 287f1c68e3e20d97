#include "launcher/flow/event_follower.h"

#include <chrono>
#include <fstream>
#include <iterator>

namespace dltune::launcher {

EventFollower::EventFollower(std::string path, Handler handler, bool from_end)
    : path_(std::move(path)), handler_(std::move(handler)), from_end_(from_end) {
  thread_ = std::thread([this] { loop(); });
}

EventFollower::~EventFollower() { stop(); }

void EventFollower::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void EventFollower::loop() {
  std::string pending;
  std::streamoff offset = 0;
  if (from_end_) {
    if (std::ifstream probe(path_, std::ios::ate); probe) offset = probe.tellg();
  }
  while (true) {
    const bool last = stop_.load();
    if (std::ifstream f(path_); f) {
      f.seekg(0, std::ios::end);
      if (f.tellg() < offset) {  // replaced by a shorter file: follow the new one
        offset = 0;
        pending.clear();
      }
      f.seekg(offset);
      std::string chunk((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      offset += static_cast<std::streamoff>(chunk.size());
      pending += chunk;
      size_t nl;
      while ((nl = pending.find('\n')) != std::string::npos) {
        const std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) continue;
        if (handler_) handler_(j);
      }
    }
    if (last) return;
    for (int i = 0; i < 4 && !stop_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

}  // namespace dltune::launcher
