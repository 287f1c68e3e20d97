// The collective vocabulary every module shares (DESIGN.md: one enum per concept): the
// allreduce algorithms dltune's comm/ runs on CPUs and NCCL's algorithms and protocols on GPUs.
// Each value has one lower-case spelling, the one recipes, plans, the database, the exporters,
// the plugins and `dltune bench --json` use; *_name() gives it and parse_*() reads it back.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dltune {

enum class Algorithm {
  // dltune's own (comm/), on host memory:
  kRing,               // "ring": Baidu-style segmented ring (reduce-scatter + allgather)
  kRecursiveDoubling,  // "rd": pairwise exchange of whole vectors, non-powers of two folded
  kRabenseifner,       // "rabenseifner": recursive-halving reduce-scatter + doubling allgather
  kTree,               // "tree": binomial-tree reduce to rank 0, then binomial broadcast
  kHierarchical,       // "hier": node-local phase, a flat algorithm among node leaders, bcast
  kShm,                // "shm": node-local shared-memory reduction (one node only)
  kCma,                // "cma": node-local single-copy reduction on the ranks' own buffers
                       // through cross-memory attach (process_vm_readv/writev; one node only)
  kNative,             // "native": the transport's own (MPI_Allreduce)
  // NCCL's (GPU), chosen per call by dltune's NCCL tuner plugin:
  kNcclTree,           // "nccl_tree"
  kNcclRing,           // "nccl_ring"
  kNcclCollnetDirect,  // "nccl_collnet_direct"
  kNcclCollnetChain,   // "nccl_collnet_chain"
  kNcclNvls,           // "nccl_nvls"
  kNcclNvlsTree,       // "nccl_nvls_tree"
  kNcclPat,            // "nccl_pat"
};

// NCCL's protocol for an NCCL algorithm; kAny: the cheapest NCCL offers for the algorithm.
enum class NcclProtocol { kAny, kLL, kLL128, kSimple };

std::string_view algorithm_name(Algorithm a);
// nullopt for anything not spelled exactly as algorithm_name() prints it.
std::optional<Algorithm> parse_algorithm(std::string_view s);
// Every algorithm's name, in enum order (for "allowed: ..." messages).
std::vector<std::string> algorithm_names();
// Whether `a` is one of NCCL's (GPU) algorithms.
bool is_nccl(Algorithm a);
// dltune's own algorithms (comm/ runs them), in enum order.
const std::vector<Algorithm>& host_algorithms();

std::string_view nccl_protocol_name(NcclProtocol p);  // "", "ll", "ll128", "simple"

// An algorithm as plans spell it, with NCCL's protocol where it has one: "ring",
// "nccl_ring", "nccl_ring_ll128" (and NCCL communicators' "nccl:ring/ll128", "nccl:ring/"),
// read; the first form written by choice_name(). nullopt for anything else.
std::optional<std::pair<Algorithm, NcclProtocol>> parse_choice(std::string_view s);
std::string choice_name(Algorithm a, NcclProtocol p);

}  // namespace dltune
