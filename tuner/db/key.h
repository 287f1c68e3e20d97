// How a machine, a job shape and a recipe become the database key plans are stored under.
// One place, so that `dltune launch`, `dltune tune`, the SPANK plugin and the NCCL tuner
// plugin look plans up under exactly the keys the tuner stored them with.
#pragma once

#include <string>

#include "topology/topology.h"
#include "tuner/db/records.h"

namespace dltune::tuner::db {

// The versions of the communication software this build uses: Open MPI and PMIx (when built
// with them), NCCL when `with_nccl` (GPU jobs; "" on CPU), and dltune.
SoftwareVersions current_versions(bool with_nccl);

// The coarse "family" of a node, for near hits: a SHA-256 over the CPU, GPU and NIC models
// and the set of GPU/NIC path classes, leaving out every count. Two nodes of one design with
// different numbers of GPUs or cores share a family but not a fingerprint.
std::string family(const topology::Topology& topo);

// The full key: topology::fingerprint(topo), family(topo), current_versions(with_nccl),
// `shape`, and `recipe_signature` ("" for collective-only plans).
Key make_key(const topology::Topology& topo, const JobShape& shape,
             const std::string& recipe_signature, bool with_nccl);

}  // namespace dltune::tuner::db
