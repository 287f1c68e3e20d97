// Element types and reduction operators shared by every collective, and the Algorithm names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

// The allreduce algorithms, named on the command line and in plans and JSON as
// "ring", "rd", "rabenseifner", "tree", "hier", "shm", "cma", "native".
enum class Algorithm {
  kRing,               // Baidu-style segmented ring: reduce-scatter + allgather
  kRecursiveDoubling,  // pairwise exchange of whole vectors, non-powers of two folded
  kRabenseifner,       // recursive-halving reduce-scatter + recursive-doubling allgather
  kTree,               // binomial-tree reduce to rank 0, then binomial broadcast
  kHierarchical,       // node-local phase, a flat algorithm among node leaders, local bcast
  kShm,                // node-local shared-memory reduction (one node only)
  kCma,                // node-local single-copy reduction on the ranks' own buffers through
                       // cross-memory attach (process_vm_readv/writev; one node only)
  kNative,             // the transport's own allreduce (MPI_Allreduce); unsupported elsewhere
};

// Every algorithm, in the order above.
const std::vector<Algorithm>& all_algorithms();
// The algorithm's short name ("ring", "rd", ...).
std::string_view algorithm_name(Algorithm algo);
// Parses a short name (case-sensitive). Error (invalid input): "unknown algorithm 'x'; expected
// one of ring, rd, rabenseifner, tree, hier, shm, cma, native" with a "did you mean" hint.
Result<Algorithm> parse_algorithm(std::string_view name);
// Parses "all" (every algorithm) or a comma-separated list of names; rejects empty items and
// duplicates with an invalid-input error naming the item.
Result<std::vector<Algorithm>> parse_algorithm_list(std::string_view list);

}  // namespace dltune::comm
