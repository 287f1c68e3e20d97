// The networks and references of the pipeline equivalence tests (pipeline_test: ranks as
// threads; pipeline_mpi_test: ranks as MPI processes). Small instances of the kinds of model
// the seeds train: a chain with dropout, a deep MLP with dropout, a residual network with batch
// norm (resnet20) and a GPT whose token embedding is tied to its head; one rank's training
// with gradient accumulation over micro-batches, plain data parallelism over ranks as threads,
// and the comparison of named tensors. Every function reports failures through gtest.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/graph/model.h"
#include "engine/train/trainer.h"

namespace dltune::engine::pipeline_testing {

inline constexpr int kSteps = 3;  // steps each equivalence run trains

struct Net {
  TrainConfig config;
  Dataset train, heldout;
};

// "dropnet" (conv, pool, two linears, dropout), "deep-mlp" (five linears, dropout), "resnet20"
// or "gpt" (2 blocks, tied embedding, AdamW, gradient clipping). Fails the test on another name.
Net net(const std::string& name);

// The `stages` first nodes of a partition spread evenly over the graph's cut points (the places
// where one tensor crosses): config.partition for a pipeline of `stages` stages.
std::vector<std::string> partition(const TrainConfig& c, int stages);

using Named = std::vector<std::pair<std::string, std::vector<float>>>;

struct Trained {
  std::vector<double> losses;  // one per step
  Named tensors;               // parameters, by name
  Named state;                 // running statistics, by name
  std::vector<float> params;   // the whole parameter buffer
};

// The model's parameters, whole and by tensor name, and its state tensors by name, into `r`.
void collect(Model& m, Trained& r);
// kSteps steps of `t`: their losses, then its tensors, into `r`.
Status train(Trainer& t, Trained& r);
// One rank training `n` with `microbatches` micro-batches per step (gradient accumulation).
Trained one_rank(const Net& n, int microbatches);
// Plain data parallelism over `ranks` ranks (threads), `microbatches` per rank: each rank's
// result.
std::vector<Trained> data_parallel(const Net& n, int microbatches, int ranks);

// Compares every tensor of `got` with the tensor of the same name in `want`: equal sizes, and
// the largest |got - want| / (1e-3 + |want|) under 2e-4 (gtest failures name the tensor and
// `where`). Returns how many of got's tensors `want` has.
int compare_named(const Named& want, const Named& got, const std::string& where);

}  // namespace dltune::engine::pipeline_testing
