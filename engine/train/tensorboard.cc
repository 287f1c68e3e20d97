#include "engine/train/tensorboard.h"

#include <array>
#include <chrono>
#include <cstring>

#include <unistd.h>

#include "common/log.h"
#include "common/paths.h"

namespace dltune::engine {
namespace {

// The byte-at-a-time table of the reflected Castagnoli polynomial.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protocol-buffer wire format: a field's key is (number << 3) | wire type; varints carry
// 7 bits per byte, low first; fixed64 / fixed32 are little-endian; length-delimited fields
// (strings, messages) are a varint length and the bytes.
enum WireType { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, int field, WireType type) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | type);
}

template <typename T>
void put_le(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86-64 and aarch64 are little-endian
  out.append(b, sizeof(T));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_double(std::string& out, int field, double v) {
  put_key(out, field, kFixed64);
  put_le(out, v);
}

std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_double(e, 1, wall_time);
  if (step != 0) {  // proto3: a zero step is the default and left out, as TensorFlow does
    put_key(e, 2, kVarint);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const auto& t = crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view data) {
  std::string r;
  r.reserve(data.size() + 16);
  put_le(r, static_cast<uint64_t>(data.size()));
  put_le(r, masked_crc32c(r.data(), 8));
  r.append(data);
  put_le(r, masked_crc32c(data.data(), data.size()));
  return r;
}

std::string event_file_version(double wall_time) {
  std::string e = event_head(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string event_scalars(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  std::string summary;
  for (const Scalar& s : scalars) {
    std::string value;
    put_bytes(value, 1, s.tag);
    put_key(value, 2, kFixed32);
    put_le(value, s.value);
    put_bytes(summary, 1, value);
  }
  std::string e = event_head(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

TensorBoardWriter::~TensorBoardWriter() {
  if (f_) std::fclose(f_);
}

Result<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::open(const std::string& dir) {
  if (Status st = paths::make_dirs(dir); !st)
    return std::move(st).error().wrap("creating the TensorBoard directory");
  char host[256] = "localhost";
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  const double now = unix_seconds();
  std::unique_ptr<TensorBoardWriter> w(new TensorBoardWriter());
  w->path_ = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." +
             host + "." + std::to_string(getpid()) + ".0";
  w->f_ = std::fopen(w->path_.c_str(), "wb");
  if (!w->f_) return errno_error("cannot create TensorBoard event file '" + w->path_ + "'");
  const std::string first = tfrecord(event_file_version(now));
  if (std::fwrite(first.data(), 1, first.size(), w->f_) != first.size() || std::fflush(w->f_))
    return errno_error("cannot write TensorBoard event file '" + w->path_ + "'");
  return w;
}

void TensorBoardWriter::write(int64_t step, const std::vector<Scalar>& scalars) {
  const std::string rec = tfrecord(event_scalars(unix_seconds(), step, scalars));
  const bool ok = std::fwrite(rec.data(), 1, rec.size(), f_) == rec.size() && std::fflush(f_) == 0;
  if (!ok && !failed_) {
    DLTUNE_LOG(kWarn, "engine") << "cannot write TensorBoard event file '" << path_
                                << "': " << std::strerror(errno) << "; metrics.jsonl goes on";
  }
  failed_ = failed_ || !ok;
}

}  // namespace dltune::engine
