#include "predict/fabric.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace dltune::predict {
namespace {

double log2_ceil(int p) { return p <= 1 ? 0 : std::ceil(std::log2(static_cast<double>(p))); }
bool pow2(int p) { return p > 0 && (p & (p - 1)) == 0; }

// Seconds per byte of one rank's transfer across nodes when `senders` of the node's ranks send
// at once: its share of the node's links (G / senders times its own beta, never better than the
// whole node's links for one sender).
double inter_beta(const Fabric& f, int per_node, int senders) {
  return f.inter.beta_s_per_b * static_cast<double>(senders) / static_cast<double>(per_node);
}

// dltune's node-local shared-memory allreduce: two barriers, each rank reducing its 1/G of
// every local buffer and copying the result out.
double shm_seconds(double n, int g, const Fabric& f) {
  if (g <= 1) return 0;
  const double share = (g - 1.0) / g;
  return 2 * f.intra.alpha_s + 2 * share * n * f.intra.beta_s_per_b +
         share * n * f.intra.gamma_s_per_b;
}

double ring(double n, int nodes, int g, const Fabric& f) {
  const int p = nodes * g;
  const double alpha = nodes > 1 ? f.inter.alpha_s : f.intra.alpha_s;
  double beta = g > 1 ? f.intra.beta_s_per_b : 0;
  if (nodes > 1) beta = std::max(beta, inter_beta(f, g, 1));  // one rank crosses each boundary
  const double gamma =
      nodes > 1 ? std::max(f.intra.gamma_s_per_b, f.inter.gamma_s_per_b) : f.intra.gamma_s_per_b;
  return 2.0 * (p - 1) * alpha + 2.0 * (p - 1) / p * n * beta + (p - 1.0) / p * n * gamma;
}

// The fold of non-powers of two: two more steps of the whole vector on the slowest level.
double fold(double n, int nodes, int g, const Fabric& f) {
  if (pow2(nodes * g)) return 0;
  const Link& l = nodes > 1 ? f.inter : f.intra;
  const double beta = nodes > 1 ? inter_beta(f, g, 1) : l.beta_s_per_b;
  return 2 * (l.alpha_s + n * beta) + n * l.gamma_s_per_b;
}

double recursive_doubling(double n, int nodes, int g, const Fabric& f) {
  const double in_steps = log2_ceil(g), out_steps = log2_ceil(nodes);
  double t = in_steps * (f.intra.alpha_s + n * (f.intra.beta_s_per_b + f.intra.gamma_s_per_b));
  t += out_steps * (f.inter.alpha_s + n * (inter_beta(f, g, g) + f.inter.gamma_s_per_b));
  return t + fold(n, nodes, g, f);
}

double rabenseifner(double n, int nodes, int g, const Fabric& f) {
  const double out_bytes = n * (1 - 1.0 / nodes);
  const double in_bytes = n / nodes * (1 - 1.0 / g);
  double t = 2 * (log2_ceil(nodes) * f.inter.alpha_s + log2_ceil(g) * f.intra.alpha_s);
  t += 2 * (out_bytes * inter_beta(f, g, g) + in_bytes * f.intra.beta_s_per_b);
  t += out_bytes * f.inter.gamma_s_per_b + in_bytes * f.intra.gamma_s_per_b;
  return t + fold(n, nodes, g, f);
}

double tree(double n, int nodes, int g, const Fabric& f) {
  // Binomial: the steps inside a node and those across nodes (one rank per node pair at a
  // time, alone on its node's links), each twice (reduce, then broadcast).
  const double in_steps = log2_ceil(g), out_steps = log2_ceil(nodes);
  double t = 2 * in_steps * (f.intra.alpha_s + n * f.intra.beta_s_per_b);
  t += 2 * out_steps * (f.inter.alpha_s + n * inter_beta(f, g, 1));
  return t + (in_steps + out_steps) * n * f.intra.gamma_s_per_b;
}

// comm/algo_hier.cc's multi-leader form: the shared-memory reduce-scatter and allgather (the
// node-local allreduce's two barriers and traffic, split around the network phase), and between
// them a ring across nodes on every rail at once, each rank carrying its 1/G of the vector on
// its share of the node's links. With one rank per node it is a plain ring among the nodes; on
// one node (no rails) the single-leader form: the node-local allreduce, then a binomial
// broadcast from local rank 0.
double hier(double n, int nodes, int g, const Fabric& f) {
  const double local = shm_seconds(n, g, f);
  if (nodes <= 1) return local + log2_ceil(g) * (f.intra.alpha_s + n * f.intra.beta_s_per_b);
  const double share = (nodes - 1.0) / nodes, slice = n / g;
  return local + 2.0 * (nodes - 1) * f.inter.alpha_s + 2 * share * slice * inter_beta(f, g, g) +
         share * slice * f.inter.gamma_s_per_b;
}

double hier_pipelined(double n, int nodes, int g, const Fabric& f) {
  const double in_share = (g - 1.0) / g, out_share = (nodes - 1.0) / nodes;
  const double t_in =
      2 * in_share * n * f.intra.beta_s_per_b + in_share * n * f.intra.gamma_s_per_b;
  // Each rank carries n / G across nodes on its own share of the network.
  const double t_out =
      2 * out_share * (n / g) * f.inter.beta_s_per_b + out_share * (n / g) * f.inter.gamma_s_per_b;
  const double c = std::min(f.chunk_bytes, n / g);
  double stage = g > 1 ? f.intra.alpha_s + c * f.intra.beta_s_per_b : 0;
  if (nodes > 1) stage = std::max(stage, f.inter.alpha_s + c * f.inter.beta_s_per_b);
  // A chain through the node's ranks, a double binary tree across nodes, up and down.
  const double depth = 2.0 * (g - 1) + 2.0 * log2_ceil(nodes);
  return std::max(t_in, t_out) + depth * stage;
}

}  // namespace

