// A cost table shaped like the one NCCL hands a tuner plugin: kNcclNumAlgorithms row pointers
// of kNcclNumProtocols floats, every entry available, all costs distinct.
#pragma once

#include <limits>
#include <utility>

#include "plugins/nccl_tuner/nccl_tuner_abi.h"

namespace dltune::plugins::testing {

struct CostTable {
  float cells[kNcclNumAlgorithms][kNcclNumProtocols];
  float* rows[kNcclNumAlgorithms];
  CostTable() {
    for (int a = 0; a < kNcclNumAlgorithms; ++a) {
      rows[a] = cells[a];
      for (int p = 0; p < kNcclNumProtocols; ++p) cells[a][p] = 10.0f + a * 3 + p;
    }
  }
  // The (algo, proto) NCCL would pick: the lowest non-ignored cost.
  std::pair<int, int> pick() const {
    std::pair<int, int> best{-1, -1};
    float bc = std::numeric_limits<float>::infinity();
    for (int a = 0; a < kNcclNumAlgorithms; ++a)
      for (int p = 0; p < kNcclNumProtocols; ++p)
        if (cells[a][p] >= 0 && cells[a][p] < bc) bc = cells[a][p], best = {a, p};
    return best;
  }
};

}  // namespace dltune::plugins::testing
