// The embedded PMIx server (compiled only with PMIx; pmix_server_none.cc otherwise).
//
// libpmix calls the host back (the upcalls below) on its progress thread and expects the
// completion callbacks later; completing some of them inline deadlocks that thread
// (runtime-facts.md), so every completion goes through Completer, a single worker thread.
#include "launcher/backend/pmix_server.h"

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <pmix.h>
#include <pmix_server.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "comm/bootstrap/bootstrap.h"
#include "comm/bootstrap/pmix_info.h"
#include "common/log.h"

namespace dltune::launcher {
namespace {

std::string status_text(pmix_status_t rc) { return PMIx_Error_string(rc); }

// Runs callbacks on one worker thread, in order.
class Completer {
 public:
  Completer() : thread_([this] { loop(); }) {}
  ~Completer() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// Waits for one libpmix operation callback.
struct OpWaiter {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;

  static void callback(pmix_status_t st, void* cbdata) {
    auto* w = static_cast<OpWaiter*>(cbdata);
    std::lock_guard lock(w->mu);
    w->status = st;
    w->done = true;
    w->cv.notify_all();
  }
  pmix_status_t wait() {
    std::unique_lock lock(mu);
    cv.wait(lock, [this] { return done; });
    return status;
  }
};

using InfoArray = comm::PmixInfoArray;

// Owns a string malloc'd by libpmix.
struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using MallocString = std::unique_ptr<char, FreeDeleter>;

}  // namespace

class PmixServer::Impl {
 public:
  Completer completer;
  int event_fd = -1;
  mutable std::mutex mu;
  std::vector<RankPmixState> ranks;
  std::string nspace;
  bool job_registered = false;
  int first_lost = -1;       // under mu
  int first_finalized = -1;  // under mu
  size_t event_handler = 0;  // 0: none registered
  // The machine's topology handed to PMIx (PMIX_TOPOLOGY2): PMIx keeps pointers to both until
  // PMIx_server_finalize, so they live here.
  std::shared_ptr<hwloc_topology> machine;
  pmix_topology_t machine_ref{};
  FenceRelay relay;               // set: fences cross nodes through it
  std::vector<int> node_of_rank;  // the job's ranks' nodes (under mu)
  int nodes = 1;                  // under mu

