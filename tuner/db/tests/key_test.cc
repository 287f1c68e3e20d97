#include "tuner/db/key.h"

#include <gtest/gtest.h>

#include "dltune/config.h"

namespace dltune::tuner::db {
namespace {

// A node of one design with `gpus` GPUs of one model, all pairs NVLinked twice.
topology::Topology node(int gpus, const std::string& gpu_model) {
  topology::Topology t;
  t.packages = {{0, "AMD EPYC 7763", 64, 64}};
  t.numa_nodes = {{0, 0, 1ull << 38, {}}};
  t.pus = 64;
  for (int i = 0; i < gpus; ++i) {
    topology::Gpu g;
    g.index = i;
    g.vendor = "nvidia";
    g.model = gpu_model;
    g.numa = 0;
    g.package = 0;
    t.gpus.push_back(g);
  }
  t.gpu_paths.assign(static_cast<size_t>(gpus), {});
  for (int i = 0; i < gpus; ++i) {
    for (int j = 0; j < gpus; ++j) {
      t.gpu_paths[static_cast<size_t>(i)].push_back(
          i == j ? topology::Path{topology::PathType::kSelf, 0}
                 : topology::Path{topology::PathType::kNvLink, 2});
    }
  }
  return t;
}

TEST(Key, FamilyIgnoresCountsButNotModels) {
  const auto four = node(4, "A100-SXM4-40GB");
  const auto eight = node(8, "A100-SXM4-40GB");
  const auto other = node(4, "H100-SXM5-80GB");
  EXPECT_EQ(family(four), family(eight));
  EXPECT_NE(family(four), family(other));
  EXPECT_NE(topology::fingerprint(four), topology::fingerprint(eight));
  EXPECT_EQ(family(four).size(), 64u);
}

TEST(Key, CarriesShapeRecipeAndVersions) {
  const auto t = node(2, "V100");
  const Key k = make_key(t, JobShape{2, 4}, "abc123", /*with_nccl=*/false);
  EXPECT_EQ(k.fingerprint, topology::fingerprint(t));
  EXPECT_EQ(k.shape.ranks(), 8);
  EXPECT_EQ(k.recipe, "abc123");
  EXPECT_EQ(k.versions.dltune, DLTUNE_VERSION);
  EXPECT_EQ(k.versions.nccl, "");  // CPU jobs are not keyed by NCCL's version
  EXPECT_EQ(!k.versions.mpi.empty(), DLTUNE_HAVE_MPI == 1);
  EXPECT_EQ(!k.versions.pmix.empty(), DLTUNE_HAVE_PMIX == 1);
  EXPECT_EQ(!make_key(t, {1, 1}, "", true).versions.nccl.empty(), DLTUNE_HAVE_NCCL == 1);
}

}  // namespace
}  // namespace dltune::tuner::db
