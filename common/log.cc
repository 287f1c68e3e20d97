#include "common/log.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>
#include <set>

#include <unistd.h>

#include "common/env.h"

namespace dltune {
namespace {

struct LogConfig {
  LogLevel level = LogLevel::kWarn;
  bool include = true;               // true: log only `subsystems`; false: log all but them
  std::set<std::string> subsystems;  // empty with include=true after "ALL" means every one
  bool all = true;
  std::string prefix;
};

std::mutex g_mu;
std::atomic<void (*)()> g_line_hook{nullptr};
LogConfig g_config;
std::atomic<bool> g_loaded{false};
std::atomic<int> g_level{static_cast<int>(LogLevel::kTrace)};  // fast reject before locking

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

void load_locked() {
  LogConfig c;
  c.prefix = g_config.prefix;
  c.level = parse_log_level(env::get(env::kDebug));
  std::string spec = env::get(env::kDebugSubsys);
  if (!spec.empty() && spec[0] == '^') {
    c.include = false;
    spec.erase(0, 1);
  }
  c.all = false;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    std::string item = upper(spec.substr(start, end - start));
    if (item == "ALL") {
      c.all = true;
    } else if (!item.empty()) {
      c.subsystems.insert(item);
    }
    start = end + 1;
  }
  g_level.store(static_cast<int>(c.level), std::memory_order_relaxed);
  g_config = std::move(c);
  g_loaded.store(true, std::memory_order_release);
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kError:
      return "ERROR";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kTrace:
      return "TRACE";
    case LogLevel::kNone:
      break;
  }
  return "";
}

}  // namespace

LogLevel parse_log_level(std::string_view name) {
  const std::string n = upper(name);
  if (n == "NONE" || n == "0") return LogLevel::kNone;
  if (n == "ERROR" || n == "1") return LogLevel::kError;
  if (n == "WARN" || n == "2") return LogLevel::kWarn;
  if (n == "INFO" || n == "3") return LogLevel::kInfo;
  if (n == "DEBUG" || n == "4") return LogLevel::kDebug;
  if (n == "TRACE" || n == "5") return LogLevel::kTrace;
  return LogLevel::kWarn;
}

void log_reconfigure() {
  std::lock_guard lock(g_mu);
  load_locked();
}

void set_log_line_hook(void (*hook)()) { g_line_hook.store(hook); }

void set_log_prefix(std::string prefix) {
  std::lock_guard lock(g_mu);
  if (!g_loaded.load(std::memory_order_acquire)) load_locked();
  g_config.prefix = std::move(prefix);
}

bool log_enabled(LogLevel level, std::string_view subsys) {
  if (g_loaded.load(std::memory_order_acquire) &&
      static_cast<int>(level) > g_level.load(std::memory_order_relaxed)) {
    return false;
  }
  std::lock_guard lock(g_mu);
  if (!g_loaded.load(std::memory_order_acquire)) load_locked();
  if (level == LogLevel::kNone || level > g_config.level) return false;
  if (level == LogLevel::kError) return true;  // errors are never filtered by subsystem
  const bool listed = g_config.all || g_config.subsystems.count(upper(subsys)) > 0;
  return g_config.include ? listed : !listed;
}

LogLine::LogLine(LogLevel level, std::string_view subsys) {
  std::lock_guard lock(g_mu);
  os_ << "dltune";
  if (!g_config.prefix.empty()) os_ << "[" << g_config.prefix << "]";
  os_ << " " << level_name(level) << " " << subsys << ": ";
}

LogLine::~LogLine() {
  os_ << '\n';
  const std::string s = os_.str();
  if (auto hook = g_line_hook.load()) hook();
  // One write per line: atomic for pipes up to PIPE_BUF, and never interleaved mid-line.
  ssize_t off = 0;
  while (off < static_cast<ssize_t>(s.size())) {
    ssize_t n = ::write(STDERR_FILENO, s.data() + off, s.size() - off);
    if (n <= 0) break;
    off += n;
  }
}

}  // namespace dltune
