#include "engine/io/checkpoint_stream.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "engine/io/checkpoint.h"

namespace dltune::engine {
namespace {

constexpr size_t kHeaderBytes = 4096;
constexpr const char* kMagic = "DLTUNE-CHECKPOINT 2\n";

Error io(const std::string& what) { return io_error(what + ": " + std::strerror(errno)); }

// Writes all of [data, data + n) at `offset`.
bool pwrite_all(int fd, const char* data, size_t n, off_t offset) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, offset);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
    offset += w;
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<CheckpointStream>> CheckpointStream::open(
    const std::string& path, const Checkpoint& meta, size_t params, std::vector<size_t> slots,
    size_t state, bool hash_at_finish) {
  std::unique_ptr<CheckpointStream> s(new CheckpointStream);
  s->path_ = path;
  s->tmp_ = path + ".tmp." + std::to_string(::getpid());
  s->meta_ = meta;
  s->meta_.params.clear();
  s->meta_.slots.clear();
  s->meta_.state.clear();
  s->params_ = params;
  s->slots_ = std::move(slots);
  s->state_ = state;
  s->total_ = params + state;
  for (size_t n : s->slots_) s->total_ += n;
  s->hash_at_finish_ = hash_at_finish;
  s->fd_ = ::open(s->tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (s->fd_ < 0) return io("writing checkpoint: cannot create '" + s->tmp_ + "'");
  return s;
}

CheckpointStream::~CheckpointStream() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

Status CheckpointStream::write(std::span<const float> floats) {
  if (written_ + floats.size() > total_)
    return internal_error("checkpoint stream: " + std::to_string(written_ + floats.size()) +
                          " floats written of a payload of " + std::to_string(total_));
  const auto* bytes = reinterpret_cast<const char*>(floats.data());
  const size_t n = floats.size() * sizeof(float);
  if (!hash_at_finish_) sha_.update(bytes, n);
  if (!pwrite_all(fd_, bytes, n, static_cast<off_t>(kHeaderBytes + written_ * sizeof(float))))
    return io("writing checkpoint '" + tmp_ + "'");
  written_ += floats.size();
  return ok_status();
}

Status CheckpointStream::finish() {
  if (written_ != total_)
    return internal_error("checkpoint stream: " + std::to_string(written_) +
                          " floats written of a payload of " + std::to_string(total_));
  if (hash_at_finish_) {
    // The payload read back (from the page cache, where write() left it) in 4 MiB pieces.
    std::vector<char> buf(size_t{4} << 20);
    const size_t bytes = total_ * sizeof(float);
    for (size_t at = 0; at < bytes;) {
      const ssize_t r = ::pread(fd_, buf.data(), std::min(buf.size(), bytes - at),
                                static_cast<off_t>(kHeaderBytes + at));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return io("writing checkpoint: cannot read back '" + tmp_ + "'");
      sha_.update(buf.data(), static_cast<size_t>(r));
      at += static_cast<size_t>(r);
    }
  }
  const Checkpoint& ck = meta_;
  const nlohmann::json meta = {{"model", ck.model},         {"step", ck.step},
                               {"seed", ck.seed},           {"global_batch", ck.global_batch},
                               {"epoch", ck.epoch},         {"rng_state", ck.rng_state},
                               {"optimizer", ck.optimizer}, {"optimizer_steps", ck.optimizer_steps},
                               {"params", params_},         {"slots", slots_},
                               {"state", state_},           {"sha256", sha_.hex_digest()}};
  std::string head = kMagic + meta.dump();
  if (head.size() + 1 > kHeaderBytes)
    return invalid_input("checkpoint metadata of " + std::to_string(head.size()) +
                         " bytes does not fit the streamed header (model name too long?)");
  head.resize(kHeaderBytes - 1, ' ');  // JSON allows the trailing spaces
  head.push_back('\n');
  if (!pwrite_all(fd_, head.data(), head.size(), 0)) return io("writing checkpoint '" + tmp_ + "'");
  if (::fsync(fd_) != 0) return io("writing checkpoint: cannot flush '" + tmp_ + "'");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return io("writing checkpoint: cannot close '" + tmp_ + "'");
  checkpoint_fault_stall(meta_.step);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    return io("writing checkpoint: cannot rename '" + tmp_ + "' to '" + path_ + "'");
  finished_ = true;
  return ok_status();
}

}  // namespace dltune::engine