  RankPmixState* state_of(const pmix_proc_t* proc) {
    if (proc == nullptr || nspace != proc->nspace || proc->rank >= ranks.size()) return nullptr;
    return &ranks[proc->rank];
  }
  void wake() {
    uint64_t one = 1;
    (void)!write(event_fd, &one, sizeof one);
  }
};

namespace {

PmixServer::Impl* g_server = nullptr;  // libpmix has one server per process

void complete_later(pmix_op_cbfunc_t cbfunc, void* cbdata) {
  if (cbfunc == nullptr || g_server == nullptr) return;
  g_server->completer.post([cbfunc, cbdata] { cbfunc(PMIX_SUCCESS, cbdata); });
}

pmix_status_t on_connected(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  {
    std::lock_guard lock(g_server->mu);
    if (auto* s = g_server->state_of(proc)) s->connected = true;
  }
  complete_later(cbfunc, cbdata);
  return PMIX_SUCCESS;
}

pmix_status_t on_finalized(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  {
    std::lock_guard lock(g_server->mu);
    if (auto* s = g_server->state_of(proc)) {
      s->finalized = true;
      if (g_server->first_finalized < 0) g_server->first_finalized = static_cast<int>(proc->rank);
    }
  }
  complete_later(cbfunc, cbdata);
  return PMIX_SUCCESS;
}

pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char msg[], pmix_proc_t[],
                       size_t, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  {
    std::lock_guard lock(g_server->mu);
    if (auto* s = g_server->state_of(proc); s != nullptr && !s->aborted) {
      s->aborted = true;
      s->abort_status = status;
      s->abort_message = msg != nullptr ? msg : "";
    }
  }
  g_server->wake();
  complete_later(cbfunc, cbdata);
  return PMIX_SUCCESS;
}

// libpmix notifies the server process itself when a client's connection drops before
// PMIx_Finalize (PMIX_ERR_LOST_CONNECTION; older releases PMIX_ERR_UNREACH or
// PMIX_ERR_LOST_CONNECTION_TO_CLIENT), with the client as the source. It also releases that
// client from pending fences at the same moment, which is how its peers learn of the death:
// this event therefore precedes every consequence of it.
void on_event(size_t, pmix_status_t status, const pmix_proc_t* source, pmix_info_t[], size_t,
              pmix_info_t[], size_t, pmix_event_notification_cbfunc_fn_t cbfunc, void* cbdata) {
  const bool lost = status == PMIX_ERR_LOST_CONNECTION || status == PMIX_ERR_UNREACH ||
                    status == PMIX_ERR_LOST_CONNECTION_TO_CLIENT ||
                    status == PMIX_ERR_PROC_TERM_WO_SYNC;
  if (lost && g_server != nullptr) {
    std::lock_guard lock(g_server->mu);
    if (auto* s = g_server->state_of(source); s != nullptr && !s->finalized && !s->lost) {
      s->lost = true;
      if (g_server->first_lost < 0) g_server->first_lost = static_cast<int>(source->rank);
    }
  }
  if (cbfunc != nullptr) cbfunc(PMIX_EVENT_ACTION_COMPLETE, nullptr, 0, nullptr, nullptr, cbdata);
}

// A fence of ranks on several nodes: libpmix has collected this node's contribution (`data`)
// and wants every participating node's, concatenated, back through cbfunc (on another
// thread, as every completion). The key names the nodes taking part and the participants.
void release_string(void* held) { delete static_cast<std::string*>(held); }

pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t[], size_t,
                       char* data, size_t ndata, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  DLTUNE_LOG(kDebug, "pmix") << "fence of " << nprocs << " participant(s), " << ndata << " bytes";
  if (g_server == nullptr || !g_server->relay) return PMIX_ERR_NOT_SUPPORTED;
  std::vector<bool> part;
  std::string who;
  {
    std::lock_guard lock(g_server->mu);
    part.assign(static_cast<size_t>(g_server->nodes), false);
    for (size_t i = 0; i < nprocs; ++i) {
      const pmix_rank_t r = procs[i].rank;
      who += (i ? "," : "") + std::string(procs[i].nspace) + ":" +
             (r == PMIX_RANK_WILDCARD ? std::string("*") : std::to_string(r));
      if (r == PMIX_RANK_WILDCARD) {
        part.assign(part.size(), true);
      } else if (r < g_server->node_of_rank.size()) {
        part[static_cast<size_t>(g_server->node_of_rank[r])] = true;
      }
    }
  }
  std::string key;
  for (size_t n = 0; n < part.size(); ++n) {
    if (part[n]) key += (key.empty() ? "" : ",") + std::to_string(n);
  }
  key += ";" + who;
  g_server->relay(key, std::string(data != nullptr ? data : "", ndata),
                  [cbfunc, cbdata](bool ok, std::string all) {
                    if (g_server == nullptr || cbfunc == nullptr) return;
                    auto* held = new std::string(std::move(all));
                    g_server->completer.post([cbfunc, cbdata, ok, held] {
                      cbfunc(ok ? PMIX_SUCCESS : PMIX_ERR_TIMEOUT, held->data(), held->size(),
                             cbdata, release_string, held);
                    });
                  });
  return PMIX_SUCCESS;
}

// Open MPI reports MPI_Init failures only through PMIx_Log: print every string it sends.
void on_log(const pmix_proc_t* client, const pmix_info_t data[], size_t ndata, const pmix_info_t[],
            size_t, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  for (size_t i = 0; i < ndata; ++i) {
    if (data[i].value.type != PMIX_STRING || data[i].value.data.string == nullptr) continue;
    std::string line = data[i].value.data.string;
    while (!line.empty() && line.back() == '\n') line.pop_back();
    std::fprintf(stderr, "[rank %u] %s\n", client != nullptr ? client->rank : 0u, line.c_str());
  }
  complete_later(cbfunc, cbdata);
}

pmix_server_module_t g_module = [] {
  pmix_server_module_t m{};
  m.client_connected = on_connected;
  m.client_finalized = on_finalized;
  m.abort = on_abort;
  m.log = on_log;
  return m;
}();

void load_string(pmix_info_t& info, const char* key, const std::string& value) {
  PMIX_INFO_LOAD(&info, key, value.c_str(), PMIX_STRING);
}
void load_u32(pmix_info_t& info, const char* key, uint32_t value) {
  PMIX_INFO_LOAD(&info, key, &value, PMIX_UINT32);
}
void load_u16(pmix_info_t& info, const char* key, uint16_t value) {
  PMIX_INFO_LOAD(&info, key, &value, PMIX_UINT16);
}

// The per-rank PMIX_PROC_DATA array; PMIX_RANK must come first. `local` is its rank among
// the ranks of its node.
void load_proc_data(pmix_info_t& info, int rank, int local, int node, const std::string& hostname) {
  pmix_data_array_t* arr = nullptr;
  constexpr size_t kItems = 7;
  PMIX_DATA_ARRAY_CREATE(arr, kItems, PMIX_INFO);
  auto* items = static_cast<pmix_info_t*>(arr->array);
  pmix_rank_t r = static_cast<pmix_rank_t>(rank);
  PMIX_INFO_LOAD(&items[0], PMIX_RANK, &r, PMIX_PROC_RANK);
  load_u16(items[1], PMIX_LOCAL_RANK, static_cast<uint16_t>(local));
  load_u16(items[2], PMIX_NODE_RANK, static_cast<uint16_t>(local));
  load_u32(items[3], PMIX_NODEID, static_cast<uint32_t>(node));
  PMIX_INFO_LOAD(&items[4], PMIX_GLOBAL_RANK, &r, PMIX_PROC_RANK);
  PMIX_INFO_LOAD(&items[5], PMIX_APP_RANK, &r, PMIX_PROC_RANK);
  load_string(items[6], PMIX_HOSTNAME, hostname);
  PMIX_LOAD_KEY(info.key, PMIX_PROC_DATA);
  info.value.type = PMIX_DATA_ARRAY;  // ownership of arr passes to `info`
  info.value.data.darray = arr;
}

}  // namespace

