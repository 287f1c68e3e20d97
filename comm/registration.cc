// Registered memory (see comm/registration.h): moving a buffer's whole pages into a memfd that
// every local rank maps, and back.
#include "comm/registration.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm/algorithms.h"
#include "comm/cma.h"
#include "common/log.h"

namespace dltune::comm {
namespace {

constexpr int kRecordTag = kReservedTagBase + 920;
constexpr uint64_t kPage = 4096;

// What each rank tells the others: where its shared pages are and how to open them.
struct Record {
  int64_t pid = 0;
  int64_t fd = -1;  // the memfd, open in that process until every peer mapped it
  uint64_t base = 0;
  uint64_t bytes = 0;
};

Error errno_error(const std::string& what) { return io_error(what + ": " + std::strerror(errno)); }

// Every local rank's record.
Result<std::vector<Record>> exchange(Communicator& local, const Record& mine, Deadline deadline) {
  std::vector<Record> all(static_cast<size_t>(local.size()));
  DLTUNE_TRY(detail::ring_allgather(local, &mine, sizeof mine, all.data(), kRecordTag, deadline));
  return all;
}

// The lowest local rank whose step failed (n when none did), the same on every local rank.
// Also a barrier: every rank has finished the step when it returns.
Result<int> first_failure(Communicator& local, bool failed, Deadline deadline) {
  int32_t first = failed ? local.rank() : local.size();
  AllreduceOptions o;
  const detail::Call call{local, &first, &first, 1, DataType::kI32, ReduceOp::kMin, 4, deadline, o};
  DLTUNE_TRY(detail::recursive_doubling(call));
  return static_cast<int>(first);
}

// Whether every mapping of [base, base + bytes) in /proc/self/maps is the memfd `name`.
bool still_mapped(uint64_t base, size_t bytes, const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  uint64_t covered = 0;
  while (std::getline(maps, line)) {
    uint64_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2) continue;
    if (hi <= base || lo >= base + bytes) continue;
    if (line.find("/memfd:" + name + " ") == std::string::npos) return false;
    covered += std::min<uint64_t>(hi, base + bytes) - std::max<uint64_t>(lo, base);
  }
  return covered == bytes;
}

// Gives [base, base + bytes) private anonymous pages with its current contents.
void make_private(uint8_t* base, size_t bytes, const std::string& name) {
  if (!still_mapped(reinterpret_cast<uint64_t>(base), bytes, name)) {
    DLTUNE_LOG(kWarn, "comm") << "a registered buffer's pages at " << static_cast<void*>(base)
                              << " were unmapped or remapped before its Registration ended (was "
                                 "it freed?): left as they are";
    return;
  }
  void* tmp = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (tmp == MAP_FAILED) {
    DLTUNE_LOG(kWarn, "comm") << "deregistering " << bytes << " bytes at "
                              << static_cast<void*>(base) << ": mmap: " << std::strerror(errno)
                              << "; the buffer stays shared";
    return;
  }
  std::memcpy(tmp, base, bytes);
  if (mremap(tmp, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, base) == MAP_FAILED) {
    DLTUNE_LOG(kWarn, "comm") << "deregistering " << bytes << " bytes at "
                              << static_cast<void*>(base) << ": mremap: " << std::strerror(errno)
                              << "; the buffer stays shared";
    munmap(tmp, bytes);
  }
}

// This rank's half-built registration, undone by its destructor unless committed.
struct Pending {
  int fd = -1;
  uint8_t* copy = nullptr;  // the memfd mapped anywhere, holding the buffer's pages
  size_t bytes = 0;
  std::vector<std::pair<uint8_t*, size_t>> peers;  // peers' memfds mapped here
  ~Pending() {
    if (copy != nullptr) munmap(copy, bytes);
    if (fd >= 0) close(fd);
    for (auto [p, n] : peers) munmap(p, n);
  }
};

// Step 1: the memfd with a copy of this rank's whole pages [base, base + bytes).
Status copy_out(uint8_t* base, size_t bytes, const std::string& name, Pending* p) {
  p->fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (p->fd < 0) return errno_error("memfd_create");
  // Reserve the pages now (a full memory cgroup is an error here, not a SIGBUS in the copy).
  if (ftruncate(p->fd, static_cast<off_t>(bytes)) != 0) return errno_error("ftruncate");
  if (const int e = posix_fallocate(p->fd, 0, static_cast<off_t>(bytes)); e != 0) {
    errno = e;
    return errno_error("reserving " + std::to_string(bytes) + " bytes (fallocate)");
  }
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
  if (m == MAP_FAILED) return errno_error("mmap of the memfd");
  p->copy = static_cast<uint8_t*>(m);
  p->bytes = bytes;
  std::memcpy(p->copy, base, bytes);
  return ok_status();
}

// Step 2: every peer's memfd, mapped here (spans[k].mapped; this rank's own is left null).
Status map_peers(const std::vector<Record>& all, int me,
                 std::vector<RegistrationState::Span>* spans, Pending* p) {
  spans->resize(all.size());
  for (int k = 0; k < static_cast<int>(all.size()); ++k) {
    const Record& r = all[static_cast<size_t>(k)];
    auto& span = (*spans)[static_cast<size_t>(k)];
    span.base = r.base;
    span.bytes = r.bytes;
    if (k == me || r.bytes == 0) continue;
    const std::string path = "/proc/" + std::to_string(r.pid) + "/fd/" + std::to_string(r.fd);
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return errno_error("opening local rank " + std::to_string(k) + "'s memfd " + path);
    void* m = mmap(nullptr, r.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    const int e = errno;
    close(fd);
    if (m == MAP_FAILED) {
      errno = e;
      return errno_error("mapping local rank " + std::to_string(k) + "'s memfd");
    }
    span.mapped = static_cast<uint8_t*>(m);
    p->peers.emplace_back(span.mapped, r.bytes);
  }
  return ok_status();
}

}  // namespace

RegistrationState::~RegistrationState() {
  for (int k = 0; k < static_cast<int>(spans.size()); ++k) {
    const Span& s = spans[static_cast<size_t>(k)];
    if (s.bytes == 0) continue;
    if (k == local_rank) {
      make_private(s.mapped, s.bytes, name);
    } else {
      munmap(s.mapped, s.bytes);
    }
  }
}

void* Registration::shared_begin() const {
  return active() ? state_->spans[static_cast<size_t>(state_->local_rank)].mapped : nullptr;
}

size_t Registration::shared_bytes() const {
  return active() ? state_->spans[static_cast<size_t>(state_->local_rank)].bytes : 0;
}

Result<Registration> Communicator::register_memory(void* p, size_t bytes) {
  if (p == nullptr && bytes > 0) return invalid_input("register_memory: null buffer");
  // Behind any allreduce still queued on the communication thread, as every collective.
  Result<Registration> out = Registration();
  const Status s = run_collective([&]() -> Status {
    out = register_now(p, bytes);
    return ok_status();  // the outcome is `out`
  });
  if (!s) return s.error();
  return out;
}

Result<Registration> Communicator::register_now(void* p, size_t bytes) {
  Communicator& loc = local();
  const Deadline deadline = deadline_from_now();
  auto peers = cma_peers(deadline);
  if (!peers) return peers.error().wrap("registering memory on " + describe());
  const uint64_t id = ++loc.registrations_made_;
  if (!(*peers)->usable) {
    return Registration(nullptr, "cross-memory attach is refused on this node (" +
                                     (*peers)->reason + "): the buffer stays private");
  }
  const int n = loc.size(), me = loc.rank();
  auto st = std::make_shared<RegistrationState>();
  st->id = id;
  st->user = static_cast<uint8_t*>(p);
  st->user_bytes = bytes;
  st->local_rank = me;
  st->name = "dltune-reg-" + std::to_string(getpid()) + "-" + std::to_string(id);
  // Whole pages only: [lo, hi).
  const uint64_t at = reinterpret_cast<uint64_t>(p);
  const uint64_t lo = (at + kPage - 1) / kPage * kPage, hi = (at + bytes) / kPage * kPage;
  const size_t span = hi > lo ? hi - lo : 0;
  auto* base = reinterpret_cast<uint8_t*>(lo);

  Pending pending;
  Status mine = span > 0 ? copy_out(base, span, st->name, &pending) : ok_status();
  const Record rec{getpid(), pending.fd, lo, mine ? span : 0};
  auto all = exchange(loc, rec, deadline);
  if (!all) return all.error().wrap("registering memory on " + describe());
  std::vector<RegistrationState::Span> spans;
  if (mine) mine = map_peers(*all, me, &spans, &pending);
  // Every rank has mapped its peers (or failed) past this point: the memfds may close.
  auto failed = first_failure(loc, !mine, deadline);
  if (!failed) return failed.error().wrap("registering memory on " + describe());
  const std::string where = "registering " + std::to_string(bytes) + " bytes on " + describe();
  if (!mine) return mine.error().wrap(where);
  if (*failed < n) {
    return peer_failed(where + ": local rank " + std::to_string(*failed) +
                       " could not register its buffer (see its error)");
  }
  if (span > 0) {
    // Move the memfd's mapping (the same contents) over the buffer's pages.
    if (mremap(pending.copy, span, span, MREMAP_MAYMOVE | MREMAP_FIXED, base) == MAP_FAILED) {
      return errno_error(where + ": mremap over the buffer");
    }
    pending.copy = nullptr;
    madvise(base, span, MADV_DONTFORK);
    spans[static_cast<size_t>(me)].mapped = base;
  }
  st->spans = std::move(spans);
  pending.peers.clear();  // the state owns them now
  std::erase_if(loc.registrations_, [](const auto& w) { return w.expired(); });
  loc.registrations_.push_back(st);
  return Registration(std::move(st), "");
}

std::shared_ptr<const RegistrationState> Communicator::find_registration(const void* p,
                                                                         size_t bytes) {
  const auto* q = static_cast<const uint8_t*>(p);
  for (const auto& w : local().registrations_) {
    auto st = w.lock();
    if (st && q >= st->user && q + bytes <= st->user + st->user_bytes) return st;
  }
  return nullptr;
}

std::shared_ptr<const RegistrationState> Communicator::registration(uint64_t id) {
  for (const auto& w : local().registrations_) {
    auto st = w.lock();
    if (st && st->id == id) return st;
  }
  return nullptr;
}

}  // namespace dltune::comm
