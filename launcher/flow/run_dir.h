// The run directory of one `dltune launch`: its fixed layout is common/run_layout.h (the ranks
// write into it too); this is how the launcher creates, names and reopens one.
#pragma once

#include <string>

#include "common/result.h"
#include "common/run_layout.h"

namespace dltune::launcher {

struct RunDir {
  std::string path;  // absolute
  std::string file(const std::string& name) const { return path + "/" + name; }
  std::string recipe() const { return file(run_layout::kRecipe); }
  std::string plan() const { return file(run_layout::kPlan); }
  std::string launch() const { return file(run_layout::kLaunch); }
  std::string metrics() const { return file(run_layout::kMetrics); }
  std::string checkpoint() const { return file(run_layout::kCheckpoint); }
  std::string trace() const { return file(run_layout::kTrace); }
  std::string worker_summary() const { return file(run_layout::kWorkerSummary); }
  std::string summary() const { return file(run_layout::kSummary); }
  std::string report() const { return file(run_layout::kReport); }
};

// Creates `<runs_dir>/<name>-<YYYYmmddTHHMMSSZ>` (with "-2", "-3", ... appended when a run of
// the same second exists) and its checkpoints/ folder; `runs_dir` is created when missing and
// made absolute. Errors: io_error naming the directory that cannot be created.
Result<RunDir> create_run_dir(const std::string& runs_dir, const std::string& name);

// Removes the run directory `path` when destroyed, unless keep() was called: a launch that
// ends before its ranks train (refused with exit 2: a bad plan, a layout that does not fit;
// or failed while tuning) leaves nothing behind in the runs directory.
class RunDirGuard {
 public:
  explicit RunDirGuard(std::string path) : path_(std::move(path)) {}
  ~RunDirGuard();
  RunDirGuard(const RunDirGuard&) = delete;
  RunDirGuard& operator=(const RunDirGuard&) = delete;
  void keep() { path_.clear(); }

 private:
  std::string path_;
};

// An existing run directory for --resume: it must hold recipe.yaml and plan.json. Errors
// (invalid_input, exit 2): not a directory, or a missing file, named; a directory an older dltune
// wrote (train_config.json, whose ranks read an engine configuration instead of the plan) is
// refused with what to do instead.
Result<RunDir> open_run_dir(const std::string& path);

}  // namespace dltune::launcher
