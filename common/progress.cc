#include "common/progress.h"

#include <cmath>

#include <sys/ioctl.h>
#include <unistd.h>

#include "common/env.h"

namespace dltune {
namespace {

using Clock = std::chrono::steady_clock;

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

Progress::Progress(Mode mode, FILE* out) : mode_(mode), out_(out), phase_start_(Clock::now()) {}

Progress::~Progress() { finish(); }

void Progress::phase(const std::string& name) {
  clear_line();
  phase_ = name;
  phase_start_ = Clock::now();
  last_plain_step_ = -1;
  if (mode_ == Mode::kJson) {
    std::fprintf(out_, "{\"event\":\"phase\",\"phase\":\"%s\"}\n", json_escape(name).c_str());
  } else if (mode_ == Mode::kPlain) {
    std::fprintf(out_, "dltune: %s\n", name.c_str());
  }
  std::fflush(out_);
}

double Progress::eta_seconds(const ProgressState& s) const {
  if (s.total <= 0 || s.step <= 0) return -1;
  const double elapsed = std::chrono::duration<double>(Clock::now() - phase_start_).count();
  return elapsed * static_cast<double>(s.total - s.step) / static_cast<double>(s.step);
}

void Progress::update(const ProgressState& s) {
  const auto now = Clock::now();
  switch (mode_) {
    case Mode::kQuiet:
      return;
    case Mode::kJson:
      std::fprintf(out_,
                   "{\"event\":\"progress\",\"phase\":\"%s\",\"step\":%ld,\"total\":%ld,"
                   "\"loss\":%.6g,\"samples_per_s\":%.6g,\"accuracy\":%.6g,\"eta_s\":%.3g}\n",
                   json_escape(phase_).c_str(), s.step, s.total, s.loss, s.samples_per_s,
                   s.accuracy, eta_seconds(s));
      break;
    case Mode::kTerminal:
      if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && s.step != s.total) return;
      std::fprintf(out_, "\r\033[K%s",
                   render_line(phase_, s, eta_seconds(s), terminal_width(out_) - 1).c_str());
      drawn_ = true;
      break;
    case Mode::kPlain: {
      const long tenth = s.total > 0 ? std::max(1L, s.total / 10) : 0;
      // A step already printed is not printed again (the end is often reported twice: by
      // the last progress event and by the run's completion).
      const bool due = s.step != last_plain_step_ &&
                       (last_plain_step_ < 0 || s.step == s.total ||
                        (tenth > 0 && s.step / tenth != last_plain_step_ / tenth) ||
                        now - last_draw_ >= std::chrono::seconds(10));
      if (!due) return;
      std::fprintf(out_, "dltune: %s\n", render_line(phase_, s, eta_seconds(s), 200).c_str());
      last_plain_step_ = s.step;
      break;
    }
  }
  last_draw_ = now;
  std::fflush(out_);
}

void Progress::message(const std::string& line) {
  clear_line();
  if (mode_ == Mode::kQuiet) return;
  if (mode_ == Mode::kJson) {
    std::fprintf(out_, "{\"event\":\"message\",\"text\":\"%s\"}\n", json_escape(line).c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

void Progress::clear_line() {
  if (mode_ == Mode::kTerminal && drawn_) {
    std::fprintf(out_, "\r\033[K");
    drawn_ = false;
  }
}

void Progress::finish() {
  clear_line();
  std::fflush(out_);
}

}  // namespace dltune
