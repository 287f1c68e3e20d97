#include "engine/train/metrics.h"

#include <nlohmann/json.hpp>

namespace dltune::engine {

std::string to_json_line(const StepMetrics& m) {
  nlohmann::json j = {{"event", "step"},
                      {"step", m.step},
                      {"loss", m.loss},
                      {"lr", m.lr},
                      {"samples_per_s", m.samples_per_s},
                      {"compute_s", m.compute_s},
                      {"comm_s", m.comm_s},
                      {"step_s", m.step_s},
                      {"batch", m.batch}};
  return j.dump();
}

std::string to_json_line(const EvalMetrics& m) {
  nlohmann::json j = {{"event", "eval"},
                      {"step", m.step},
                      {"epoch", m.epoch},
                      {"heldout_accuracy", m.accuracy},
                      {"heldout_loss", m.loss}};
  return j.dump();
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

Result<MetricsWriter> MetricsWriter::open(const std::string& path) {
  MetricsWriter w;
  if (path.empty()) return w;
  w.f_ = std::fopen(path.c_str(), "a");
  if (!w.f_) return errno_error("cannot open metrics file '" + path + "'");
  return w;
}

void MetricsWriter::write(const std::string& line) {
  if (!f_) return;
  std::fputs(line.c_str(), f_);
  std::fputc('\n', f_);
  std::fflush(f_);
}

}  // namespace dltune::engine