bool pmix_server_available() { return true; }

Result<std::unique_ptr<PmixServer>> PmixServer::start(const std::string& tmpdir,
                                                      std::shared_ptr<hwloc_topology> machine,
                                                      FenceRelay relay,
                                                      const std::string& node_name) {
  if (g_server != nullptr) return internal_error("a PMIx server is already running here");
  auto impl = std::make_unique<Impl>();
  impl->relay = std::move(relay);
  g_module.fence_nb = impl->relay ? on_fence : nullptr;
  impl->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->event_fd < 0) return errno_error("eventfd");
  // The hash store keeps no shared-memory files behind when the launcher is killed.
  setenv("PMIX_MCA_gds", "hash", 0);
  // The optional entries: this node's name (the server counts as its own the ranks that the
  // node map puts on a node of this name), then the machine's topology.
  const bool named = impl->relay && !node_name.empty();
  const size_t kMachine = named ? 5 : 4;
  InfoArray info(machine ? kMachine + 1 : kMachine);
  if (named) load_string(info[4], PMIX_HOSTNAME, node_name);
  load_string(info[0], PMIX_SERVER_TMPDIR, tmpdir);
  load_string(info[1], PMIX_SYSTEM_TMPDIR, tmpdir);
  bool off = false;
  PMIX_INFO_LOAD(&info[2], PMIX_SERVER_TOOL_SUPPORT, &off, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[3], PMIX_SERVER_SYSTEM_SUPPORT, &off, PMIX_BOOL);
  if (machine) {
    // Loaded before PMIx is initialised, the value holds this pointer, not a copy; the entry
    // is emptied after init so that destroying `info` does not free it (Impl owns it).
    static char kHwloc[] = "hwloc";
    impl->machine = std::move(machine);
    impl->machine_ref.source = kHwloc;
    impl->machine_ref.topology = impl->machine.get();
    PMIX_INFO_LOAD(&info[kMachine], PMIX_TOPOLOGY2, &impl->machine_ref, PMIX_TOPO);
  }
  g_server = impl.get();
  pmix_status_t rc = PMIx_server_init(&g_module, info.data(), info.size());
  if (impl->machine) info[kMachine].value.type = PMIX_UNDEF;
  if (rc != PMIX_SUCCESS) {
    g_server = nullptr;
    close(impl->event_fd);
    return internal_error("PMIx_server_init failed: " + status_text(rc));
  }
  // A default handler (all codes): with no callback the registration blocks and returns the
  // handler's id (> 0), or an error that only costs the early naming of a lost rank.
  rc = PMIx_Register_event_handler(nullptr, 0, nullptr, 0, on_event, nullptr, nullptr);
  if (rc > 0) {
    impl->event_handler = static_cast<size_t>(rc);
  } else {
    DLTUNE_LOG(kDebug, "pmix") << "no PMIx event handler (" << status_text(rc)
                               << "): a lost rank is named from its exit only";
  }
  return std::unique_ptr<PmixServer>(new PmixServer(std::move(impl)));
}

