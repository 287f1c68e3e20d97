// nccl-tests' all_reduce_perf output, and the model's bus bandwidth beside it: how
// bench/predict and the tests check predict/fabric.h against fabrics nobody here measured.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

#include "predict/fabric.h"

namespace dltune::predict {

struct NcclTestsRow {
  double bytes = 0;
  double time_us = 0;  // out of place
  double busbw_gbps = 0;
};

// The data lines of an all_reduce_perf log (lines may carry a "0: " rank prefix; comments and
// other lines are skipped). Errors (invalid_input): no data line.
Result<std::vector<NcclTestsRow>> parse_nccl_tests(const std::string& text);

struct BusbwCheck {
  double bytes = 0, measured_gbps = 0, predicted_gbps = 0;
  double rel_err = 0;  // predicted / measured - 1
};
// The model's bus bandwidth (best of nccl_algorithms()) at every row of at least `min_bytes`.
std::vector<BusbwCheck> check_busbw(const std::vector<NcclTestsRow>& rows, double min_bytes,
                                    int nodes, int per_node, const Fabric& fabric);

}  // namespace dltune::predict
