// The NCCL communicator (comm/nccl_communicator.h), built only with NCCL: the unique-id exchange
// over the Bootstrap, non-blocking init under a deadline, and the communicator's lifetime. The
// operations are in nccl_ops.cc; a build without NCCL compiles nccl_none.cc instead.
//
// Every NCCL communicator here is non-blocking (ncclConfig_t::blocking = 0): NCCL calls may
// return ncclInProgress and finish in the background; settle() polls ncclCommGetAsyncError until
// they did, or aborts the communicator (ncclCommAbort) at the deadline. A rank whose peer died
// therefore gets kTimeout instead of hanging inside NCCL.
#include "comm/nccl_communicator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "comm/bootstrap/bootstrap.h"
#include "comm/nccl_impl.h"
#include "common/env.h"
#include "common/log.h"
#include "common/strings.h"

namespace dltune::comm {
namespace {

std::chrono::milliseconds comm_timeout() {
  auto v = strings::parse_int(env::get(env::kCommTimeout));
  if (!v || *v <= 0) return std::chrono::milliseconds(300000);
  return std::chrono::milliseconds(*v);
}

// NCCL's spelling of an algorithm / protocol in NCCL_ALGO / NCCL_PROTO (parse_nccl_choice has
// checked the name).
std::string env_algo(const std::string& a) {
  if (a == "ring") return "Ring";
  if (a == "tree") return "Tree";
  if (a == "collnet_direct") return "CollNetDirect";
  if (a == "collnet_chain") return "CollNetChain";
  if (a == "nvls") return "NVLS";
  if (a == "nvls_tree") return "NVLSTree";
  return "PAT";
}
std::string env_proto(const std::string& p) {
  if (p == "ll") return "LL";
  if (p == "ll128") return "LL128";
  return "Simple";
}

// Sets NCCL_ALGO / NCCL_PROTO for the communicator being created: NCCL's per-function syntax
// "allreduce:Ring", appended to a value the user set (a later entry for allreduce replaces an
// earlier one), and restores the previous values on destruction. NCCL reads both variables
// when it builds a communicator's tuning tables during init (ncclGetEnv: getenv through NCCL's
// default env plugin, not cached per process; checked against NCCL 2.28's tuning code), so the
// override covers exactly the communicators initialised while it is alive. Holders serialise on
// one mutex: setenv is not safe against a concurrent init reading the environment.
class EnvOverride {
 public:
  explicit EnvOverride(const NcclOptions& o) : lock_(mutex()) {
    if (!o.algo.empty()) set("NCCL_ALGO", "allreduce:" + env_algo(o.algo), &algo_);
    if (!o.proto.empty()) set("NCCL_PROTO", "allreduce:" + env_proto(o.proto), &proto_);
  }
  ~EnvOverride() {
    restore("NCCL_ALGO", algo_);
    restore("NCCL_PROTO", proto_);
  }
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

