#include "common/progress.h"

#include <atomic>
#include <cmath>

#include <sys/ioctl.h>
#include <unistd.h>

#include "common/env.h"
#include "common/log.h"

namespace dltune {
namespace {

using Clock = std::chrono::steady_clock;

// The terminal line drawn by any display, for break_line_from_signal(): the descriptor it is
// on (-1 none) and whether drawing has stopped for good (a signal broke the line).
std::atomic<int> g_drawn_fd{-1};
std::atomic<bool> g_broken{false};

std::string format_duration(double s) {
  if (s < 0 || !std::isfinite(s)) return "--:--";
  const long t = std::lround(s);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", t / 60, t % 60);
  }
  return buf;
}

int terminal_width(FILE* out) {
  struct winsize ws {};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
  return 100;
}

// The log line hook (common/log.h): erases the drawn display line, which the next redraw
// (at most kHeartbeatS later) puts back below the log line.
void clear_drawn_line() {
  const int fd = g_drawn_fd.load();
  if (fd >= 0 && !g_broken.load()) {
    const ssize_t unused = ::write(fd, "\r\033[K", 4);
    (void)unused;
  }
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Rounded to the millisecond, for JSON.
double ms3(double s) { return std::round(s * 1000.0) / 1000.0; }

}  // namespace

std::string json_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size() + 8);
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\r':
        o += "\\r";
        break;
      case '\t':
        o += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o.push_back(static_cast<char>(c));
        }
    }
  }
  return o;
}

Progress::Mode Progress::detect(bool json, FILE* out) {
  if (json) return Mode::kJson;
  if (env::get(env::kNoColor) == "1") return Mode::kPlain;
  return ::isatty(::fileno(out)) ? Mode::kTerminal : Mode::kPlain;
}

std::string Progress::render_line(const std::string& phase, const ProgressState& s, double eta,
                                  int width) {
  char buf[256];
  std::string line = phase;
  if (s.total > 0) {
    std::snprintf(buf, sizeof buf, "  step %ld/%ld (%3.0f%%)", s.step, s.total,
                  100.0 * static_cast<double>(s.step) / static_cast<double>(s.total));
  } else {
    std::snprintf(buf, sizeof buf, "  step %ld", s.step);
  }
  line += buf;
  if (s.loss >= 0) {
    std::snprintf(buf, sizeof buf, "  loss %.4f", s.loss);
    line += buf;
  }
  if (s.accuracy >= 0) {
    std::snprintf(buf, sizeof buf, "  acc %.1f%%", 100.0 * s.accuracy);
    line += buf;
  }
  if (s.samples_per_s > 0) {
    std::snprintf(buf, sizeof buf, "  %.0f samples/s", s.samples_per_s);
    line += buf;
  }
  line += "  ETA " + format_duration(eta);
  if (static_cast<int>(line.size()) > width) line.resize(static_cast<size_t>(std::max(0, width)));
  return line;
}

std::string Progress::render_status(const std::string& phase, const std::string& status,
                                    double elapsed_s, int width, double total_s) {
  std::string clock = "  " + format_duration(elapsed_s);
  if (total_s >= elapsed_s + 1) clock += " (launch " + format_duration(total_s) + ")";
  std::string head = phase + (status.empty() ? "" : ": ");
  const int room = width - static_cast<int>(head.size() + clock.size());
  std::string body = status;
  if (room < static_cast<int>(body.size())) {
    // Its start (what is being done, the counts) and its end (the leader so far), cut between.
    const size_t keep = room > 3 ? static_cast<size_t>(room - 3) : 0;
    const size_t front = (keep + 1) / 2, back = keep - front;
    body = keep > 0 ? body.substr(0, front) + "..." + body.substr(body.size() - back) : "";
  }
  std::string line = head + body + clock;
  if (static_cast<int>(line.size()) > width) line.resize(static_cast<size_t>(std::max(0, width)));
  return line;
}

