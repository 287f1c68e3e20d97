// Cross-memory attach: the copies and the node-local probe (see comm/cma.h).
#include "comm/cma.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "comm/algorithms.h"
#include "common/env.h"
#include "common/log.h"

namespace dltune::comm {
namespace cma {
namespace {

constexpr int kProbeTag = kReservedTagBase + 910;
constexpr int kReasonTag = kReservedTagBase + 911;
constexpr size_t kReasonBytes = 512;  // the refusal's text, broadcast to every local rank

std::mutex g_fault_mu;
std::function<int(int)> g_fault;  // set_probe_fault()
// Whether this process has said that CMA works, or that it was refused (once each).
std::atomic<bool> g_said_usable{false};
std::atomic<bool> g_said_refused{false};

std::atomic<uint64_t> g_copied{0};  // copied_bytes()

Status transfer(bool to_remote, pid_t pid, void* local, void* remote, size_t bytes) {
  g_copied.fetch_add(bytes, std::memory_order_relaxed);
  auto* l = static_cast<uint8_t*>(local);
  auto* r = static_cast<uint8_t*>(remote);
  while (bytes > 0) {
    const iovec li{l, bytes}, ri{r, bytes};
    const ssize_t n = to_remote ? process_vm_writev(pid, &li, 1, &ri, 1, 0)
                                : process_vm_readv(pid, &li, 1, &ri, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EFAULT;  // nothing copied and no error: treat as a bad address
      return errno_error(std::string(to_remote ? "process_vm_writev to" : "process_vm_readv from") +
                         " process " + std::to_string(pid) + " (" + std::to_string(bytes) +
                         " bytes)");
    }
    l += n, r += n, bytes -= static_cast<size_t>(n);
  }
  return ok_status();
}

// Yama's /proc/sys/kernel/yama/ptrace_scope (0-3), or -1 where Yama is absent.
int ptrace_scope() {
  std::ifstream in("/proc/sys/kernel/yama/ptrace_scope");
  int v = -1;
  if (!(in >> v)) return -1;
  return v;
}

std::string scope_hint(int scope) {
  switch (scope) {
    case 1:
      return "; Yama's ptrace_scope is 1 (a process may attach only to its descendants or to "
             "processes that allow it)";
    case 2:
      return "; Yama's ptrace_scope is 2 (only CAP_SYS_PTRACE may attach)";
    case 3:
      return "; Yama's ptrace_scope is 3 (no process may attach)";
    default:
      return "";
  }
}

struct Record {
  int64_t pid = 0;
  uint64_t address = 0;  // of the rank's probe word
  uint64_t word = 0;     // its value
};

// Every local rank's record.
Result<std::vector<Record>> exchange(Communicator& local, const Record& mine, Deadline deadline) {
  std::vector<Record> all(static_cast<size_t>(local.size()));
  DLTUNE_TRY(detail::ring_allgather(local, &mine, sizeof mine, all.data(), kProbeTag, deadline));
  return all;
}

// Reads local rank k's probe word, checks it, and writes it back unchanged.
Status try_peer(const Record& r, int k, int me) {
  const std::string who =
      "local rank " + std::to_string(k) + " (pid " + std::to_string(r.pid) + ")";
  int injected = 0;
  {
    std::lock_guard lock(g_fault_mu);
    if (g_fault) injected = g_fault(me);
  }
  if (injected != 0) {
    return io_error("process_vm_readv from " + who + ": " + std::strerror(injected) +
                    " (injected by a test)");
  }
  uint64_t got = 0;
  void* remote = reinterpret_cast<void*>(r.address);
  DLTUNE_TRY_CTX(read(static_cast<pid_t>(r.pid), &got, remote, sizeof got), "reading " + who);
  if (got != r.word) {
    return io_error("process " + std::to_string(r.pid) + " holds another value at " + who +
                    "'s probe word: the ranks do not share one PID namespace");
  }
  DLTUNE_TRY_CTX(write(static_cast<pid_t>(r.pid), remote, &got, sizeof got), "writing " + who);
  return ok_status();
}

// This rank's verdict: OK, or why it cannot use CMA with some peer.
Status probe_peers(const std::vector<Record>& all, int me, int scope) {
  for (int k = 0; k < static_cast<int>(all.size()); ++k) {
    if (k == me) continue;
    Status s = try_peer(all[static_cast<size_t>(k)], k, me);
    if (!s) return io_error(s.error().message() + scope_hint(scope));
  }
  return ok_status();
}

// The lowest local rank whose verdict is not OK (n when all are), and its reason, the same on
// every local rank.
Status agree(Communicator& local, const Status& mine, Deadline deadline, CmaPeers* out) {
  const int n = local.size(), me = local.rank();
  int32_t first = mine.ok() ? n : me;
  AllreduceOptions o;
  const detail::Call call{local, &first, &first, 1, DataType::kI32, ReduceOp::kMin, 4, deadline, o};
  DLTUNE_TRY(detail::recursive_doubling(call));
  out->usable = first == n;
  if (out->usable) return ok_status();
  char reason[kReasonBytes] = {};
  if (me == first) {
    std::snprintf(reason, sizeof reason, "%s", mine.error().message().c_str());
  }
  DLTUNE_TRY(detail::binomial_broadcast(local, reason, sizeof reason, first, kReasonTag, deadline));
  out->reason = "local rank " + std::to_string(first) + ": " + reason;
  return ok_status();
}

void log_once(const CmaPeers& p, int me, int n, bool turned_off) {
  if (p.usable) {
    if (me == 0 && !g_said_usable.exchange(true)) {
      DLTUNE_LOG(kInfo, "comm") << "cross-memory attach works between the " << n
                                << " ranks of this node: the 'cma' allreduce copies once";
    }
    return;
  }
  // The refusing rank itself says it (with its own reason), once per process.
  if (p.reason.rfind("local rank " + std::to_string(me) + ":", 0) != 0) return;
  if (g_said_refused.exchange(true)) return;
  if (turned_off) {
    DLTUNE_LOG(kInfo, "comm") << "cross-memory attach is turned off (DLTUNE_COMM_CMA=off): the "
                                 "'cma' allreduce stages through node-shared memory as 'shm' does";
  } else {
    DLTUNE_LOG(kWarn, "comm") << "cross-memory attach refused (" << p.reason
                              << "): the 'cma' allreduce falls back to staging through "
                                 "node-shared memory as 'shm' does";
  }
}

}  // namespace

Status read(pid_t pid, void* local, const void* remote, size_t bytes) {
  return transfer(false, pid, local, const_cast<void*>(remote), bytes);
}

Status write(pid_t pid, void* remote, const void* local, size_t bytes) {
  return transfer(true, pid, const_cast<void*>(local), remote, bytes);
}

uint64_t copied_bytes() { return g_copied.load(std::memory_order_relaxed); }

void set_probe_fault(std::function<int(int)> fault) {
  std::lock_guard lock(g_fault_mu);
  g_fault = std::move(fault);
  g_said_usable = false;
  g_said_refused = false;
}

Result<std::shared_ptr<CmaPeers>> probe(Communicator& local, Deadline deadline) {
  const std::string setting = env::get(env::kCommCma);
  if (setting != "auto" && setting != "off") {
    return invalid_input("DLTUNE_COMM_CMA must be 'auto' or 'off', got '" + setting + "'");
  }
  auto out = std::make_shared<CmaPeers>();
  const int n = local.size(), me = local.rank();
  const int scope = ptrace_scope();
  // Under ptrace_scope 1 a sibling may attach only when this process names it; the local
  // ranks are siblings (children of one launcher), so allow any, as Open MPI's btl/vader does
  // for the same copies (it has done so already in an MPI rank that uses it).
  if (scope == 1 && setting == "auto") prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  std::random_device rd;
  out->probe_word = (uint64_t{rd()} << 32 | rd()) ^ static_cast<uint64_t>(getpid());
  const Record mine{getpid(), reinterpret_cast<uint64_t>(&out->probe_word), out->probe_word};
  auto all = exchange(local, mine, deadline);
  if (!all) return all.error();
  const Status verdict = setting == "off"
                             ? Status(invalid_input("turned off with DLTUNE_COMM_CMA=off"))
                             : probe_peers(*all, me, scope);
  DLTUNE_TRY(agree(local, verdict, deadline, out.get()));
  if (out->usable) {
    for (const Record& r : *all) out->pids.push_back(static_cast<pid_t>(r.pid));
  }
  log_once(*out, me, n, setting == "off");
  return out;
}

}  // namespace cma

Result<const CmaPeers*> Communicator::cma_peers(Deadline deadline) {
  Communicator& loc = local();
  if (!loc.cma_) {
    auto p = cma::probe(loc, deadline);
    if (!p) return p.error().wrap("probing cross-memory attach on " + describe());
    loc.cma_ = std::move(*p);
  }
  return loc.cma_.get();
}

}  // namespace dltune::comm
