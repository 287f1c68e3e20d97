// Training metrics as JSON lines (one event per line, flushed per line):
//   {"event":"step","step":S,"loss":L,"lr":R,"samples_per_s":X,"compute_s":C,"comm_s":M,
//    "data_s":D,"step_s":T,"batch":G}
//   {"event":"eval","step":S,"epoch":E,"heldout_accuracy":A,"heldout_loss":L}
// comm_s is the EXPOSED communication time: the time the step waited for allreduces after its
// backward finished (with overlap), or the whole allreduce time (without). data_s is the time
// the step waited for its batch (a loader that keeps ahead makes it ~0).
//
// The same scalars go to TensorBoard (engine/train/tensorboard.h) when the writer is opened
// with one, in tensorboard_dir(path), at the same step numbers:
//   step events: train/loss, train/learning_rate, train/samples_per_s, step_time/total_s,
//                step_time/compute_s, step_time/exposed_comm_s, step_time/data_wait_s
//   eval events: heldout/accuracy, heldout/loss
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/result.h"
#include "engine/train/tensorboard.h"

namespace dltune::engine {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0.0, lr = 0.0, samples_per_s = 0.0, compute_s = 0.0, comm_s = 0.0, step_s = 0.0;
  int batch = 0;
  double data_s = 0.0;
};

struct EvalMetrics {
  int64_t step = 0, epoch = 0;
  double accuracy = 0.0, loss = 0.0;
};

std::string to_json_line(const StepMetrics& m);
std::string to_json_line(const EvalMetrics& m);

// Where the TensorBoard events of the metrics file `metrics_path` go: DIR/tb for
// DIR/metrics.jsonl (a run directory's, launcher/run_dir.h), DIR/tb/NAME for any other
// DIR/NAME.jsonl (the launch's one-rank baseline: a run of its own in TensorBoard).
std::string tensorboard_dir(const std::string& metrics_path);

// Appends lines to a file ("" = discard), and with TensorBoard also the step and eval events'
// scalars to an event file. Move-only.
class MetricsWriter {
 public:
  MetricsWriter() = default;
  ~MetricsWriter();
  MetricsWriter(MetricsWriter&& o) noexcept : f_(o.f_), tb_(std::move(o.tb_)) { o.f_ = nullptr; }
  MetricsWriter& operator=(MetricsWriter&&) = delete;
  // Opens (appending) `path`, and with `tensorboard` (and a non-empty path) a new event file in
  // tensorboard_dir(path). io_error naming the path when either cannot be opened.
  static Result<MetricsWriter> open(const std::string& path, bool tensorboard = false);
  // A line as it is (status events).
  void write(const std::string& line);
  // The event's JSON line, and its scalars to TensorBoard.
  void write(const StepMetrics& m);
  void write(const EvalMetrics& m);
  // The event file ("" without TensorBoard).
  std::string tensorboard_path() const { return tb_ ? tb_->path() : ""; }

 private:
  std::FILE* f_ = nullptr;
  std::unique_ptr<TensorBoardWriter> tb_;
};

}  // namespace dltune::engine