Progress::Progress(Mode mode, FILE* out, bool heartbeat)
    : mode_(mode), out_(out), start_(Clock::now()), phase_start_(start_) {
  if (mode_ == Mode::kTerminal) set_log_line_hook(&clear_drawn_line);
  if (heartbeat && (mode_ == Mode::kTerminal || mode_ == Mode::kJson || mode_ == Mode::kPlain)) {
    beat_ = std::thread([this] { heartbeat_loop(); });
  }
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (beat_.joinable()) beat_.join();
  finish();
}

double Progress::elapsed_s() const { return seconds(Clock::now() - start_); }

double Progress::phase_elapsed_s() const { return seconds(Clock::now() - phase_start_); }

void Progress::print_json_locked(const std::string& event, nlohmann::json fields) {
  nlohmann::json j = {{"event", event}, {"t", ms3(elapsed_s())}};
  if (fields.is_object()) {
    for (auto& [k, v] : fields.items()) j[k] = v;
  }
  std::fprintf(out_, "%s\n", j.dump().c_str());
  std::fflush(out_);
  last_print_ = Clock::now();
}

void Progress::phase(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  clear_line_locked();
  phase_ = name;
  status_.clear();
  showing_state_ = false;
  active_ = true;
  phase_start_ = Clock::now();
  last_plain_step_ = -1;
  last_json_step_ = -1;
  first_step_ = -1;
  last_plain_status_.clear();
  if (mode_ == Mode::kJson) {
    print_json_locked("phase", {{"phase", name}});
  } else if (mode_ == Mode::kPlain) {
    std::fprintf(out_, "dltune: %s\n", name.c_str());
    last_print_ = Clock::now();
  } else if (mode_ == Mode::kTerminal) {
    draw_locked(true);
  }
  std::fflush(out_);
}

void Progress::status(const std::string& text, const nlohmann::json& fields) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool changed = text != status_ || showing_state_;
  status_ = text;
  showing_state_ = false;
  switch (mode_) {
    case Mode::kQuiet:
      return;
    case Mode::kJson: {
      nlohmann::json f = fields.is_object() ? fields : nlohmann::json::object();
      f["phase"] = phase_;
      f["text"] = text;
      print_json_locked("status", std::move(f));
      return;
    }
    case Mode::kTerminal:
      draw_locked(changed);
      return;
    case Mode::kPlain:
      if (text == last_plain_status_ || seconds(Clock::now() - last_print_) < kPlainStatusS) {
        return;
      }
      std::fprintf(out_, "dltune: %s: %s\n", phase_.c_str(), text.c_str());
      std::fflush(out_);
      last_plain_status_ = text;
      last_print_ = Clock::now();
      return;
  }
}

double Progress::eta_from(long first_step, double first_s, long step, double now_s, long total) {
  if (total <= 0 || first_step < 0 || step <= first_step || !(now_s > first_s)) return -1;
  const double per_step = (now_s - first_s) / static_cast<double>(step - first_step);
  return per_step * static_cast<double>(std::max(0L, total - step));
}

double Progress::eta_seconds(const ProgressState& s) const {
  return eta_from(first_step_, first_step_s_, s.step, elapsed_s(), s.total);
}

