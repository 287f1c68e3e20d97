#include "engine/ops/op.h"

#include <algorithm>

#include "common/strings.h"

namespace dltune::engine {

Status Op::set_kernel(const std::string& name) {
  const std::vector<std::string> names = kernels();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return invalid_input("node '" + node_.name + "' (" + std::string(kind()) + "): no kernel '" +
                         name + "' for its shapes on this CPU in " + precision_name(precision_) +
                         "; its kernels are " + strings::join(names, ", "));
  }
  kernel_ = name;
  use_kernel(name);
  return ok_status();
}

Status Op::twin_of(const Op& other, const std::string& kernel) {
  DLTUNE_TRY(setup(other.node_, other.in_, other.out_));
  bind(other.params_, other.grads_, other.grad_accumulate_, other.state_);
  set_threads(other.threads_);
  set_precision(other.precision_);
  return set_kernel(kernel);
}

void Op::set_precision(Precision p) {
  precision_ = p;
  const std::vector<std::string> names = kernels();
  if (std::find(names.begin(), names.end(), kernel_) == names.end()) kernel_ = names.front();
  use_kernel(kernel_);
}

int activation_bytes_stored(recipes::OpKind, Precision) { return 4; }

int activation_bytes_autocast(recipes::OpKind op, Precision p) {
  using K = recipes::OpKind;
  const bool bf16_op = op == K::kConv2d || op == K::kLinear || op == K::kAttention;
  return p == Precision::kBf16 && bf16_op ? 2 : 4;
}

}  // namespace dltune::engine
