// `dltune predict --interference`: how computation and communication slow each other while
// both run (planning/overlap.h), measured on this machine or given.
//
//   measure  G ranks of this node (--per-node) train the model and reduce at once
//            (dltune-worker overlap, engine/worker/overlap.h) at 64 KiB, 1 MiB and the bucket
//            size: a few seconds;
//   none     perfect overlap;
//   C[,M]    compute slowed by C and communication by M (default C) while both run (0.2: 20 %);
//   assumed  the assumption by kind (predict/predict.h's assumed_interference()).
// A measurement is stored in the user's tuning database (schema v8, tuner/db/records.h
// InterferenceRecord) under this machine's fingerprint, the model and the shape that ran; later
// predictions of the same model, ranks per node and threads on a machine of that fingerprint
// (`dltune predict` without --interference, a launch's predicted row) use it, the nearest batch
// measured, instead of the assumption, and say so. Without either the predictor assumes by kind.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "recipes/model/graph.h"
#include "topology/topology.h"
#include "tuner/db/lookup.h"
#include "tuner/db/records.h"

#include "predict/predict.h"

namespace dltune::launcher {

// "none" (zero slowdowns) or "C[,M]" as an Interference (source "--interference TEXT"); `measure`
// and `assumed` are not this function's. Errors (invalid_input naming --interference): anything
// else, a slowdown below 0 or above 100.
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

// What a measured interference is stored under (the key's recipe column): SHA-256 of the model's
// graph as recipes::describe_graph writes it. Its other settings (optimizer, data) leave the
// step's compute and its gradients as they are.
std::string interference_model_id(const recipes::Graph& graph);

// The key a measurement of `per_node` ranks on one node of `topo` training `graph` is stored
// under (host ranks: no NCCL version in it).
tuner::db::Key interference_key(const topology::Topology& topo, const recipes::Graph& graph,
                                int per_node);

// `i` (as measure_interference() returns it) as a row of `key` for ranks of `threads` threads at
// `batch`, made here now.
tuner::db::InterferenceRecord interference_record(const predict::Interference& i,
                                                  const tuner::db::Key& key, int threads,
                                                  int batch);

// Every measured interference of `key` in the layers' databases, the user's first, then the
// site's in order. A database that is absent or does not open is skipped silently (the plan's
// lookup says why, once); one whose stored rows are malformed is skipped, *skipped saying which
// and why.
std::vector<tuner::db::InterferenceRecord> stored_interference(const tuner::db::Layers& layers,
                                                               const tuner::db::Key& key,
                                                               std::string* skipped = nullptr);

// The measurement of `rows` for ranks of `threads` threads at `batch`: among those of the same
// threads, the one of the nearest batch (by ratio; the first of equals, so the user's database
// wins), as an Interference whose source says where, when and what it measured (and the batch
// it was measured at, where that is not `batch`); nullopt when none has those threads.
std::optional<predict::Interference> pick_interference(
    const std::vector<tuner::db::InterferenceRecord>& rows, int threads, int batch);

}  // namespace dltune::launcher
