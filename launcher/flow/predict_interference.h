// `dltune predict --interference`: how computation and communication slow each other while
// both run (planning/overlap.h), measured on this machine or given.
//
//   measure  G ranks of this node (--per-node) train the model and reduce at once
//            (dltune-worker overlap, engine/worker/overlap.h) at 64 KiB, 1 MiB and the bucket
//            size: a few seconds;
//   none     perfect overlap;
//   C[,M]    compute slowed by C and communication by M (default C) while both run (0.2: 20 %).
// Without it the predictor assumes by kind (predict/predict.h's assumed_interference()).
#pragma once

#include <string>

#include "common/result.h"

#include "predict/predict.h"

namespace dltune::launcher {

// "none" (zero slowdowns) or "C[,M]" as an Interference (source "--interference TEXT"); `measure`
// is not this function's. Errors (invalid_input naming --interference): anything else, a slowdown
// below 0 or above 100.
Result<predict::Interference> parse_interference(const std::string& text);

// What to measure, and the measurement: `per_node` ranks of `threads` threads of `target` (a
// recipe when `is_recipe`, else a built-in model) at `batch`, at 64 KiB, 1 MiB and
// `bucket_bytes`; each size's range over the rounds is the interval's (Interference::low /
// high). Errors: per_node < 2 (invalid_input: one rank
// has nothing to reduce), the ranks' run failing (exit 2 where they found bad input, else
// peer_failed), their JSON malformed (internal).
Result<predict::Interference> measure_interference(const std::string& target, bool is_recipe,
                                                   int batch, int per_node, int threads,
                                                   uint64_t bucket_bytes);

}  // namespace dltune::launcher