void Progress::draw_locked(bool force) {
  if (mode_ != Mode::kTerminal || g_broken.load()) return;
  const auto now = Clock::now();
  if (!force && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  const int width = terminal_width(out_) - 1;
  const std::string line =
      showing_state_ ? render_line(phase_, state_, eta_seconds(state_), width)
                     : render_status(phase_, status_, phase_elapsed_s(), width, elapsed_s());
  std::fprintf(out_, "\r\033[K%s", line.c_str());
  std::fflush(out_);
  drawn_ = true;
  g_drawn_fd.store(::fileno(out_));
  last_draw_ = now;
}

void Progress::update(const ProgressState& s) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Clock::now();
  state_ = s;
  state_s_ = elapsed_s();
  showing_state_ = true;
  if (first_step_ < 0 || s.step < first_step_) {  // the pace counts from the first step seen
    first_step_ = s.step;
    first_step_s_ = elapsed_s();
  }
  switch (mode_) {
    case Mode::kQuiet:
      return;
    case Mode::kJson: {
      if (s.step == last_json_step_) return;  // the end is often reported twice
      last_json_step_ = s.step;
      const double eta = eta_seconds(s);
      auto or_null = [](bool known, double v) {
        return known ? nlohmann::json(v) : nlohmann::json(nullptr);
      };
      print_json_locked("progress", {{"phase", phase_},
                                     {"step", s.step},
                                     {"total", s.total},
                                     {"loss", or_null(s.loss >= 0, s.loss)},
                                     {"samples_per_s", s.samples_per_s},
                                     {"accuracy", or_null(s.accuracy >= 0, s.accuracy)},
                                     {"eta_s", or_null(eta >= 0, ms3(eta))}});
      return;
    }
    case Mode::kTerminal:
      draw_locked(s.step == s.total);
      return;
    case Mode::kPlain: {
      const long tenth = s.total > 0 ? std::max(1L, s.total / 10) : 0;
      // A step already printed is not printed again (the end is often reported twice: by
      // the last progress event and by the run's completion).
      const bool due = s.step != last_plain_step_ &&
                       (last_plain_step_ < 0 || s.step == s.total ||
                        (tenth > 0 && s.step / tenth != last_plain_step_ / tenth) ||
                        seconds(now - last_print_) >= kPlainQuietS);
      if (!due) return;
      std::fprintf(out_, "dltune: %s\n", render_line(phase_, s, eta_seconds(s), 200).c_str());
      std::fflush(out_);
      last_plain_step_ = s.step;
      last_print_ = now;
      return;
    }
  }
}

void Progress::message(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ == Mode::kQuiet) return;
  if (mode_ == Mode::kJson) {
    print_json_locked("message", {{"text", line}});
    return;
  }
  clear_line_locked();
  std::fprintf(out_, "%s\n", line.c_str());
  last_print_ = Clock::now();
  if (mode_ == Mode::kTerminal && active_) draw_locked(true);
  std::fflush(out_);
}

void Progress::event(const std::string& name, const nlohmann::json& fields) {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ == Mode::kJson) print_json_locked(name, fields);
}

void Progress::clear_line_locked() {
  if (mode_ == Mode::kTerminal && drawn_) {
    if (!g_broken.load()) std::fprintf(out_, "\r\033[K");
    drawn_ = false;
    g_drawn_fd.store(-1);
  }
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  active_ = false;
  clear_line_locked();
  std::fflush(out_);
}

void Progress::heartbeat_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(250));
    if (stop_ || !active_) continue;
    const double quiet = seconds(Clock::now() - last_print_);
    if (mode_ == Mode::kTerminal && seconds(Clock::now() - last_draw_) >= kHeartbeatS) {
      draw_locked(true);
    } else if (mode_ == Mode::kJson && quiet >= kHeartbeatS) {
      print_json_locked("heartbeat", {{"phase", phase_}, {"phase_s", ms3(phase_elapsed_s())}});
    } else if (mode_ == Mode::kPlain && quiet >= kPlainQuietS) {
      // After a step, the status set before it is old news: say how long the next is taking.
      std::string what = status_;
      if (showing_state_) {
        what = "waiting for step " + std::to_string(state_.step + 1) +
               (state_.total > 0 ? "/" + std::to_string(state_.total) : "") + " (step " +
               std::to_string(state_.step) + " came " + format_duration(elapsed_s() - state_s_) +
               " ago)";
      }
      std::fprintf(out_, "dltune: %s%s (%s, launch %s)\n", phase_.c_str(),
                   what.empty() ? "" : (": " + what).c_str(),
                   format_duration(phase_elapsed_s()).c_str(),
                   format_duration(elapsed_s()).c_str());
      std::fflush(out_);
      last_print_ = Clock::now();
    }
  }
}

void Progress::break_line_from_signal() {
  const int fd = g_drawn_fd.exchange(-1);
  g_broken.store(true);
  if (fd >= 0) {
    const ssize_t unused = ::write(fd, "\n", 1);
    (void)unused;
  }
}

}  // namespace dltune
