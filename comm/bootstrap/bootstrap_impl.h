// Internal to comm/bootstrap: the interface both Bootstrap implementations provide.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "comm/bootstrap/bootstrap.h"
#include "common/result.h"

namespace dltune::comm {

// What a rank learns about itself at init time.
struct RankIdentity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int node_index = 0;
  int num_nodes = 1;
  std::string hostname;
  std::string job_id;
};

class Bootstrap::Impl {
 public:
  virtual ~Impl() = default;
  const RankIdentity& id() const { return id_; }
  virtual bool is_singleton() const = 0;
  virtual Status put(std::string_view key, std::string_view bytes) = 0;
  virtual Status commit() = 0;
  virtual Status fence(std::chrono::milliseconds timeout) = 0;
  virtual Result<std::string> get(int rank, std::string_view key) const = 0;
  // The job-level value under `key` (kPlanKey, kRecipeKey); "" when the server has none.
  virtual Result<std::string> job_value(std::string_view key) const = 0;
  virtual Status finalize() = 0;

 protected:
  RankIdentity id_;
};

// The local rank-0-of-1 implementation (bootstrap.cc).
std::unique_ptr<Bootstrap::Impl> make_singleton_impl();
// Connects as a PMIx client (bootstrap_pmix.cc; compiled and called only with PMIx).
Result<std::unique_ptr<Bootstrap::Impl>> make_pmix_impl();

}  // namespace dltune::comm
