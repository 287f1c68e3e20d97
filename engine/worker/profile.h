// `dltune-worker profile`: one rank's compute per graph node, measured, for `dltune predict`.
//
//   dltune-worker profile (--model NAME | --recipe RECIPE) [--batch B] [--steps N]
//                         [--warmup W] [--threads T] [--out FILE]
//
// Trains one rank alone (no communicator) through the trainer's public interface, with the
// model's per-node timing on (Model::set_profiling), on synthetic data of the model's input (a
// recipe's own data otherwise; GPT built-ins read /usr/share/common-licenses/GPL-3). After W
// untimed steps (default 2) it times N steps (default 5) and writes JSON: {"model", "batch",
// "steps", "threads", "forward_s": [per node], "backward_s": [per node], "optimizer_s",
// "input_s", "step_s"}, each the median over the timed steps of one step's seconds (forward and
// backward of a node from the model's own clock; optimizer_s the rest of the step after
// compute, input_s compute minus the nodes: copying the batch in and the loss). Exit: 0, 1 when
// training fails, 2 for bad input (an unknown model or recipe, a batch < 1).
#pragma once

#include <string>

#include "common/result.h"
#include "engine/train/node_costs.h"
#include "engine/train/train_config.h"

namespace CLI {
class App;
}

namespace dltune::engine {

CLI::App* add_profile_command(CLI::App& app);
int run_profile_command();

// What the profile trains at `batch` on one rank: the built-in `model` on synthetic data of its
// input (GPT: a text file), or the `recipe`'s model and data (exactly one of the two given).
// Errors: an unknown model, a recipe that does not load.
Result<TrainConfig> profile_config(const std::string& model, const std::string& recipe, int batch);

}  // namespace dltune::engine
