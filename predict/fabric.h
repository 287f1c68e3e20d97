// The allreduce cost model of a machine of N nodes with G ranks each: what `dltune predict`
// uses to extrapolate communication to node counts nobody measured.
//
// The model. Two levels, each an alpha-beta-gamma link as one rank sees it (Hockney's
// alpha-beta model with Thakur, Rabenseifner and Gropp's gamma for the reduction): `intra`
// between two ranks of one node (shared memory, NVLink), `inter` between nodes, where beta is
// one rank's share of its node's network bandwidth (so the node's links carry G / beta bytes
// per second when all of its ranks send at once, and one rank alone may use all of them, as a
// node leader or a ring's node crossing does). Ranks are numbered node by node. Each algorithm's
// time is the sum of its steps, each step costing its latency, its bytes over the slowest link
// it crosses, and the bytes it reduces:
//   ring          2(p-1) steps of n/p (any crossing makes every step pay inter's alpha);
//   rd            log2(p) exchanges of n; log2(N) of them cross nodes with all G ranks at once;
//   rabenseifner  recursive halving from the farthest partner: n(1-1/N) crosses nodes, n/N
//                 (1-1/G) stays inside, each twice (reduce-scatter and allgather);
//   tree          a binomial reduce and broadcast, 2 log2(p) steps of n;
//   hier          dltune's two-level algorithm (comm/algo_hier.cc, the S-Caffe / MVAPICH2
//                 design): a shared-memory allreduce in the node, a ring among the N node
//                 leaders (each alone on its node's links), a binomial broadcast in the node;
//   shm           one node only: two barriers around each rank reducing its 1/G of every
//                 local buffer in shared memory (across nodes it is hier);
//   hier_pipelined  NCCL's multi-node shape: reduce-scatter in the node, an allreduce of n/G
//                 per rank across nodes on every rank's own share of the network, allgather in
//                 the node, pipelined in chunks (chunk_bytes, NCCL's 512 KiB: a 4 MiB channel
//                 buffer in 8 steps), so it takes the slower level's time plus the pipeline's
//                 fill: a chain through the node and NCCL's double binary tree across nodes,
//                 up and down, 2(G-1) + 2 ceil(log2 N) stages of one chunk at the slowest.
// Non-powers of two pay the standard fold (two more steps of n) in rd and rabenseifner.
// Contention between ranks other than the node link's share, congestion inside the network and
// overlap of the levels (other than hier_pipelined's) are not modelled.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dltune::predict {

struct Link {
  double alpha_s = 0;        // per message
  double beta_s_per_b = 0;   // per byte sent by one rank (1 / its bandwidth)
  double gamma_s_per_b = 0;  // per byte reduced (summed into a buffer)
  double gbps() const { return beta_s_per_b > 0 ? 1e-9 / beta_s_per_b : 0; }
};

struct Fabric {
  Link intra;
  Link inter;
  double chunk_bytes = 512 * 1024;  // hier_pipelined's chunk
};

enum class AllreduceAlgo {
  kRing,
  kRecursiveDoubling,
  kRabenseifner,
  kTree,
  kHier,
  kHierPipelined,
  kShm,  // dltune's node-local shared-memory allreduce (one node; hier's first phase)
};

// "ring", "rd", "rabenseifner", "tree", "hier", "hier_pipelined", "shm" (comm/'s names where
// dltune has the algorithm).
std::string_view algo_name(AllreduceAlgo a);
// Errors (invalid_input): a name not listed above.
Result<AllreduceAlgo> parse_algo(std::string_view name);
// The algorithms dltune's own host collectives run (shm on one node, hier across nodes), and
// the ones an NCCL job chooses between.
std::vector<AllreduceAlgo> host_algorithms(int nodes);
std::vector<AllreduceAlgo> nccl_algorithms();

// Seconds for one allreduce of `bytes` over `nodes` x `per_node` ranks. One rank: 0.
// Preconditions: nodes >= 1, per_node >= 1, bytes >= 0.
double allreduce_seconds(AllreduceAlgo algo, double bytes, int nodes, int per_node,
                         const Fabric& fabric);

struct AlgoTime {
  AllreduceAlgo algo = AllreduceAlgo::kRing;
  double seconds = 0;
};
// The fastest of `among` (non-empty) at this size.
AlgoTime best_allreduce(const std::vector<AllreduceAlgo>& among, double bytes, int nodes,
                        int per_node, const Fabric& fabric);

// nccl-tests' bus bandwidth of an allreduce of `bytes` taking `seconds` on p ranks (GB/s):
// bytes / seconds x 2 (p-1) / p.
double bus_gbps(double bytes, double seconds, int ranks);

}  // namespace dltune::predict
