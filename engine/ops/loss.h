// Softmax cross-entropy over logits (B, K) with integer labels.
#pragma once

#include <cstdint>

#include "engine/core/thread_pool.h"

namespace dltune::engine {

// Returns the SUM over the batch of -log softmax(logits)[label] (divide by the batch for the
// mean). When dlogits != nullptr, writes dlogits (B, K) = (softmax - onehot(label)) / denom:
// with denom = the GLOBAL batch size, summing the ranks' gradients gives exactly the gradient
// of the mean loss over the global batch (strong scaling with uneven shards).
// Preconditions: 0 <= labels[i] < K (checked by the data readers).
double softmax_cross_entropy(const float* logits, const int32_t* labels, int batch, int classes,
                             float denom, float* dlogits);
// The same on the rank's threads (rows split over them; the same result on any number).
double softmax_cross_entropy(ThreadPool& pool, const float* logits, const int32_t* labels,
                             int batch, int classes, float denom, float* dlogits);

// Number of rows whose arg-max equals the label.
int count_correct(const float* logits, const int32_t* labels, int batch, int classes);

}  // namespace dltune::engine