 private:
  struct Saved {
    bool touched = false;
    std::optional<std::string> value;
  };
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static void set(const char* name, const std::string& entry, Saved* saved) {
    saved->touched = true;
    const char* old = std::getenv(name);  // NCCL's variable, not one of env.h's DLTUNE_*
    if (old != nullptr) saved->value = old;
    const std::string v = old != nullptr && *old != '\0' ? std::string(old) + ";" + entry : entry;
    setenv(name, v.c_str(), 1);
    DLTUNE_LOG(kDebug, "nccl") << name << "=" << v << " while this communicator initialises";
  }
  static void restore(const char* name, const Saved& saved) {
    if (!saved.touched) return;
    if (saved.value) {
      setenv(name, saved.value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  std::lock_guard<std::mutex> lock_;
  Saved algo_, proto_;
};

// Makes one id key per communicator of this process: every rank creates its communicators in
// the same order, so the sequence numbers agree and a later create never reads an old id.
std::atomic<int> g_id_sequence{0};

// What a rank checks before joining the id exchange.
Status check_local(int device, const NcclOptions& opts) {
  DLTUNE_TRY(parse_nccl_choice(nccl_choice_name(opts)));
  auto n = cuda_device_count();
  if (!n) return n.error();
  if (device < 0 || device >= *n) {
    return invalid_input("GPU " + std::to_string(device) + " does not exist: this process sees " +
                         std::to_string(*n) + " CUDA device(s) (check CUDA_VISIBLE_DEVICES)");
  }
  return cuda_check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

// Rank 0 publishes the unique id (or "!" and why it has none); everyone fences and reads it.
// Every rank joins the fence even when its own checks failed (`local`), so that no peer is
// left waiting there.
Result<ncclUniqueId> exchange_id(Bootstrap& boot, const std::string& key, const Status& local,
                                 Deadline deadline) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (boot.rank() == 0) {
    std::string value;
    if (!local) {
      value = "!" + local.error().message();
    } else if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      value = "!ncclGetUniqueId failed: " + nccl_text(r, nullptr);
    } else {
      value.assign(reinterpret_cast<const char*>(&id), sizeof id);
    }
    DLTUNE_TRY(boot.put(key, value));
  }
  DLTUNE_TRY(boot.commit());
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  DLTUNE_TRY(boot.fence(std::max(left, std::chrono::milliseconds(1))));
  auto v = boot.get(0, key);
  if (!v) return std::move(v).error().wrap("reading rank 0's NCCL unique id");
  if (!v->empty() && (*v)[0] == '!') {
    if (boot.rank() == 0) return internal_error(v->substr(1));
    return peer_failed("rank 0 could not start NCCL: " + v->substr(1));
  }
  if (v->size() != sizeof id) {
    return internal_error("rank 0's NCCL unique id has " + std::to_string(v->size()) +
                          " bytes, expected " + std::to_string(sizeof id));
  }
  std::memcpy(&id, v->data(), sizeof id);
  return id;
}

}  // namespace

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

Status cuda_check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return ok_status();
  return internal_error(what + " failed: " + cuda_text(e));
}

std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') s += " (" + std::string(last) + ")";
  return s;
}

Status settle(ncclComm_t comm, const std::string& what, Deadline deadline, bool* aborted) {
  for (uint64_t polls = 0;; ++polls) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return internal_error(what + ": " + nccl_text(r, comm));
    if (state == ncclSuccess) return ok_status();
    if (state != ncclInProgress) {
      std::string msg = what + " failed: " + nccl_text(state, comm);
      ncclCommAbort(comm);
      *aborted = true;
      return internal_error(msg);
    }
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      *aborted = true;
      return timeout_error(what +
                           " did not finish in time (a peer rank may have died or not started "
                           "NCCL); the NCCL communicator was aborted");
    }
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

Status NcclCommunicator::Impl::usable() const {
  if (comm == nullptr || aborted) {
    return internal_error("the NCCL communicator was aborted after an earlier error");
  }
  return cuda_check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

Status NcclCommunicator::Impl::finish(ncclResult_t r, const std::string& what, Deadline deadline) {
  if (r != ncclSuccess && r != ncclInProgress) {
    return internal_error(what + " failed: " + nccl_text(r, comm));
  }
  return settle(comm, what, deadline, &aborted);
}

bool nccl_available() { return true; }

std::string nccl_version_string() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // NCCL_VERSION(X, Y, Z) is X * 10000 + Y * 100 + Z from NCCL 2.9 on.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

Result<int> cuda_device_count() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    return unsupported("no CUDA device: cudaGetDeviceCount said " + cuda_text(e));
  }
  if (n <= 0) return unsupported("no CUDA device: cudaGetDeviceCount found 0 devices");
  return n;
}

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create(Bootstrap& boot, int device,
                                                                   const NcclOptions& opts) {
  const std::string what = "creating the NCCL communicator (" + nccl_choice_name(opts) + ")";
  const Deadline deadline = Clock::now() + comm_timeout();
  const std::string key = "dltune.nccl.id." + std::to_string(g_id_sequence++);
  Status local = check_local(device, opts);
  auto id = exchange_id(boot, key, local, deadline);
  if (!local) return std::move(local).error().wrap(what);
  if (!id) return std::move(id).error().wrap(what);

  auto impl = std::make_unique<Impl>();
  impl->rank = boot.rank(), impl->size = boot.size(), impl->device = device;
  impl->local_rank = boot.local_rank(), impl->node_index = boot.node_index();
  impl->num_nodes = boot.num_nodes();
  impl->options = opts;
  {
    EnvOverride env(opts);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&impl->comm, impl->size, *id, impl->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      std::string msg = "ncclCommInitRankConfig failed: " + nccl_text(r, impl->comm);
      if (impl->comm != nullptr) ncclCommAbort(impl->comm);
      return internal_error(msg).wrap(what);
    }
    DLTUNE_TRY_CTX(settle(impl->comm, "ncclCommInitRank", deadline, &impl->aborted), what);
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) impl->device_name = prop.name;
  // From here on the destructor cleans up.
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(std::move(impl)));
  DLTUNE_TRY_CTX(cuda_check(cudaStreamCreateWithFlags(&c->impl_->stream, cudaStreamNonBlocking),
                            "cudaStreamCreateWithFlags"),
                 what);
  DLTUNE_LOG(kInfo, "nccl") << c->describe() << ", NCCL " << nccl_version_string() << ", "
                            << nccl_choice_name(opts);
  return c;
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::mutex& nccl_issue_mutex() {
  static std::mutex m;
  return m;
}

NcclCommunicator::~NcclCommunicator() {
  stop_comm_thread();
  impl_->local.reset();
  impl_->leaders.reset();
  if (impl_->comm != nullptr && !impl_->aborted && impl_->has_pending_requests()) {
    // A receive that is never matched would hold ncclCommFinalize until the deadline: cancel
    // the unfinished point-to-point work instead (its requests fail in detach_requests()).
    ncclCommAbort(impl_->comm);
    impl_->aborted = true;
  }
  if (impl_->comm != nullptr && !impl_->aborted) {
    (void)cudaSetDevice(impl_->device);
    // Flush outstanding work (bounded by the timeout: finish() aborts when the peers are gone).
    Status s =
        impl_->finish(ncclCommFinalize(impl_->comm), "ncclCommFinalize", deadline_from_now());
    if (s.ok()) {
      ncclCommDestroy(impl_->comm);
    } else {
      DLTUNE_LOG(kWarn, "nccl") << s.error().message();
      if (!impl_->aborted) ncclCommAbort(impl_->comm);
    }
  }
  impl_->detach_requests();  // after finalize (or abort): their work is done or gone
  if (impl_->stream != nullptr) (void)cudaStreamDestroy(impl_->stream);
  if (impl_->p2p_stream != nullptr) (void)cudaStreamDestroy(impl_->p2p_stream);
}

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::size() const { return impl_->size; }
int NcclCommunicator::device() const { return impl_->device; }
const NcclOptions& NcclCommunicator::options() const { return impl_->options; }
std::string NcclCommunicator::describe() const {
  return "NCCL rank " + std::to_string(impl_->rank) + " of " + std::to_string(impl_->size) +
         " on GPU " + std::to_string(impl_->device) + " (" + impl_->device_name + ")";
}

}  // namespace dltune::comm
