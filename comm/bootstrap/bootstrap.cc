// Bootstrap: picks the PMIx client when a server launched us, else the local singleton.
#include "comm/bootstrap/bootstrap.h"

#include <climits>
#include <cstdlib>
#include <map>
#include <utility>

#include <unistd.h>

#include "comm/bootstrap/bootstrap_impl.h"
#include "common/env.h"
#include "common/log.h"
#include "common/paths.h"

#include "dltune/config.h"

namespace dltune::comm {
namespace {

std::string local_hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// Rank 0 of 1: a local key/value table stands in for the server.
class SingletonImpl final : public Bootstrap::Impl {
 public:
  SingletonImpl() {
    id_.hostname = local_hostname();
    id_.job_id = "singleton";
  }
  bool is_singleton() const override { return true; }
  Status put(std::string_view key, std::string_view bytes) override {
    pending_[std::string(key)] = std::string(bytes);
    return ok_status();
  }
  Status commit() override {
    for (auto& [k, v] : pending_) committed_[k] = std::move(v);
    pending_.clear();
    return ok_status();
  }
  Status fence(std::chrono::milliseconds) override { return ok_status(); }
  Result<std::string> get(int, std::string_view key) const override {
    auto it = committed_.find(std::string(key));
    if (it == committed_.end()) {
      return not_found("rank 0 published no key '" + std::string(key) + "'");
    }
    return it->second;
  }
  Result<std::string> job_value(std::string_view) const override { return std::string(); }
  Status finalize() override { return ok_status(); }

 private:
  std::map<std::string, std::string> pending_;
  std::map<std::string, std::string> committed_;
};

Status check_key(std::string_view key) {
  if (key.empty()) return invalid_input("a bootstrap key must not be empty");
  if (key.size() > 500) {
    return invalid_input("bootstrap key '" + std::string(key.substr(0, 40)) +
                         "...' is longer than 500 bytes");
  }
  return ok_status();
}

}  // namespace

std::unique_ptr<Bootstrap::Impl> make_singleton_impl() { return std::make_unique<SingletonImpl>(); }

Result<Bootstrap> Bootstrap::init() {
  const char* ns = std::getenv("PMIX_NAMESPACE");
  if (ns != nullptr && *ns != '\0') {
#if DLTUNE_HAVE_PMIX
    auto impl = make_pmix_impl();
    if (!impl) return std::move(impl).error().wrap("connecting to the PMIx server");
    return Bootstrap(std::move(*impl));
#else
    DLTUNE_LOG(kWarn, "pmix") << "PMIX_NAMESPACE is set but this build has no PMIx support; "
                                 "running as rank 0 of 1";
#endif
  } else {
    DLTUNE_LOG(kInfo, "pmix") << "no PMIx server (PMIX_NAMESPACE unset): running as rank 0 of 1";
  }
  return Bootstrap(make_singleton_impl());
}

Bootstrap::Bootstrap(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bootstrap::Bootstrap(Bootstrap&&) noexcept = default;
Bootstrap& Bootstrap::operator=(Bootstrap&& other) noexcept {
  if (this != &other) {
    if (impl_) (void)impl_->finalize();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
Bootstrap::~Bootstrap() {
  if (impl_) (void)impl_->finalize();
}

int Bootstrap::rank() const { return impl_->id().rank; }
int Bootstrap::size() const { return impl_->id().size; }
int Bootstrap::local_rank() const { return impl_->id().local_rank; }
int Bootstrap::local_size() const { return impl_->id().local_size; }
int Bootstrap::node_index() const { return impl_->id().node_index; }
int Bootstrap::num_nodes() const { return impl_->id().num_nodes; }
const std::string& Bootstrap::hostname() const { return impl_->id().hostname; }
const std::string& Bootstrap::job_id() const { return impl_->id().job_id; }
bool Bootstrap::is_singleton() const { return impl_->is_singleton(); }

Status Bootstrap::put(std::string_view key, std::string_view bytes) {
  DLTUNE_TRY(check_key(key));
  return impl_->put(key, bytes);
}
Status Bootstrap::commit() { return impl_->commit(); }
Status Bootstrap::fence(std::chrono::milliseconds timeout) { return impl_->fence(timeout); }

Result<std::string> Bootstrap::get(int rank, std::string_view key) const {
  DLTUNE_TRY(check_key(key));
  if (rank < 0 || rank >= size()) {
    return invalid_input("rank " + std::to_string(rank) + " is outside the job (size " +
                         std::to_string(size()) + ")");
  }
  return impl_->get(rank, key);
}

namespace {

// The job-level value under `key`, else the content of the file the environment variable
// `file_var` names, else "".
Result<std::string> job_blob(const Bootstrap::Impl& impl, std::string_view key,
                             const EnvVar& file_var, const char* what) {
  auto value = impl.job_value(key);
  if (!value) return value;
  if (!value->empty()) return value;
  if (auto path = env::get_if_set(file_var)) {
    auto text = paths::read_file(*path);
    if (!text) {
      return std::move(text).error().wrap(std::string("reading the ") + what + " named by " +
                                          std::string(file_var.name));
    }
    return text;
  }
  return std::string();
}

}  // namespace

Result<std::string> Bootstrap::plan_blob() const {
  return job_blob(*impl_, kPlanKey, env::kPlan, "plan");
}

Result<std::string> Bootstrap::recipe_blob() const {
  return job_blob(*impl_, kRecipeKey, env::kRecipe, "recipe");
}

Status Bootstrap::finalize() { return impl_ ? impl_->finalize() : ok_status(); }

}  // namespace dltune::comm