std::string_view algo_name(AllreduceAlgo a) {
  switch (a) {
    case AllreduceAlgo::kRing:
      return "ring";
    case AllreduceAlgo::kRecursiveDoubling:
      return "rd";
    case AllreduceAlgo::kRabenseifner:
      return "rabenseifner";
    case AllreduceAlgo::kTree:
      return "tree";
    case AllreduceAlgo::kHier:
      return "hier";
    case AllreduceAlgo::kHierPipelined:
      return "hier_pipelined";
    case AllreduceAlgo::kShm:
      return "shm";
  }
  return "ring";
}

Result<AllreduceAlgo> parse_algo(std::string_view name) {
  for (AllreduceAlgo a : {AllreduceAlgo::kRing, AllreduceAlgo::kRecursiveDoubling,
                          AllreduceAlgo::kRabenseifner, AllreduceAlgo::kTree, AllreduceAlgo::kHier,
                          AllreduceAlgo::kHierPipelined, AllreduceAlgo::kShm}) {
    if (algo_name(a) == name) return a;
  }
  return invalid_input(
      "unknown allreduce algorithm '" + std::string(name) +
      "'; expected auto, ring, rd, rabenseifner, tree, hier, hier_pipelined or shm");
}

std::vector<AllreduceAlgo> host_algorithms(int nodes) {
  return {AllreduceAlgo::kRing, AllreduceAlgo::kRecursiveDoubling, AllreduceAlgo::kRabenseifner,
          AllreduceAlgo::kTree, nodes > 1 ? AllreduceAlgo::kHier : AllreduceAlgo::kShm};
}

std::vector<AllreduceAlgo> nccl_algorithms() {
  return {AllreduceAlgo::kRing, AllreduceAlgo::kHierPipelined};
}

double allreduce_seconds(AllreduceAlgo algo, double bytes, int nodes, int per_node,
                         const Fabric& fabric) {
  DLTUNE_CHECK(nodes >= 1 && per_node >= 1 && bytes >= 0);
  if (nodes * per_node <= 1 || bytes <= 0) return 0;
  switch (algo) {
    case AllreduceAlgo::kRing:
      return ring(bytes, nodes, per_node, fabric);
    case AllreduceAlgo::kRecursiveDoubling:
      return recursive_doubling(bytes, nodes, per_node, fabric);
    case AllreduceAlgo::kRabenseifner:
      return rabenseifner(bytes, nodes, per_node, fabric);
    case AllreduceAlgo::kTree:
      return tree(bytes, nodes, per_node, fabric);
    case AllreduceAlgo::kHier:
      return hier(bytes, nodes, per_node, fabric);
    case AllreduceAlgo::kHierPipelined:
      return hier_pipelined(bytes, nodes, per_node, fabric);
    case AllreduceAlgo::kShm:
      return nodes > 1 ? hier(bytes, nodes, per_node, fabric)
                       : shm_seconds(bytes, per_node, fabric);
  }
  return 0;
}

AlgoTime best_allreduce(const std::vector<AllreduceAlgo>& among, double bytes, int nodes,
                        int per_node, const Fabric& fabric) {
  DLTUNE_CHECK(!among.empty());
  AlgoTime best{among.front(), allreduce_seconds(among.front(), bytes, nodes, per_node, fabric)};
  for (size_t i = 1; i < among.size(); ++i) {
    const double t = allreduce_seconds(among[i], bytes, nodes, per_node, fabric);
    if (t < best.seconds) best = {among[i], t};
  }
  return best;
}

double bus_gbps(double bytes, double seconds, int ranks) {
  if (seconds <= 0 || ranks < 2) return 0;
  return bytes / seconds * 2.0 * (ranks - 1) / ranks / 1e9;
}

}  // namespace dltune::predict
