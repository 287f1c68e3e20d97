// `dltune-worker profile`: what only a process that runs the engine can measure, as data for the
// launcher's own models: one rank's compute per graph node (for `dltune predict`), each node's
// fitted cost (for the layout search), and the GPU's memory (for a GPU rank's memory limit).
//
//   dltune-worker profile (--model NAME | --recipe RECIPE) [--batch B] [--steps N]
//                         [--warmup W] [--threads T] [--copies N] [--out FILE]
//   dltune-worker profile --fit (--model NAME | --recipe RECIPE) --batch B [--steps N]
//                         [--out FILE]
//   dltune-worker profile --device-memory [--out FILE]
//
// Trains one rank alone (no communicator) through the trainer's public interface, with the
// model's per-node timing on (Model::set_profiling), on synthetic data of the model's input (a
// recipe's own data otherwise; GPT built-ins read /usr/share/common-licenses/GPL-3). After W
// untimed steps (default 2) it times N steps (default 5) and writes JSON: {"model", "batch",
// "steps", "threads", "forward_s": [per node], "backward_s": [per node], "optimizer_s",
// "input_s", "step_s", "step_samples_s"}, each but the last the median over the timed steps of
// one step's seconds (forward and backward of a node from the model's own clock; optimizer_s
// the rest of the step after compute, input_s compute minus the nodes: copying the batch in and
// the loss); step_samples_s every timed step's wall seconds, in order. --precision and
// --kernel-choices FILE (a JSON object {node: kernel}, a plan's training.kernels) profile the
// compute a plan's ranks run. --copies N runs N copies at once, each on its share of the CPUs,
// their timed steps together, and reports the slowest with "copies" and "copy_step_s" (every
// copy's step_s): the compute of a node's N ranks as they slow each other (profile_copies.h).
// Exit: 0, 1 when training fails, 2 for bad input (an unknown model or recipe, a batch < 1).
//
// --fit: each node's cost around a replica batch of B for the layout search
// (measure_node_costs(), engine/train/node_costs.h: two batches, min(B, 64) and an eighth of it,
// N steps each, default 3, one thread), written as planning/node_costs.h's JSON.
//
// --device-memory: {"device_memory_bytes": N}, GPU 0's memory as this process sees it; exit 2
// when no GPU answers (no CUDA build, no device).
//
// --kernels: each node's kernel chosen by measurement (engine/graph/kernel_select.h) at
// --batch on --threads, in --precision (default the recipe's), within --seconds (default no
// limit; the largest nodes first), as {"model", "batch", "threads", "precision", "seconds"
// (taken), "kernels": [kernel_report_json's], "text": kernel_report_text's table, "choices":
// {node: kernel} (the measured nodes and those that took a measured twin's choice)}.
//
// With --fit, --device-memory or --kernels and --out, a failure writes {"error": "why"} there
// instead of to standard error (the launcher asks, and says why in its own words), with the exit
// code.
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
