// RAII ownership of a pmix_info_t array (PMIX_INFO_CREATE / PMIX_INFO_FREE), shared by the
// rank-side bootstrap and the launcher's embedded PMIx server. Include only where PMIx is built
// in (DLTUNE_HAVE_PMIX).
#pragma once

#include <cstddef>

#include <pmix.h>

namespace dltune::comm {

class PmixInfoArray {
 public:
  // n == 0 owns nothing (data() is null).
  explicit PmixInfoArray(size_t n) : n_(n) {
    if (n_ > 0) PMIX_INFO_CREATE(info_, n_);
  }
  ~PmixInfoArray() {
    if (info_ != nullptr) PMIX_INFO_FREE(info_, n_);
  }
  PmixInfoArray(const PmixInfoArray&) = delete;
  PmixInfoArray& operator=(const PmixInfoArray&) = delete;
  pmix_info_t* data() { return info_; }
  pmix_info_t& operator[](size_t i) { return info_[i]; }
  size_t size() const { return n_; }

 private:
  pmix_info_t* info_ = nullptr;
  size_t n_;
};

}  // namespace dltune::comm
