// Bootstrap over a PMIx client (libpmix 4.x). Compiled only when DLTUNE_HAVE_PMIX.
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include <pmix.h>
#include <unistd.h>

#include "comm/bootstrap/bootstrap_impl.h"
#include "comm/bootstrap/pmix_info.h"
#include "common/log.h"

namespace dltune::comm {
namespace {

// Owns a pmix_value_t returned by PMIx_Get.
struct ValueDeleter {
  void operator()(pmix_value_t* v) const { PMIX_VALUE_RELEASE(v); }
};
using ValuePtr = std::unique_ptr<pmix_value_t, ValueDeleter>;

using InfoArray = comm::PmixInfoArray;

std::string status_text(pmix_status_t rc) { return PMIx_Error_string(rc); }

// An integer value of any PMIx integer type; nullopt for other types.
std::optional<int64_t> as_int(const pmix_value_t& v) {
  switch (v.type) {
    case PMIX_UINT8:
      return v.data.uint8;
    case PMIX_UINT16:
      return v.data.uint16;
    case PMIX_UINT32:
      return v.data.uint32;
    case PMIX_UINT64:
      return static_cast<int64_t>(v.data.uint64);
    case PMIX_INT8:
      return v.data.int8;
    case PMIX_INT16:
      return v.data.int16;
    case PMIX_INT32:
      return v.data.int32;
    case PMIX_INT64:
      return v.data.int64;
    case PMIX_INT:
      return v.data.integer;
    case PMIX_UINT:
      return v.data.uint;
    case PMIX_SIZE:
      return static_cast<int64_t>(v.data.size);
    case PMIX_PROC_RANK:
      return v.data.rank;
    default:
      return std::nullopt;
  }
}

class PmixImpl final : public Bootstrap::Impl {
 public:
  Status connect() {
    pmix_status_t rc = PMIx_Init(&me_, nullptr, 0);
    if (rc != PMIX_SUCCESS) {
      return peer_failed("PMIx_Init failed (" + status_text(rc) +
                         "); was this process started by `dltune run` or `srun --mpi=pmix`?");
    }
    connected_ = true;
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, me_.nspace, PMIX_RANK_WILDCARD);
    id_.rank = static_cast<int>(me_.rank);
    id_.job_id = me_.nspace;
    auto size = get_int(job, PMIX_JOB_SIZE);
    if (!size || *size <= 0 || id_.rank >= *size) {
      (void)finalize();
      return internal_error("the PMIx server gave no valid job size (PMIX_JOB_SIZE)");
    }
    id_.size = static_cast<int>(*size);
    id_.local_rank = static_cast<int>(get_int(me_, PMIX_LOCAL_RANK).value_or(0));
    id_.local_size = static_cast<int>(get_int(job, PMIX_LOCAL_SIZE).value_or(1));
    id_.node_index = static_cast<int>(get_int(me_, PMIX_NODEID).value_or(0));
    id_.num_nodes = static_cast<int>(get_int(job, PMIX_NUM_NODES).value_or(1));
    id_.hostname = get_string(me_, PMIX_HOSTNAME).value_or("");
    if (id_.hostname.empty()) {
      char buf[HOST_NAME_MAX + 1] = {};
      if (gethostname(buf, sizeof buf - 1) == 0) id_.hostname = buf;
    }
    DLTUNE_LOG(kDebug, "pmix") << "rank " << id_.rank << "/" << id_.size << " local "
                               << id_.local_rank << "/" << id_.local_size << " node "
                               << id_.node_index << "/" << id_.num_nodes << " ns " << id_.job_id;
    return ok_status();
  }

  ~PmixImpl() override { (void)finalize(); }

  bool is_singleton() const override { return false; }

  Status put(std::string_view key, std::string_view bytes) override {
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = const_cast<char*>(bytes.data());  // PMIx_Put copies the value
    v.data.bo.size = bytes.size();
    const std::string k(key);
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, k.c_str(), &v);
    if (rc != PMIX_SUCCESS) return internal_error("PMIx_Put('" + k + "'): " + status_text(rc));
    return ok_status();
  }