PmixServer::PmixServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PmixServer::~PmixServer() {
  if (impl_->job_registered) {
    OpWaiter w;
    PMIx_server_deregister_nspace(impl_->nspace.c_str(), OpWaiter::callback, &w);
    (void)w.wait();
  }
  if (impl_->event_handler != 0)
    PMIx_Deregister_event_handler(impl_->event_handler, nullptr, nullptr);
  PMIx_server_finalize();
  g_server = nullptr;
  close(impl_->event_fd);
}

Status PmixServer::register_job(const PmixJobSpec& job) {
  // One node unless told otherwise: then every rank is this node's.
  std::vector<NodeRanks> nodes = job.nodes;
  if (nodes.empty()) nodes.push_back({job.hostname, 0, job.nranks});
  const size_t here = nodes.size() == 1 ? 0 : static_cast<size_t>(job.node);
  if (here >= nodes.size()) return internal_error("register_job: node index out of range");
  std::vector<int> node_of(static_cast<size_t>(job.nranks), 0);
  std::string hosts, ppn;
  for (size_t n = 0; n < nodes.size(); ++n) {
    hosts += (n ? "," : "") + (n == here ? job.hostname : nodes[n].host);
    ppn += n ? ";" : "";
    for (int r = nodes[n].first_rank; r < nodes[n].first_rank + nodes[n].count; ++r) {
      if (r < 0 || r >= job.nranks) return internal_error("register_job: rank out of range");
      node_of[static_cast<size_t>(r)] = static_cast<int>(n);
      ppn += (r == nodes[n].first_rank ? "" : ",") + std::to_string(r);
    }
  }
  {
    std::lock_guard lock(impl_->mu);
    impl_->nspace = job.nspace;
    impl_->ranks.assign(static_cast<size_t>(job.nranks), RankPmixState{});
    impl_->node_of_rank = node_of;
    impl_->nodes = static_cast<int>(nodes.size());
  }
  char* raw = nullptr;
  if (pmix_status_t rc = PMIx_generate_regex(hosts.c_str(), &raw); rc != PMIX_SUCCESS) {
    return internal_error("PMIx_generate_regex: " + status_text(rc));
  }
  MallocString node_map(raw);
  std::string local_peers;
  const NodeRanks& mine = nodes[here];
  for (int r = mine.first_rank; r < mine.first_rank + mine.count; ++r) {
    local_peers += (r == mine.first_rank ? "" : ",") + std::to_string(r);
  }
  raw = nullptr;
  if (pmix_status_t rc = PMIx_generate_ppn(ppn.c_str(), &raw); rc != PMIX_SUCCESS) {
    return internal_error("PMIx_generate_ppn: " + status_text(rc));
  }
  MallocString proc_map(raw);

  const uint32_t n = static_cast<uint32_t>(job.nranks);
  const size_t fixed = 9;
  const std::pair<std::string_view, const std::string*> blobs[] = {
      {comm::kPlanKey, &job.plan_blob}, {comm::kRecipeKey, &job.recipe_blob}};
  size_t with_blobs = 0;
  for (const auto& b : blobs) with_blobs += b.second->empty() ? 0 : 1;
  InfoArray info(fixed + with_blobs + n);
  PMIX_INFO_LOAD(&info[0], PMIX_NODE_MAP, node_map.get(), PMIX_REGEX);
  PMIX_INFO_LOAD(&info[1], PMIX_PROC_MAP, proc_map.get(), PMIX_REGEX);
  load_u32(info[2], PMIX_JOB_SIZE, n);
  load_u32(info[3], PMIX_UNIV_SIZE, n);
  load_u32(info[4], PMIX_MAX_PROCS, n);
  load_u32(info[5], PMIX_LOCAL_SIZE, static_cast<uint32_t>(mine.count));
  load_string(info[6], PMIX_LOCAL_PEERS, local_peers);
  load_u32(info[7], PMIX_NUM_NODES, static_cast<uint32_t>(nodes.size()));
  load_string(info[8], PMIX_JOBID, job.nspace);
  size_t next = fixed;
  for (const auto& [name, blob] : blobs) {
    if (blob->empty()) continue;
    pmix_byte_object_t bo;
    bo.bytes = const_cast<char*>(blob->data());  // PMIX_INFO_LOAD copies
    bo.size = blob->size();
    const std::string key(name);
    PMIX_INFO_LOAD(&info[next], key.c_str(), &bo, PMIX_BYTE_OBJECT);
    ++next;
  }
  for (size_t nd = 0; nd < nodes.size(); ++nd) {
    const std::string& host = nd == here ? job.hostname : nodes[nd].host;
    for (int r = nodes[nd].first_rank; r < nodes[nd].first_rank + nodes[nd].count; ++r) {
      load_proc_data(info[next++], r, r - nodes[nd].first_rank, static_cast<int>(nd), host);
    }
  }

  OpWaiter w;
  pmix_status_t rc = PMIx_server_register_nspace(job.nspace.c_str(), mine.count, info.data(),
                                                 info.size(), OpWaiter::callback, &w);
  if (rc == PMIX_SUCCESS) rc = w.wait();
  if (rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED) {
    return internal_error("PMIx_server_register_nspace: " + status_text(rc));
  }
  impl_->job_registered = true;
  return ok_status();
}

