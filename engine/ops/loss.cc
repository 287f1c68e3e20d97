#include "engine/ops/loss.h"

#include <cmath>
#include <vector>

#include "engine/core/parallel.h"

namespace dltune::engine {
namespace {

// Row n's -log softmax(z)[label], and its gradient row when d is not null.
double row_loss(const float* z, int32_t label, int classes, float inv, float* d) {
  float mx = z[0];
  for (int k = 1; k < classes; ++k) mx = z[k] > mx ? z[k] : mx;
  double sum = 0.0;
  for (int k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(z[k] - mx));
  const double log_sum = std::log(sum);
  if (d) {
    for (int k = 0; k < classes; ++k)
      d[k] = static_cast<float>(std::exp(static_cast<double>(z[k] - mx) - log_sum)) * inv;
    d[label] -= inv;
  }
  return log_sum - (z[label] - mx);
}

}  // namespace

double softmax_cross_entropy(const float* logits, const int32_t* labels, int batch, int classes,
                             float denom, float* dlogits) {
  return softmax_cross_entropy(ThreadPool::serial(), logits, labels, batch, classes, denom,
                               dlogits);
}

double softmax_cross_entropy(ThreadPool& pool, const float* logits, const int32_t* labels,
                             int batch, int classes, float denom, float* dlogits) {
  const float inv = 1.0f / denom;
  // Rows on the threads, each row's loss kept; the total adds them in row order (the same bits
  // on any number of threads).
  std::vector<double> loss(static_cast<size_t>(batch > 0 ? batch : 0));
  const int64_t parts = task_count(batch, 8.0 * classes, 65536.0);
  parallel_ranges(pool, batch, parts, [&](int64_t r0, int64_t r1, int) {
    for (int64_t n = r0; n < r1; ++n) {
      loss[static_cast<size_t>(n)] = row_loss(logits + n * classes, labels[n], classes, inv,
                                              dlogits ? dlogits + n * classes : nullptr);
    }
  });
  double total = 0.0;
  for (double l : loss) total += l;
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
