// Logging filtered by level (DLTUNE_DEBUG) and subsystem (DLTUNE_DEBUG_SUBSYS), in the
// NCCL_DEBUG / NCCL_DEBUG_SUBSYS shape users already know.
//
//   DLTUNE_LOG(kInfo, "topo") << "loaded " << n << " objects";
//
// The stream expression is not evaluated when the line is filtered out. Each line is written
// with one write(2), so lines from threads and ranks do not interleave.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace dltune {

enum class LogLevel { kNone = 0, kError, kWarn, kInfo, kDebug, kTrace };

// True when a line of this level and subsystem would be printed. Reads the environment once;
// log_reconfigure() re-reads it (tests).
bool log_enabled(LogLevel level, std::string_view subsys);
void log_reconfigure();
// Parses a level name (case-insensitive; also numbers 0-5). Unknown names give kWarn.
LogLevel parse_log_level(std::string_view name);
// A prefix printed after "dltune" on every line, e.g. "rank 3"; "" for none.
void set_log_prefix(std::string prefix);
// Called before each log line is written, on the logging thread (nullptr: nothing). A terminal
// progress display (common/progress.h) sets it to clear its line, so that a log line starts
// at the left margin instead of glued to the display. The hook may only use atomics and
// write(2): it runs with no lock held, from any thread.
void set_log_line_hook(void (*hook)());

class LogLine {
 public:
  LogLine(LogLevel level, std::string_view subsys);
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  std::ostream& stream() { return os_; }

 private:
  std::ostringstream os_;
};

}  // namespace dltune

#define DLTUNE_LOG(level, subsys)                                  \
  if (!::dltune::log_enabled(::dltune::LogLevel::level, subsys)) { \
  } else                                                           \
    ::dltune::LogLine(::dltune::LogLevel::level, subsys).stream()
