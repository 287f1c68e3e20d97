#include "tuner/db/key.h"

#include <set>

#include "common/hash.h"

#include "dltune/config.h"

#if DLTUNE_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API is enough; the C++ bindings warn
#include <mpi.h>
#endif
#if DLTUNE_HAVE_PMIX
#include <pmix_version.h>
#endif
#if DLTUNE_HAVE_NCCL
#include <nccl.h>
#endif

namespace dltune::tuner::db {

SoftwareVersions current_versions(bool with_nccl) {
  SoftwareVersions v;
  v.dltune = DLTUNE_VERSION;
#if DLTUNE_HAVE_MPI && defined(OMPI_MAJOR_VERSION)
  v.mpi = std::to_string(OMPI_MAJOR_VERSION) + "." + std::to_string(OMPI_MINOR_VERSION) + "." +
          std::to_string(OMPI_RELEASE_VERSION);
#elif DLTUNE_HAVE_MPI
  v.mpi = "mpi-" + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION);
#endif
#if DLTUNE_HAVE_PMIX
  v.pmix = std::to_string(PMIX_VERSION_MAJOR) + "." + std::to_string(PMIX_VERSION_MINOR) + "." +
           std::to_string(PMIX_VERSION_RELEASE);
#endif
#if DLTUNE_HAVE_NCCL
  if (with_nccl) {
    v.nccl = std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
             std::to_string(NCCL_PATCH);
  }
#else
  (void)with_nccl;
#endif
  return v;
}

std::string family(const topology::Topology& topo) {
  // Sets, so that counts and order do not matter.
  std::set<std::string> cpus, gpus, nics, paths;
  for (const auto& p : topo.packages) cpus.insert(p.cpu_model);
  for (const auto& g : topo.gpus) gpus.insert(g.vendor + "/" + g.model);
  for (const auto& n : topo.nics) {
    if (n.hpc) nics.insert(std::string(topology::nic_kind_name(n.kind)) + "/" + n.model);
  }
  for (const auto& row : topo.gpu_paths) {
    for (const auto& p : row) paths.insert("gg:" + p.str());
  }
  for (const auto& row : topo.gpu_nic_paths) {
    for (const auto& p : row) paths.insert("gn:" + p.str());
  }
  std::string text = "family-v1\n";
  for (const auto* set : {&cpus, &gpus, &nics, &paths}) {
    for (const auto& s : *set) text += s + "\n";
    text += "--\n";
  }
  return sha256_hex(text);
}

Key make_key(const topology::Topology& topo, const JobShape& shape,
             const std::string& recipe_signature, bool with_nccl) {
  Key k;
  k.fingerprint = topology::fingerprint(topo);
  k.family = family(topo);
  k.versions = current_versions(with_nccl);
  k.shape = shape;
  k.recipe = recipe_signature;
  return k;
}

}  // namespace dltune::tuner::db
