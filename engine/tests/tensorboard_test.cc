// TensorBoard event files (engine/train/tensorboard.h): CRC-32C against its published test
// vectors, the TFRecord framing, the Event encoding byte for byte as the protobuf wire format
// gives it, and where the files go. (tests/engine/tensorboard_test.py decodes a real run's
// files with python3-protobuf.)
#include "engine/train/tensorboard.h"

#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/paths.h"
#include "engine/train/metrics.h"

namespace dltune::engine {
namespace {

namespace fs = std::filesystem;

// RFC 3720 (iSCSI) appendix B.4 and the common "123456789" check value.
TEST(Crc32c, PublishedTestVectors) {
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);
  unsigned char buf[32];
  std::memset(buf, 0, sizeof buf);
  EXPECT_EQ(crc32c(buf, 32), 0x8a9136aau);
  std::memset(buf, 0xff, sizeof buf);
  EXPECT_EQ(crc32c(buf, 32), 0x62a8ab43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(crc32c(buf, 32), 0x46dd794eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<unsigned char>(31 - i);
  EXPECT_EQ(crc32c(buf, 32), 0x113fdb5cu);
  // Continuing a CRC over a split buffer gives the CRC of the whole.
  EXPECT_EQ(crc32c("6789", 4, crc32c("12345", 5)), 0xe3069283u);
  // TensorFlow's mask: rotate right by 15, add 0xa282ead8.
  const uint32_t c = crc32c("123456789", 9);
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TfRecord, Framing) {
  const std::string r = tfrecord("abc");
  ASSERT_EQ(r.size(), 8u + 4 + 3 + 4);
  uint64_t len = 0;
  std::memcpy(&len, r.data(), 8);
  EXPECT_EQ(len, 3u);
  uint32_t len_crc = 0, data_crc = 0;
  std::memcpy(&len_crc, r.data() + 8, 4);
  std::memcpy(&data_crc, r.data() + 15, 4);
  EXPECT_EQ(len_crc, masked_crc32c(r.data(), 8));
  EXPECT_EQ(r.substr(12, 3), "abc");
  EXPECT_EQ(data_crc, masked_crc32c("abc", 3));
}

// The wire format worked out by hand: field keys (number << 3 | type), a varint step, fixed64
// wall time, length-delimited strings and messages, a fixed32 float.
TEST(EventEncoding, ByteForByte) {
  const std::string v = event_file_version(1.5);
  const std::string want_v =
      std::string("\x09\x00\x00\x00\x00\x00\x00\xf8\x3f", 9) + "\x1a\x0d" + "brain.Event:2";
  EXPECT_EQ(v, want_v);
  const std::string e = event_scalars(2.0, 300, {{"a/b", 1.0f}});
  // wall_time 2.0 = 0x4000000000000000; step 300 = varint ac 02; summary { value { tag "a/b",
  // simple_value 1.0f = 0x3f800000 } }.
  const std::string value =
      std::string("\x0a\x03", 2) + "a/b" + std::string("\x15\x00\x00\x80\x3f", 5);
  const std::string summary = std::string("\x0a", 1) + static_cast<char>(value.size()) + value;
  const std::string want = std::string("\x09\x00\x00\x00\x00\x00\x00\x00\x40", 9) +
                           std::string("\x10\xac\x02", 3) + "\x2a" +
                           static_cast<char>(summary.size()) + summary;
  EXPECT_EQ(e, want);
}

TEST(EventFiles, WrittenBesideTheMetrics) {
  EXPECT_EQ(tensorboard_dir("/runs/r1/metrics.jsonl"), "/runs/r1/tb");
  EXPECT_EQ(tensorboard_dir("/runs/r1/baseline_metrics.jsonl"), "/runs/r1/tb/baseline_metrics");
  const fs::path dir = fs::temp_directory_path() / ("dltune-tb-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    auto w = MetricsWriter::open((dir / "metrics.jsonl").string(), true);
    ASSERT_TRUE(w.ok()) << w.error().message();
    StepMetrics s;
    s.step = 7;
    s.loss = 0.25;
    w->write(s);
    EXPECT_NE(w->tensorboard_path().find((dir / "tb/events.out.tfevents.").string()),
              std::string::npos);
  }
  int files = 0;
  for (const auto& f : fs::directory_iterator(dir / "tb")) {
    ++files;
    auto bytes = paths::read_file(f.path().string());
    ASSERT_TRUE(bytes.ok());
    // Two records: the version, then the step's seven scalars.
    uint64_t len = 0;
    std::memcpy(&len, bytes->data(), 8);
    EXPECT_EQ(len, event_file_version(0).size());
    EXPECT_GT(bytes->size(), 2 * 16 + len);
    EXPECT_NE(bytes->find("train/loss"), std::string::npos);
    EXPECT_NE(bytes->find("step_time/exposed_comm_s"), std::string::npos);
  }
  EXPECT_EQ(files, 1);
  // Without TensorBoard (status lines, other ranks): no event file.
  fs::remove_all(dir / "tb");
  { auto w = MetricsWriter::open((dir / "metrics.jsonl").string()); }
  EXPECT_FALSE(fs::exists(dir / "tb"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dltune::engine
