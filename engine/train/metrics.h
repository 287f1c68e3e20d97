// Training metrics as JSON lines (one event per line, flushed per line):
//   {"event":"step","step":S,"loss":L,"lr":R,"samples_per_s":X,"compute_s":C,"comm_s":M,
//    "step_s":T,"batch":G}
//   {"event":"eval","step":S,"epoch":E,"heldout_accuracy":A,"heldout_loss":L}
// comm_s is the EXPOSED communication time: the time the step waited for allreduces after its
// backward finished (with overlap), or the whole allreduce time (without).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/result.h"

namespace dltune::engine {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0.0, lr = 0.0, samples_per_s = 0.0, compute_s = 0.0, comm_s = 0.0, step_s = 0.0;
  int batch = 0;
};

struct EvalMetrics {
  int64_t step = 0, epoch = 0;
  double accuracy = 0.0, loss = 0.0;
};

std::string to_json_line(const StepMetrics& m);
std::string to_json_line(const EvalMetrics& m);

// Appends lines to a file ("" = discard). Move-only.
class MetricsWriter {
 public:
  MetricsWriter() = default;
  ~MetricsWriter();
  MetricsWriter(MetricsWriter&& o) noexcept : f_(o.f_) { o.f_ = nullptr; }
  MetricsWriter& operator=(MetricsWriter&&) = delete;
  // Opens (appending) `path`; io_error naming the path when it cannot be opened.
  static Result<MetricsWriter> open(const std::string& path);
  void write(const std::string& line);

 private:
  std::FILE* f_ = nullptr;
};

}  // namespace dltune::engine
