#include "engine/ops/loss.h"

#include <cmath>

namespace dltune::engine {

double softmax_cross_entropy(const float* logits, const int32_t* labels, int batch, int classes,
                             float denom, float* dlogits) {
  double total = 0.0;
  const float inv = 1.0f / denom;
  for (int n = 0; n < batch; ++n) {
    const float* z = logits + int64_t{n} * classes;
    float mx = z[0];
    for (int k = 1; k < classes; ++k) mx = z[k] > mx ? z[k] : mx;
    double sum = 0.0;
    for (int k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(z[k] - mx));
    const double log_sum = std::log(sum);
    total += log_sum - (z[labels[n]] - mx);
    if (dlogits) {
      float* d = dlogits + int64_t{n} * classes;
      for (int k = 0; k < classes; ++k)
        d[k] = static_cast<float>(std::exp(static_cast<double>(z[k] - mx) - log_sum)) * inv;
      d[labels[n]] -= inv;
    }
  }
  return total;
}

int count_correct(const float* logits, const int32_t* labels, int batch, int classes) {
  int correct = 0;
  for (int n = 0; n < batch; ++n) {
    const float* z = logits + int64_t{n} * classes;
    int best = 0;
    for (int k = 1; k < classes; ++k)
      if (z[k] > z[best]) best = k;
    correct += best == labels[n];
  }
  return correct;
}

}  // namespace dltune::engine
