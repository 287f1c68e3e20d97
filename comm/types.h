// Element types and reduction operators shared by every collective, and the algorithms comm/
// runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/collectives.h"
#include "common/result.h"

namespace dltune::comm {

enum class DataType { kF32, kF64, kI32, kI64 };
enum class ReduceOp { kSum, kMax, kMin };

// Bytes per element of `type` (4 or 8).
size_t dtype_size(DataType type);
// "f32", "f64", "i32", "i64".
std::string_view dtype_name(DataType type);
// "sum", "max", "min".
std::string_view op_name(ReduceOp op);

// The allreduce algorithms: the shared vocabulary (common/collectives.h); comm/ runs the host
// ones ("ring", "rd", "rabenseifner", "tree", "hier", "shm", "cma", "native").
using dltune::Algorithm;
using dltune::algorithm_name;

// The algorithms comm/ runs, in enum order (host_algorithms()).
const std::vector<Algorithm>& all_algorithms();
// Parses a short name (case-sensitive). Error (invalid input): "unknown algorithm 'x'; expected
// one of ring, rd, rabenseifner, tree, hier, shm, cma, native" with a "did you mean" hint.
Result<Algorithm> parse_algorithm(std::string_view name);
// Parses "all" (every algorithm) or a comma-separated list of names; rejects empty items and
// duplicates with an invalid-input error naming the item.
Result<std::vector<Algorithm>> parse_algorithm_list(std::string_view list);

}  // namespace dltune::comm
