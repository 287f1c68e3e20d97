// The run directory of one `dltune launch` (DESIGN.md "The run directory"):
//
//   <runs>/<recipe>-<UTC timestamp>/
//     recipe.yaml         the recipe as run (a byte copy of the file)
//     plan.json           the Plan (recipes/plan.h) the ranks executed
//     train_config.json   the engine TrainConfig derived from recipe + plan (what the ranks read)
//     launch.json         how it was launched: ranks, nodes, backend, the exact command
//     metrics.jsonl       rank 0's step / eval events (engine/metrics.h)
//     checkpoints/        the training checkpoint (checkpoint.bin)
//     trace.json          Chrome trace of compute and communication per rank
//     summary.json        the outcome (DESIGN.md "Machine-readable outputs")
//     report.html         the self-contained report
#pragma once

#include <string>

#include "common/result.h"

namespace dltune::launcher {

struct RunDir {
  std::string path;  // absolute
  std::string file(const std::string& name) const { return path + "/" + name; }
  std::string recipe() const { return file("recipe.yaml"); }
  std::string plan() const { return file("plan.json"); }
  std::string train_config() const { return file("train_config.json"); }
  std::string launch() const { return file("launch.json"); }
  std::string metrics() const { return file("metrics.jsonl"); }
  std::string checkpoint() const { return file("checkpoints/checkpoint.bin"); }
  std::string trace() const { return file("trace.json"); }
  std::string summary() const { return file("summary.json"); }
  std::string report() const { return file("report.html"); }
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

// An existing run directory for --resume: it must hold recipe.yaml, plan.json and
// train_config.json. Errors (invalid_input, exit 2): not a directory, or a missing file, named.
Result<RunDir> open_run_dir(const std::string& path);

}  // namespace dltune::launcher
