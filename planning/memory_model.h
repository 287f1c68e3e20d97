// The memory a rank needs to train a model (or one pipeline stage of it) under a layout, term by
// term (OC-DNN, AxoNN, DeepSpeed's "is it runnable" with the reasons), from the graph alone: no
// buffer is allocated to estimate it.
//
//   parameters     4 B per trainable float of the stage (a tied copy counted where it lives)
//   gradients      the same again (one flat buffer; node-shared memory under data parallelism)
//   optimizer      SGD's velocity (1x parameters) or AdamW's two moments (2x); offloaded (GPU:
//                  the state in pinned host memory, engine/gpu/offload.h) only the device's
//                  staging buffers, two chunks per state vector (one when a chunk holds it
//                  all), with the state itself in `offloaded` (host memory, outside the
//                  rank's device total)
//   state          batch-norm running statistics
//   activations    per micro-batch kept for backward: every node's output (B x its shape,
//                  4 bytes per element in fp32 and in bf16 alike: the engine keeps bf16 values in
//                  float buffers, engine/core/precision.h) and
//                  what each op saves for its backward (masks, argmax, statistics, attention
//                  probabilities, im2col columns), times the micro-batches in flight; with
//                  recompute one set (the in-flight micro-batches' inputs stay in the input and
//                  boundary buffers below, which hold the whole step's anyway)
//   workspace      the activation-gradient slots of the backward plan and the ops' shared
//                  scratch, one set
//   communication  the trainer's input batch (first stage: local batch x input) and loss
//                  gradient (last stage: one micro-batch's, a pipeline's whole step's), a
//                  stage's boundary buffers for the whole step (received inputs and their
//                  gradients: 2 x local batch x input; received output gradients: local batch x
//                  output); what a stage sends lives in its activations
//   runtime        the CPU engine's BLAS library's GEMM packing buffers, kCpuBlasBytes (none on
//                  the GPU engine, whose memory is the device's)
//
// The activation and workspace terms come from the executor that will run the graph, as data:
// BatchBuffers for one batch (the engine's engine/graph/batch_buffers.h, exactly what
// Model::reserve() allocates; planning links no engine), times what this model adds (the
// micro-batches in flight, recomputation). They equal what a stage's models in flight allocate
// together (engine/tests/memory_model_test.cc and tests/engine check both);
// the whole is checked against the measured peak resident memory of trainings (bench/parallel,
// tests). Not counted: the collectives' private scratch on replicated layouts (the ring: one
// segment, at most 1 MiB; recursive doubling, trees and Rabenseifner: the largest bucket),
// which measured 0.7-1 MiB more with the ring.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "recipes/model/graph.h"

namespace dltune::planning {

// What the executor allocates for one batch of a graph beyond its parameters and state, in
// floats: what it keeps from forward to backward (node outputs and the ops' saved state: one
// set per micro-batch in flight), and what one pass uses and frees (activation-gradient slots,
// the ops' shared scratch: one set).
struct BatchBuffers {
  int64_t kept = 0;
  int64_t workspace = 0;
};

// The CPU engine's compute settings (engine issue 38), which change what its kernels keep and
// use: per-thread scratch grows with the threads; bf16 ops keep rounded copies of their operands;
// each node's kernel has its own scratch. The same values the trainer gets (TrainConfig).
struct ComputeSettings {
  int threads = 1;
  std::string precision = "fp32";              // fp32 | bf16
  std::map<std::string, std::string> kernels;  // node name -> kernel; absent: the default
};

// The executor's BatchBuffers for batches of up to `batch` samples of `graph` (`info` its valid
// analysis) computed with `compute`: engine::batch_buffers for the bundled engine. Errors
// (invalid_input): settings the executor cannot run (an unknown precision, a kernel a node
// does not have).
using BatchBuffersFn =
    std::function<Result<BatchBuffers>(const recipes::Graph& graph, const recipes::GraphInfo& info,
                                       int64_t batch, const ComputeSettings& compute)>;

struct MemoryQuery {
  int64_t microbatch = 1;  // samples per micro-batch (the whole per-rank batch without pipelining)
  // Samples per step of the rank's replica (the trainer's input batch and a stage's boundary
  // buffers hold all of them); 0: one micro-batch.
  int64_t local_batch = 0;
  int in_flight = 1;       // micro-batches whose activations a stage keeps at once
  bool recompute = false;  // keep only stage inputs; recompute the forward before the backward
  std::string optimizer = "sgd";                   // sgd | adamw
  bool boundary_in = false, boundary_out = false;  // a pipeline stage receives / sends tensors
  bool offload_optimizer = false;                  // GPU: the optimizer state in host memory
  bool gpu = false;         // the GPU engine: device memory (no BLAS runtime term)
  ComputeSettings compute;  // the CPU engine's (the GPU engine's kernels keep their own)
};

// OpenBLAS's GEMM packing buffers: what a process's resident set grows by at its first large
// single-precision product (Debian 12's openblas-pthread, this machine: 1.3-1.7 MiB for
// 1024- and 2048-square products on one or two threads, 0.15-0.25 MiB below 256; the engine's
// one-rank trainings measure 0.8-1.4 MiB above the other terms). Once per process.
inline constexpr int64_t kCpuBlasBytes = int64_t{5} << 18;  // 1.25 MiB

// The floats of each state vector that one staging buffer of the optimizer offload holds: the
// state streams through the device in chunks of this size, two buffers per vector (one
// updating while the other copies). 4 Mi floats: 16 MiB, hundreds of microseconds of PCIe
// per copy, enough to hide the launch and event overheads.
inline constexpr int64_t kOffloadChunkFloats = int64_t{4} << 20;
// Staging buffers per state vector for n floats in chunks of `chunk`: two (one updating while
// the other copies), one when a single chunk holds the whole vector.
inline int64_t offload_buffers(int64_t n, int64_t chunk = kOffloadChunkFloats) {
  return n > chunk ? 2 : 1;
}

struct MemoryTerms {
  int64_t parameters = 0, gradients = 0, optimizer = 0, state = 0;
  int64_t activations = 0, workspace = 0, communication = 0;
  int64_t checkpoint = 0;  // checkpoint staging on rank 0 (planning/layout_memory.h)
  int64_t runtime = 0;     // the CPU engine's BLAS buffers (kCpuBlasBytes)
  int64_t offloaded = 0;   // optimizer state in pinned host memory: not part of total()
  int64_t total() const {
    return parameters + gradients + optimizer + state + activations + workspace + communication +
           checkpoint + runtime;
  }
};

// The terms for training `graph` (a whole model or a stage's sub-graph) under `q`, its executor's
// buffers from `buffers`. Errors: the graph's problems (invalid_input naming the node).
Result<MemoryTerms> estimate_memory(const recipes::Graph& graph, const MemoryQuery& q,
                                    const BatchBuffersFn& buffers);

// "1.21 GiB" and friends.
std::string memory_text(int64_t bytes);

// {"parameters": bytes, ..., "total": bytes, "offloaded_to_host": bytes}.
nlohmann::json memory_json(const MemoryTerms& t);

// "parameters 1.2 MiB, gradients ..., total 9.8 MiB" for people.
std::string terms_text(const MemoryTerms& t);

}  // namespace dltune::planning
