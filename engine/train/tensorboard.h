// TensorBoard event files, written without TensorFlow.
//
// An event file is a sequence of TFRecords, each framed as
//   uint64 length (little-endian) | uint32 masked CRC32C of those 8 bytes | data |
//   uint32 masked CRC32C of the data
// where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (TensorFlow's
// core/lib/hash/crc32c.h, CRC-32C = Castagnoli). Each record's data is an `Event` protobuf
// (tensorflow/core/util/event.proto), encoded here by hand for the few fields written:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2", as TensorFlow's writers do; every
// later one a summary of scalars. TensorBoard reads every file whose name contains "tfevents"
// in a run's directory; this writer names its file as TensorFlow does:
// events.out.tfevents.<unix seconds>.<host>.<pid>.0
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dltune::engine {

// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78) of `n` bytes, continuing from `crc`
// (0 to start). crc32c("123456789") = 0xe3069283.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
// TFRecord's masked CRC-32C of `n` bytes.
uint32_t masked_crc32c(const void* data, size_t n);
// `data` framed as one TFRecord.
std::string tfrecord(std::string_view data);

struct Scalar {
  std::string tag;  // "train/loss": TensorBoard groups tags by the part before '/'
  float value = 0;
};

// Encoded Event protobufs: the file-version event, and one with a summary of `scalars`.
std::string event_file_version(double wall_time);
std::string event_scalars(double wall_time, int64_t step, const std::vector<Scalar>& scalars);

class TensorBoardWriter {
 public:
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Creates `dir` (and its parents) and a new event file in it, whose first record is the
  // file-version event. Errors (io_error) name the directory or file.
  static Result<std::unique_ptr<TensorBoardWriter>> open(const std::string& dir);
  // Appends one event with `scalars` at `step`, wall time now, and flushes it (TensorBoard
  // shows a run as it goes). A failed write is reported once on the log and otherwise ignored:
  // the event file is a view of metrics.jsonl, never a reason to stop training.
  void write(int64_t step, const std::vector<Scalar>& scalars);
  const std::string& path() const { return path_; }

 private:
  TensorBoardWriter() = default;
  std::FILE* f_ = nullptr;
  std::string path_;
  bool failed_ = false;
};

}  // namespace dltune::engine
