#include "launcher/backend/rank_output.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include <sys/stat.h>
#include <unistd.h>

#include "common/paths.h"

namespace dltune::launcher {

Result<RankOutputOptions> parse_output_filename(std::string_view arg) {
  RankOutputOptions o;
  std::string dir(arg);
  if (const size_t colon = dir.rfind(':'); colon != std::string::npos) {
    std::string directive = dir.substr(colon + 1);
    for (char& c : directive) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (directive != "nocopy") {
      return invalid_input("--output-filename " + std::string(arg) + ": unknown directive '" +
                           dir.substr(colon + 1) + "' (DIR or DIR:nocopy)");
    }
    o.copy = false;
    dir.resize(colon);
  }
  if (dir.empty()) return invalid_input("--output-filename: no directory given");
  if (dir.front() != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) == nullptr) return errno_error("--output-filename: getcwd");
    dir = std::string(cwd) + "/" + dir;
  }
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return invalid_input("--output-filename " + dir + ": not a directory");
  }
  o.dir = dir;
  return o;
}

Result<RankOutput> RankOutput::open(RankOutputOptions options) {
  if (!options.dir.empty()) {
    DLTUNE_TRY_CTX(paths::make_dirs(options.dir + "/1"), "--output-filename");
  }
  return RankOutput(std::move(options));
}

RankOutput::RankOutput(RankOutput&& other) noexcept
    : options_(std::move(other.options_)),
      files_(std::move(other.files_)),
      write_failed_(other.write_failed_) {
  other.files_.clear();
}

RankOutput::~RankOutput() {
  for (auto& [key, f] : files_) std::fclose(f);
}

std::string RankOutput::timestamp_prefix(int64_t unix_ms) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "[%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03d] ", static_cast<int>(unix_ms % 1000));
  return buf;
}

void RankOutput::write_file(int rank, bool is_stderr, const std::string& line) {
  if (write_failed_) return;
  const auto key = std::make_pair(rank, is_stderr);
  FILE* f = nullptr;
  bool kept = true;  // stays open in files_ (else closed after this line)
  if (auto it = files_.find(key); it != files_.end()) {
    f = it->second;
  } else {
    const std::string folder = options_.dir + "/1/rank." + std::to_string(rank);
    const std::string path = folder + (is_stderr ? "/stderr" : "/stdout");
    if (paths::make_dirs(folder).ok()) f = std::fopen(path.c_str(), "ae");
    if (f == nullptr) {
      write_failed_ = true;
      std::fprintf(stderr,
                   "dltune run: --output-filename: cannot write %s (%s); the ranks' output "
                   "is only printed from now on\n",
                   path.c_str(), std::strerror(errno));
      return;
    }
    kept = files_.size() < kMaxOpenFiles;
    if (kept) files_[key] = f;
  }
  std::fwrite(line.data(), 1, line.size(), f);
  std::fputc('\n', f);
  if (kept) {
    std::fflush(f);  // a rank's file is complete whenever the job stops
  } else {
    std::fclose(f);
  }
}

std::optional<std::string> RankOutput::line(int rank, bool is_stderr, std::string_view text) {
  std::string time;
  if (options_.timestamp) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    time = timestamp_prefix(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
  }
  if (!options_.dir.empty() && rank >= 0) {
    write_file(rank, is_stderr, time + std::string(text));
    if (!options_.copy) return std::nullopt;
  }
  const std::string tag = options_.tag && rank >= 0 ? "[" + std::to_string(rank) + "] " : "";
  return time + tag + std::string(text);
}

}  // namespace dltune::launcher
