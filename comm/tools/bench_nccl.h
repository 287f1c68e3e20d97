// The NCCL backend of dltune-bench-rank (`dltune bench --backend nccl`): ncclAllReduce on
// device buffers for each NCCL choice ("nccl", "nccl:ring/ll", ...), measured interleaved in
// time the same way as the host algorithms (comm/bench_sweep.h): per message size a calibration
// of how many calls make a sample of about round_ms, then rounds in which every choice takes one
// sample, the order rotating every round; each sample is the wall time of `iters` calls enqueued
// on one stream up to the stream's completion (stream synchronisation), divided by iters; the
// slowest rank's sample counts. One NCCL communicator per choice (its algorithm and protocol are
// fixed when it is created: nccl_communicator.h).
#pragma once

#include <cstddef>
#include <vector>

#include "comm/nccl_communicator.h"
#include "common/result.h"

namespace dltune::comm {

struct NcclBenchOptions {
  std::vector<NcclOptions> choices;
  size_t min_bytes = 4;
  size_t max_bytes = size_t{256} << 20;
  int rounds = 11;
  double round_ms = 2.0;
  bool json = false;
};

// Parses "all" (default_nccl_choices()) or a comma-separated list of NCCL choice names;
// rejects empty items and duplicates (invalid_input naming the item).
Result<std::vector<NcclOptions>> parse_nccl_choice_list(const std::string& list);

// Unsupported (with the reason) when this process has no CUDA device or the build no NCCL.
Status check_nccl_device();

// Runs the sweep as one rank of a PMIx job (Bootstrap::init) and prints rank 0's table or
// JSON ({"ranks","nodes","results":[{"bytes","algo":CHOICE,...}],"bounds":[]}) on stdout.
// Returns the process exit code (0, 1 on a failure, 2 when unsupported here).
int run_nccl_bench(const NcclBenchOptions& options);

}  // namespace dltune::comm
