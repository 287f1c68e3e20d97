#include "comm/shm_segment.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "comm/spin_wait.h"
#include "common/check.h"
#include "common/shm_name.h"
#include "common/strings.h"

namespace dltune::comm {
namespace {

constexpr size_t kLine = 64;
constexpr size_t kPage = 4096;
constexpr int kNameTag = kReservedTagBase + 900;
constexpr int kAckTag = kReservedTagBase + 901;
// Names tried when one is taken (a segment left behind by a killed process of the same pid).
constexpr int kNameAttempts = 64;

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

// Local rank r's control line: its published words 0..6, then its barrier epoch, so that a
// barrier carries the words published before it in the same line transfer.
std::atomic_ref<uint64_t> published_word(uint8_t* map, int r, int word) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(
      map + static_cast<size_t>(r) * kLine + 8 * static_cast<size_t>(word)));
}
std::atomic_ref<uint64_t> epoch_word(uint8_t* map, int r) {
  return published_word(map, r, SharedSegment::kPublishedWords);
}
static_assert(8 * (SharedSegment::kPublishedWords + 1) == kLine, "one control line per rank");

constexpr const char* kShmDir = "/dev/shm";

// What to do when /dev/shm is full: its size and what is free, and how to give it more.
std::string shm_space_hint(int err) {
  if (err != ENOSPC) return "";
  struct statvfs v {};
  std::string sizes;
  if (statvfs(kShmDir, &v) == 0) {
    sizes = " (" + strings::format_bytes(static_cast<uint64_t>(v.f_blocks) * v.f_frsize) +
            ", of which " + strings::format_bytes(static_cast<uint64_t>(v.f_bavail) * v.f_frsize) +
            " free)";
  }
  return std::string("; ") + kShmDir + " is too small" + sizes +
         ": give it more (a container: docker run --shm-size=8g, or podman's --shm-size; a "
         "host: mount -o remount,size=50% /dev/shm), or free what other jobs left there";
}

// Maps the named segment; the caller closes nothing (the fd is closed here).
Result<uint8_t*> map_segment(const std::string& name, size_t bytes, bool create,
                             int* open_errno = nullptr) {
  int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                  : shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    if (open_errno != nullptr) *open_errno = errno;
    return errno_error("shm_open('" + name + "')");
  }
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Error e = errno_error("ftruncate('" + name + "', " + std::to_string(bytes) + " bytes)");
    close(fd);
    shm_unlink(name.c_str());
    return e;
  }
  // Reserve every page now: /dev/shm is a tmpfs of limited size (64 MiB in a Docker container
  // by default), and a page past its end would be a SIGBUS at the first write, not an error.
  if (create) {
    if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
      close(fd);
      shm_unlink(name.c_str());
      return io_error("reserving " + strings::format_bytes(bytes) + " of shared memory in " +
                      kShmDir + ": " + std::strerror(err) + shm_space_hint(err));
    }
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  Error e = errno_error("mmap('" + name + "', " + std::to_string(bytes) + " bytes)");
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name.c_str());
    return e;
  }
  return static_cast<uint8_t*>(p);
}

}  // namespace

SharedSegment::SharedSegment(uint8_t* map, size_t map_bytes, int local_size, int local_rank,
                             size_t bytes_per_rank, size_t stride, size_t header)
    : map_(map),
      map_bytes_(map_bytes),
      local_size_(local_size),
      local_rank_(local_rank),
      bytes_per_rank_(bytes_per_rank),
      stride_(stride),
      data_(map + header),
      small_(map + static_cast<size_t>(local_size) * kLine) {}

SharedSegment::~SharedSegment() { munmap(map_, map_bytes_); }

