// `dltune-worker layout`: the layouts a recipe's model can train under on a job, from the
// memory model (engine/train/layout_search.h). The launcher runs it for `recipe check`,
// `launch --dry-run` and `launch` (it links no engine ops itself).
//
//   dltune-worker layout --recipe R.yaml --ranks N [--ranks-per-node K] [--batch B]
//                        [--per-replica] [--memory BYTES] [--measure] --out FILE
//
// Writes {"ranks", "memory_limit", "memory_source", "candidates": [{"layout": {replicas,
// stages, partition, microbatches, schedule, recompute, reason, memory_bytes, predicted_sps},
// "replica_batch", "stages": [{"first_node", "terms": {...}}]}]} (best first) to FILE; when no
// layout fits, {"error": "..."} and exit code 2. --batch: samples per step (all replicas, or
// with --per-replica each replica's), default the recipe's; --memory: bytes per rank, default
// the recipe's launch.memory_per_rank, else auto (the cgroup's or the machine's memory over
// the ranks per node). --measure: the cuts and predictions use each node's seconds timed here
// (the model trained alone at two batches; a per-sample and a per-call cost each, and the
// optimizer's cost per parameter) instead of FLOPs; the answer's "costs" says which it used
// and, when timing was not possible (the whole model too large for this process), why.
#pragma once

#include <CLI/CLI.hpp>

namespace dltune::engine {

CLI::App* add_layout_command(CLI::App& app);
int run_layout_command();

}  // namespace dltune::engine
