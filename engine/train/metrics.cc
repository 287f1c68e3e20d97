#include "engine/train/metrics.h"

#include <filesystem>

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
                      {"data_s", m.data_s},
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

std::string tensorboard_dir(const std::string& metrics_path) {
  const std::filesystem::path p(metrics_path);
  const std::filesystem::path tb = p.parent_path() / "tb";
  if (p.filename() == "metrics.jsonl") return tb.string();
  return (tb / p.stem()).string();
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

Result<MetricsWriter> MetricsWriter::open(const std::string& path, bool tensorboard) {
  MetricsWriter w;
  if (path.empty()) return w;
  w.f_ = std::fopen(path.c_str(), "a");
  if (!w.f_) return errno_error("cannot open metrics file '" + path + "'");
  if (tensorboard) {
    auto tb = TensorBoardWriter::open(tensorboard_dir(path));
    if (!tb) return tb.error();
    w.tb_ = std::move(*tb);
  }
  return w;
}

void MetricsWriter::write(const std::string& line) {
  if (!f_) return;
  std::fputs(line.c_str(), f_);
  std::fputc('\n', f_);
  std::fflush(f_);
}

void MetricsWriter::write(const StepMetrics& m) {
  write(to_json_line(m));
  if (!tb_) return;
  auto f = [](double v) { return static_cast<float>(v); };
  tb_->write(m.step, {{"train/loss", f(m.loss)},
                      {"train/learning_rate", f(m.lr)},
                      {"train/samples_per_s", f(m.samples_per_s)},
                      {"step_time/total_s", f(m.step_s)},
                      {"step_time/compute_s", f(m.compute_s)},
                      {"step_time/exposed_comm_s", f(m.comm_s)},
                      {"step_time/data_wait_s", f(m.data_s)}});
}

void MetricsWriter::write(const EvalMetrics& m) {
  write(to_json_line(m));
  if (!tb_) return;
  tb_->write(m.step, {{"heldout/accuracy", static_cast<float>(m.accuracy)},
                      {"heldout/loss", static_cast<float>(m.loss)}});
}

}  // namespace dltune::engine