Result<std::shared_ptr<SharedSegment>> SharedSegment::create(Communicator& local,
                                                             size_t bytes_per_rank,
                                                             Deadline deadline) {
  static std::atomic<uint64_t> counter{0};
  const int n = local.size();
  const int me = local.rank();
  const size_t small_bytes = 2 * static_cast<size_t>(n) * kSmallSlotLines * kLine;
  const size_t header = round_up(static_cast<size_t>(n) * kLine + small_bytes, kPage);
  const size_t stride = round_up(bytes_per_rank == 0 ? 1 : bytes_per_rank, kPage);
  const size_t total = header + stride * static_cast<size_t>(n);

  char name[64] = {};
  uint8_t* map = nullptr;
  if (me == 0) {
    // The name is unlinked once every local rank has mapped it, but a rank 0 killed before
    // that leaves it behind (dltune's launcher removes it when it reaps the rank; another
    // launcher may not), and a later process with its pid would find it taken: the next
    // counter values are tried (a stale name is never removed here: in another pid namespace
    // sharing /dev/shm it may be a live job's).
    Result<uint8_t*> m = internal_error("no segment name tried");
    for (int attempt = 0; attempt < kNameAttempts; ++attempt) {
      std::snprintf(name, sizeof name, "%s",
                    shm_segment_name(static_cast<int>(getpid()), counter.fetch_add(1)).c_str());
      int open_errno = 0;
      m = map_segment(name, total, true, &open_errno);
      if (m || open_errno != EEXIST) break;
    }
    // Peers learn about a failure from an empty name, so that they fail too instead of waiting.
    if (!m) name[0] = '\0';
    Status sent;
    for (int r = 1; r < n && sent; ++r) sent = local.send(r, kNameTag, name, sizeof name, deadline);
    if (!m) return sent ? m.error().wrap("creating a node-shared segment") : sent.error();
    map = *m;
    if (!sent) {  // a peer is gone: the segment goes too
      shm_unlink(name);
      munmap(map, total);
      return sent.error();
    }
    bool acked = true;
    Status failed;
    for (int r = 1; r < n; ++r) {
      char ack = 0;
      Status s = local.recv(r, kAckTag, &ack, 1, deadline);
      if (!s && failed) failed = s;
      if (s && ack != 1) acked = false;
    }
    shm_unlink(name);
    if (!failed || !acked) {
      munmap(map, total);
      if (!failed) return failed.error();
      return io_error("a local rank could not map the node-shared segment");
    }
  } else {
    DLTUNE_TRY(local.recv(0, kNameTag, name, sizeof name, deadline));
    if (name[0] == '\0') return io_error("local rank 0 could not create a node-shared segment");
    auto m = map_segment(name, total, false);
    char ack = m ? 1 : 0;
    DLTUNE_TRY(local.send(0, kAckTag, &ack, 1, deadline));
    if (!m) return m.error().wrap("mapping a node-shared segment");
    map = *m;
  }
  auto segment = std::shared_ptr<SharedSegment>(
      new SharedSegment(map, total, n, me, bytes_per_rank, stride, header));
  segment->name_ = name;
  return segment;
}

// Every rank stores its epoch (the count of barriers it entered) in its own line and waits
// for every other line to reach it: one line transfer each way, no contended read-modify-write
// (a shared counter and generation word before). Measured with 2 ranks on the barrier path
// (comm/algo_shm.cc), alternating binaries: 16 KiB 0.74-0.76 against 0.76-1.00 us, 32-128 KiB
// 3-8 % faster, 2-8 KiB unchanged; 4 ranks on 2 cores unchanged within the noise. `>=`: a rank
// that passed this barrier may already have entered the next.
Status SharedSegment::barrier(Deadline deadline) {
  if (local_size_ == 1) return ok_status();
  const uint64_t epoch = ++barrier_epoch_;
  epoch_word(map_, local_rank_).store(epoch, std::memory_order_release);
  SpinWait spin(local_size_);
  for (int k = 0; k < local_size_; ++k) {
    while (epoch_word(map_, k).load(std::memory_order_acquire) < epoch) {
      if (!spin.wait(deadline)) {
        // Which ones are missing (the first 8): a hung rank says nothing itself.
        int arrived = 0;
        std::string missing;
        int named = 0;
        for (int r = 0; r < local_size_; ++r) {
          if (epoch_word(map_, r).load(std::memory_order_relaxed) >= epoch) {
            ++arrived;
          } else if (++named <= 8) {
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
          }
        }
        if (named > 8) missing += ", ...";
        return timeout_error(std::string(named == 1 ? "local rank " : "local ranks ") + missing +
                             " did not reach the shared-memory barrier in time (" +
                             std::to_string(arrived) + " of " + std::to_string(local_size_) +
                             " arrived)");
      }
    }
  }
  return ok_status();
}

void SharedSegment::publish(int word, uint64_t value) {
  DLTUNE_CHECK(word >= 0 && word < kPublishedWords, "published word out of range");
  published_word(map_, local_rank_, word).store(value, std::memory_order_relaxed);
}

uint64_t SharedSegment::published(int local_rank, int word) const {
  return published_word(map_, local_rank, word).load(std::memory_order_relaxed);
}

}  // namespace dltune::comm
