// One rank's compute per graph node, measured, and the per-node costs the layout search cuts
// and ranks by (planning/layout_search.h, planning/node_costs.h).
//
// How the costs are fitted. The model is trained alone at two batches, b and b / 8; each node's
// forward + backward seconds are taken as fixed + per_sample x batch through the two points.
// The fixed part is what a node costs per call whatever its batch (reading a linear layer's
// weights, packing them, starting kernels): it is why many small micro-batches cost more per
// sample than one large batch, which FLOPs cannot see. A pair made inconsistent by noise (a
// negative slope or intercept) is taken as all per sample. The optimizer's seconds per step
// divided by the model's parameters give its cost per parameter.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/train/train_config.h"
#include "planning/node_costs.h"
#include "recipes/model/graph.h"

namespace dltune::engine {

class Dataset;
class Trainer;

// One rank training alone, as the profiles and measurements time it: `config` on `threads`
// threads, no evaluation, no checkpoints, no communicator, its training data loaded. The
// trainer refers to `data`, which outlives it (members are destroyed in reverse order). BLAS
// threads are the caller's to set. Errors: the data's and Trainer::create()'s.
struct LoneTrainer {
  std::unique_ptr<Dataset> data;
  std::unique_ptr<Trainer> trainer;
  LoneTrainer();
  LoneTrainer(LoneTrainer&&) noexcept;
  ~LoneTrainer();
};
Result<LoneTrainer> lone_trainer(TrainConfig config, int threads);

// The figures of one profile (`dltune-worker profile`'s JSON): per graph node, the median over
// the timed steps of one step's forward and backward seconds; the optimizer's and the input's
// share of a step (seconds); every timed step's wall seconds, in order.
struct NodeProfile {
  int batch = 0;
  std::vector<double> forward_s, backward_s;
  double optimizer_s = 0, input_s = 0, step_s = 0;
  std::vector<double> step_samples_s;
};

// Trains `config` (its per_rank_batch) on one rank alone, `warmup` untimed steps then `steps`
// timed, with the model's per-node timing on, on `threads` BLAS threads; `before_timing` (when
// set) is called between the two (profile copies meet at a barrier there) and its error ends the
// profile. Errors: invalid_input for steps < 1 or warmup < 0; the data's and the trainer's.
Result<NodeProfile> profile_nodes(TrainConfig config, int steps, int warmup, int threads,
                                  const std::function<Status()>& before_timing = {});

// The costs of `config`'s model (`graph`, as model_graph(config) gives it) around
// `replica_batch` samples: b = min(replica_batch, 64) and max(1, b / 8), each timed for
// `steps` steps after one warm-up, one thread, and fitted as above. Errors: the profile's, and
// internal_error when the profile's nodes are not the graph's.
Result<planning::NodeCosts> measure_node_costs(const TrainConfig& config,
                                               const recipes::Graph& graph, int64_t replica_batch,
                                               int steps = 3);

}  // namespace dltune::engine
