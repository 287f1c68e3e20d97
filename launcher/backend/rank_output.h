// What becomes of the ranks' output lines, for both backends, as mpirun's --tag-output,
// --output-filename and --timestamp-output make it:
//
//   - with a directory, each rank's lines are appended to DIR/1/rank.R/stdout and
//     DIR/1/rank.R/stderr (Open MPI 4's layout, "1" its job number, so that scripts written for
//     it find them), and still printed by the launcher unless the directory was given with
//     ":nocopy";
//   - with timestamps, every line (printed and in the files) starts with the wall-clock time it
//     reached the launcher, "[2026-11-30T06:55:41.123] " (local time, milliseconds);
//   - with tags, a printed line starts with "[R] " after its time (the files need none).
//
// Lines that belong to no rank (srun's own) are printed with their time only. Files are opened
// on a rank's first line and kept open, kMaxOpenFiles at most; past that, a line opens its file,
// appends and closes it. A file that cannot be written is said once on stderr and then left
// alone: the job goes on, and its lines are still printed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/result.h"

namespace dltune::launcher {

struct RankOutputOptions {
  std::string dir;         // "" = no files
  bool copy = true;        // with a directory: print the lines as well (":nocopy" turns it off)
  bool timestamp = false;  // --timestamp-output
  bool tag = false;        // --tag-output

  // True when lines need more than printing as they are.
  bool active() const { return !dir.empty() || timestamp || tag; }
  // True when each line must say its rank (the tag, the per-rank files): srun --label.
  bool per_rank() const { return !dir.empty() || tag; }
};

// Parses --output-filename's value: "DIR" or "DIR:nocopy" (any case), DIR made absolute
// against the current directory. Errors: kInvalidInput for an empty directory, another
// directive after the colon, or a DIR that exists and is not a directory.
Result<RankOutputOptions> parse_output_filename(std::string_view arg);

class RankOutput {
 public:
  static constexpr size_t kMaxOpenFiles = 256;

  // Creates DIR/1 (and DIR) when options.dir is set; the ranks' folders come with their first
  // line. Errors: kInvalidInput when a file is in the way, kIo when a folder cannot be created
  // (no permission).
  static Result<RankOutput> open(RankOutputOptions options);

  RankOutput(RankOutput&& other) noexcept;
  RankOutput& operator=(RankOutput&&) = delete;
  RankOutput(const RankOutput&) = delete;
  RankOutput& operator=(const RankOutput&) = delete;
  ~RankOutput();

  // One complete output line (no newline) of rank `rank` (< 0: of no rank) on its stdout or
  // stderr: appended to the rank's file, and returned as the launcher prints it (timestamp,
  // tag); nullopt when it is not to be printed (":nocopy").
  std::optional<std::string> line(int rank, bool is_stderr, std::string_view text);

  // "[2026-11-30T06:55:41.123] ": the local time of `unix_ms` (milliseconds since the epoch).
  static std::string timestamp_prefix(int64_t unix_ms);

 private:
  explicit RankOutput(RankOutputOptions options) : options_(std::move(options)) {}
  void write_file(int rank, bool is_stderr, const std::string& line);

  RankOutputOptions options_;
  std::map<std::pair<int, bool>, FILE*> files_;  // (rank, is_stderr) -> open file
  bool write_failed_ = false;
};

}  // namespace dltune::launcher