  Status commit() override {
    pmix_status_t rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) return internal_error("PMIx_Commit: " + status_text(rc));
    return ok_status();
  }

  Status fence(std::chrono::milliseconds timeout) override {
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, me_.nspace, PMIX_RANK_WILDCARD);
    const bool with_timeout = timeout.count() > 0;
    InfoArray info(with_timeout ? 2 : 1);
    bool collect = true;
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    if (with_timeout) {
      // PMIx timeouts are whole seconds; round up so a short timeout is not "forever".
      int seconds = static_cast<int>((timeout.count() + 999) / 1000);
      PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
    }
    pmix_status_t rc = PMIx_Fence(&job, 1, info.data(), info.size());
    if (rc == PMIX_SUCCESS) return ok_status();
    if (rc == PMIX_ERR_TIMEOUT) {
      return timeout_error("fence did not complete within " + std::to_string(timeout.count()) +
                           " ms");
    }
    return peer_failed("fence failed: " + status_text(rc));
  }

  Result<std::string> get(int rank, std::string_view key) const override {
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, me_.nspace, static_cast<pmix_rank_t>(rank));
    const std::string k(key);
    pmix_value_t* raw = nullptr;
    pmix_status_t rc = PMIx_Get(&peer, k.c_str(), nullptr, 0, &raw);
    ValuePtr v(raw);
    if (rc == PMIX_ERR_NOT_FOUND) {
      return not_found("rank " + std::to_string(rank) + " published no key '" + k + "'");
    }
    if (rc != PMIX_SUCCESS || !v) {
      return peer_failed("reading '" + k + "' of rank " + std::to_string(rank) + ": " +
                         status_text(rc));
    }
    return bytes_of(*v);
  }

  Result<std::string> job_value(std::string_view key) const override {
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, me_.nspace, PMIX_RANK_WILDCARD);
    InfoArray info(1);
    bool optional = true;
    PMIX_INFO_LOAD(&info[0], PMIX_OPTIONAL, &optional, PMIX_BOOL);
    pmix_value_t* raw = nullptr;
    const std::string k(key);
    pmix_status_t rc = PMIx_Get(&job, k.c_str(), info.data(), info.size(), &raw);
    ValuePtr v(raw);
    if (rc != PMIX_SUCCESS || !v) return std::string();
    return bytes_of(*v);
  }

  Status finalize() override {
    if (!connected_) return ok_status();
    connected_ = false;
    pmix_status_t rc = PMIx_Finalize(nullptr, 0);
    if (rc != PMIX_SUCCESS) return internal_error("PMIx_Finalize: " + status_text(rc));
    return ok_status();
  }

 private:
  static std::string bytes_of(const pmix_value_t& v) {
    if (v.type == PMIX_BYTE_OBJECT) {
      return v.data.bo.bytes ? std::string(v.data.bo.bytes, v.data.bo.size) : std::string();
    }
    if (v.type == PMIX_STRING && v.data.string != nullptr) return v.data.string;
    return std::string();
  }

  std::optional<int64_t> get_int(const pmix_proc_t& proc, const char* key) const {
    pmix_value_t* raw = nullptr;
    if (PMIx_Get(&proc, key, nullptr, 0, &raw) != PMIX_SUCCESS || raw == nullptr) {
      return std::nullopt;
    }
    ValuePtr v(raw);
    return as_int(*v);
  }

  std::optional<std::string> get_string(const pmix_proc_t& proc, const char* key) const {
    pmix_value_t* raw = nullptr;
    if (PMIx_Get(&proc, key, nullptr, 0, &raw) != PMIX_SUCCESS || raw == nullptr) {
      return std::nullopt;
    }
    ValuePtr v(raw);
    if (v->type != PMIX_STRING || v->data.string == nullptr) return std::nullopt;
    return std::string(v->data.string);
  }

  pmix_proc_t me_{};
  bool connected_ = false;
};

}  // namespace

Result<std::unique_ptr<Bootstrap::Impl>> make_pmix_impl() {
  auto impl = std::make_unique<PmixImpl>();
  DLTUNE_TRY(impl->connect());
  return std::unique_ptr<Bootstrap::Impl>(std::move(impl));
}

}  // namespace dltune::comm
