// Each layer's kernel chosen by measurement, as cuDNN's benchmark mode chooses on GPUs: the
// engine's own kernels and oneDNN's (engine/ops/onednn.h) compete per node, for the node's shapes,
// the model's precision and its thread count.
//
// How a node is timed: a training forward of the model on random inputs fills every node's
// input; then, for each candidate kernel (Op::kernels()), the node runs forward + backward alone
// on those inputs (Model::forward_node / backward_node, running statistics untouched), first
// `warmup` times unmeasured, then `repeats` rounds in which every candidate runs once, in an
// order that rotates each round (so a noisy phase of a shared machine hits every candidate
// alike). A candidate's figure is the median of its rounds. The node gets back the kernel it had.
//
// The choices are plain data (KernelChoices: node name -> kernel) that the trainer takes as
// input (TrainConfig::kernels) and the tuner stores under the CPU's fingerprint; kernel_report_*
// show, per node, the kernel chosen and the timings that chose it (for `dltune model show`).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "engine/graph/model.h"

namespace dltune::engine {

struct KernelTiming {
  std::string kernel;
  double median_s = 0.0;  // forward + backward of one batch
  double min_s = 0.0, max_s = 0.0;
  int samples = 0;
};

struct NodeKernelChoice {
  int node = 0;
  std::string name, op;               // the node's name and op kind
  std::string chosen;                 // the kernel it runs
  std::string reason;                 // "fastest of N measured", "only kernel", ...
  std::vector<KernelTiming> timings;  // in Op::kernels() order; empty when not measured
};

struct KernelSelectOptions {
  int batch = 32;   // samples per timed pass (the rank's micro-batch)
  int warmup = 1;   // unmeasured passes per candidate before the rounds
  int repeats = 5;  // measured rounds (each runs every candidate once)
  // Wall seconds for the whole selection (0: no limit). Nodes are measured in the order of
  // their forward FLOPs, largest first, so a limit leaves the cheapest ones unmeasured: they
  // keep the kernel they had, with the reason "not measured: the time limit".
  double seconds = 0;
};

// Times every candidate kernel of node `node` (see the header). Preconditions: the model is
// reserved for at least opt.batch samples and a training forward of opt.batch samples ran.
// Errors: invalid_input for a node index out of range or a batch above the reserved one.
Result<std::vector<KernelTiming>> time_node_kernels(Model& m, int node,
                                                    const KernelSelectOptions& opt);

// Measures every node of `m` that has more than one kernel and sets it to its fastest; nodes
// with one kernel are listed with it. A node with the same op, attributes and shapes as one
// measured before takes that one's choice and timings unmeasured (reason "as NODE: same op and
// shapes"): ResNets repeat their blocks. Runs one training forward on random inputs first (the
// model is reserved for opt.batch when it is not). The model's parameters are left as they
// were; their gradients and the activations are overwritten. Errors: as time_node_kernels.
Result<std::vector<NodeKernelChoice>> select_kernels(Model& m, const KernelSelectOptions& opt);

// The choices of a report (every node, the defaults included).
KernelChoices choices_of(const std::vector<NodeKernelChoice>& report);

// The report as a table (a header, then one line per node with a choice: name, op, chosen
// kernel, each candidate's median in ms, the reason), and as JSON: [{"node", "op", "kernel",
// "reason", "timings":
// [{"kernel", "median_ms", "min_ms", "max_ms", "samples"}]}].
std::string kernel_report_text(const std::vector<NodeKernelChoice>& report);
nlohmann::json kernel_report_json(const std::vector<NodeKernelChoice>& report);

}  // namespace dltune::engine
