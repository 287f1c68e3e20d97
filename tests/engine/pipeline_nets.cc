#include "tests/engine/pipeline_nets.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "comm/thread_communicator.h"
#include "recipes/model/builtins.h"
#include "recipes/model/partition.h"

namespace dltune::engine::pipeline_testing {

namespace {

// A net from {"model": NAME, "graph": GRAPH} (the graph in recipes/model/graph.h's JSON form).
Net from_json(const char* json, int global_batch, double lr) {
  const auto j = nlohmann::json::parse(json);
  TrainConfig c;
  c.model = j.at("model").get<std::string>();
  auto g = recipes::graph_from_json(j.at("graph"));
  EXPECT_TRUE(g.ok()) << g.error().message();
  if (g.ok()) c.graph = std::move(*g);
  Net n{c, synthetic_digits(96, 3), synthetic_digits(40, 4)};
  n.config.global_batch = global_batch;
  n.config.lr = lr;
  return n;
}

Net dropout_chain() {
  return from_json(R"({"model": "dropnet", "graph": {"input": [1, 28, 28], "nodes": [
      {"name": "conv", "op": "conv2d", "out": 4, "kernel": 5},
      {"name": "relu1", "op": "relu"},
      {"name": "pool", "op": "maxpool", "kernel": 2},
      {"name": "fc1", "op": "linear", "out": 32, "flatten": true},
      {"name": "relu2", "op": "relu"},
      {"name": "drop", "op": "dropout", "p": 0.25},
      {"name": "fc2", "op": "linear", "out": 10}]}})",
                   12, 0.05);
}

// tests/launch/data/deep-mlp.yaml's shape (linear layers only), narrow, with dropout.
Net deep_mlp() {
  return from_json(R"({"model": "deep-mlp", "graph": {"input": [1, 28, 28], "nodes": [
      {"name": "fc1", "op": "linear", "out": 48, "flatten": true},
      {"name": "relu1", "op": "relu"},
      {"name": "fc2", "op": "linear", "out": 48},
      {"name": "relu2", "op": "relu"},
      {"name": "fc3", "op": "linear", "out": 48},
      {"name": "relu3", "op": "relu"},
      {"name": "drop", "op": "dropout", "p": 0.2},
      {"name": "fc4", "op": "linear", "out": 48},
      {"name": "relu4", "op": "relu"},
      {"name": "fc5", "op": "linear", "out": 10}]}})",
                   8, 0.05);
}

Net resnet20() {
  TrainConfig c;
  c.model = "resnet20";
  c.global_batch = 8;
  c.lr = 0.01;
  return {c, synthetic_cifar(32, 5), synthetic_cifar(12, 6)};
}

Net gpt() {
  recipes::BuiltinOptions o;
  o.blocks = 2, o.width = 32, o.heads = 2, o.context = 16, o.vocab = 256;
  TrainConfig c;
  c.model = "gpt-pipe";
  c.graph = *recipes::builtin_graph("gpt-tiny", o);
  c.optimizer = "adamw";
  c.lr = 3e-3;
  c.weight_decay = 0.1;
  // Adam divides by sqrt(v) + eps: with 1e-8 a gradient that is rounding noise moves its weight
  // by the full step, so the sums' order (stages sum the boundary and tied gradients apart)
  // would show as 1e-3 differences. 1e-6 keeps float noise at float-noise size.
  c.eps = 1e-6;
  c.clip_grad_norm = 0.5;  // small enough to clip: the global norm spans the stages
  c.global_batch = 8;
  // The text file is per process: ranks of an MPI test share TempDir.
  const std::string path =
      ::testing::TempDir() + "pipeline_text_" + std::to_string(::getpid()) + ".txt";
  std::ofstream f(path);
  for (int i = 0; i < 40; ++i) f << "the pipeline sends activations forward and gradients back. ";
  f.close();
  auto train = read_text(path, 16, 0.2, true);
  auto held = read_text(path, 16, 0.2, false);
  EXPECT_TRUE(train.ok() && held.ok());
  std::remove(path.c_str());
  return {c, std::move(*train), std::move(*held)};
}

}  // namespace

Net net(const std::string& name) {
  if (name == "dropnet") return dropout_chain();
  if (name == "deep-mlp") return deep_mlp();
  if (name == "resnet20") return resnet20();
  EXPECT_EQ(name, "gpt") << "no test network of this name";
  return gpt();
}

std::vector<std::string> partition(const TrainConfig& c, int stages) {
  auto g = model_graph(c);
  const recipes::GraphInfo info = recipes::analyze_graph(*g);
  const std::vector<int> cuts = recipes::cut_points(info);
  EXPECT_GE(static_cast<int>(cuts.size()), stages - 1);
  std::vector<int> firsts{0};
  for (int s = 1; s < stages; ++s)
    firsts.push_back(cuts[static_cast<size_t>(s) * cuts.size() / static_cast<size_t>(stages)]);
  return recipes::partition_names(*g, firsts);
}

void collect(Model& m, Trained& r) {
  r.params.assign(m.params(), m.params() + m.num_params());
  for (const auto& t : m.info().params)
    r.tensors.push_back(
        {t.name, std::vector<float>(m.params() + t.offset,
                                    m.params() + t.offset + recipes::numel(t.shape))});
  // Batch-norm running statistics: a recomputed forward must not count a batch twice.
  for (const auto& t : m.info().state)
    r.state.push_back({t.name, std::vector<float>(m.state() + t.offset,
                                                  m.state() + t.offset + recipes::numel(t.shape))});
}

Status train(Trainer& t, Trained& r) {
  for (int i = 0; i < kSteps; ++i) {
    auto l = t.step();
    if (!l) return l.error();
    r.losses.push_back(*l);
  }
  collect(t.model(), r);
  return ok_status();
}

Trained one_rank(const Net& n, int microbatches) {
  TrainConfig c = n.config;
  c.microbatches = microbatches;
  c.steps = kSteps;
  auto t = Trainer::create(c, nullptr, n.train, nullptr);
  EXPECT_TRUE(t.ok()) << t.error().message();
  Trained r;
  Status st = train(**t, r);
  EXPECT_TRUE(st.ok()) << st.error().message();
  return r;
}

std::vector<Trained> data_parallel(const Net& n, int microbatches, int ranks) {
  std::vector<Trained> runs(static_cast<size_t>(ranks));
  Status st = comm::spawn(ranks, [&](comm::Communicator& c) -> Status {
    TrainConfig cfg = n.config;
    cfg.microbatches = microbatches;
    auto t = Trainer::create(cfg, &c, n.train, nullptr);
    if (!t) return t.error();
    return train(**t, runs[static_cast<size_t>(c.rank())]);
  });
  EXPECT_TRUE(st.ok()) << st.error().message();
  return runs;
}

int compare_named(const Named& want, const Named& got, const std::string& where) {
  int found = 0;
  for (const auto& [name, g] : got) {
    const std::vector<float>* w = nullptr;
    for (const auto& t : want)
      if (t.first == name) w = &t.second;
    if (!w) continue;
    ++found;
    EXPECT_EQ(g.size(), w->size()) << name << " " << where;
    if (g.size() != w->size()) continue;
    double worst = 0.0;
    for (size_t i = 0; i < g.size(); ++i)
      worst = std::max(worst, std::abs(double{g[i]} - (*w)[i]) / (1e-3 + std::abs((*w)[i])));
    EXPECT_LT(worst, 2e-4) << name << " " << where;
  }
  return found;
}

}  // namespace dltune::engine::pipeline_testing