Status PmixServer::setup_rank(int rank, EnvBlock& env) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, impl_->nspace.c_str(), static_cast<pmix_rank_t>(rank));
  OpWaiter w;
  pmix_status_t rc =
      PMIx_server_register_client(&proc, geteuid(), getegid(), nullptr, OpWaiter::callback, &w);
  if (rc == PMIX_SUCCESS) rc = w.wait();
  if (rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED) {
    return internal_error("PMIx_server_register_client(rank " + std::to_string(rank) +
                          "): " + status_text(rc));
  }
  rc = PMIx_server_setup_fork(&proc, env.raw());
  if (rc != PMIX_SUCCESS) {
    return internal_error("PMIx_server_setup_fork(rank " + std::to_string(rank) +
                          "): " + status_text(rc));
  }
  return ok_status();
}

RankPmixState PmixServer::rank_state(int rank) const {
  std::lock_guard lock(impl_->mu);
  if (rank < 0 || static_cast<size_t>(rank) >= impl_->ranks.size()) return {};
  return impl_->ranks[static_cast<size_t>(rank)];
}

int PmixServer::first_lost_rank() const {
  std::lock_guard lock(impl_->mu);
  return impl_->first_lost;
}

int PmixServer::first_finalized_rank() const {
  std::lock_guard lock(impl_->mu);
  return impl_->first_finalized;
}

int PmixServer::event_fd() const { return impl_->event_fd; }

void PmixServer::drain_events() {
  uint64_t v = 0;
  while (read(impl_->event_fd, &v, sizeof v) > 0) {
  }
}

}  // namespace dltune::launcher
