// engine/core/blas_kernels.h: the fallback rule, and this very process, which calls
// use_native_blas_kernels() first as dltune-worker does: on a CPU whose model OpenBLAS does not
// know (these VMs' Emerald Rapids), it has executed itself again by the time the tests run.
#include "engine/core/blas_kernels.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace dltune::engine {
namespace {

bool g_preset = false;  // OPENBLAS_CORETYPE was set before main() (by the user, not the call)

TEST(BlasKernels, AFallbackIsAPreAvx2KernelSetOnACpuWithBetter) {
  EXPECT_TRUE(blas_fell_back("Prescott", "SkylakeX"));
  EXPECT_TRUE(blas_fell_back("Core2", "Haswell"));
  EXPECT_TRUE(blas_fell_back("Sandybridge", "Haswell"));
  EXPECT_FALSE(blas_fell_back("Haswell", "SkylakeX"));  // AVX2 kernels the library chose stand
  EXPECT_FALSE(blas_fell_back("SkylakeX", "SkylakeX"));
  EXPECT_FALSE(blas_fell_back("Zen", "Haswell"));
  EXPECT_FALSE(blas_fell_back("Prescott", ""));  // nothing better to ask for
  EXPECT_FALSE(blas_fell_back("", "SkylakeX"));  // not OpenBLAS
}

TEST(BlasKernels, ThisProcessRunsTheKernelsOfItsInstructionSet) {
  const std::string chosen = blas_coretype(), native = native_blas_coretype();
  std::printf("BLAS kernels: %s (this CPU's: %s)\n", chosen.empty() ? "?" : chosen.c_str(),
              native.empty() ? "none better than the baseline" : native.c_str());
  if (g_preset) GTEST_SKIP() << "OPENBLAS_CORETYPE was set before the test started";
  EXPECT_FALSE(blas_fell_back(chosen, native)) << chosen << " on a CPU with " << native;
}

// A OPENBLAS_CORETYPE the user set is never replaced: a child started with Prescott keeps it.
TEST(BlasKernels, TheUsersChoiceStands) {
  char self[4096] = {};
  ASSERT_GT(::readlink("/proc/self/exe", self, sizeof self - 1), 0);
  FILE* p =
      ::popen(("OPENBLAS_CORETYPE=Prescott '" + std::string(self) + "' --print-core").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[64] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  ASSERT_EQ(::pclose(p), 0);
  EXPECT_EQ(std::string(buf, n), "Prescott\n");
}

}  // namespace
}  // namespace dltune::engine

int main(int argc, char** argv) {
  dltune::engine::g_preset = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  if (argc == 2 && std::string(argv[1]) == "--print-core") {
    dltune::engine::use_native_blas_kernels(argv);
    std::printf("%s\n", dltune::engine::blas_coretype().c_str());
    return 0;
  }
  // Remembered across the re-execution, which sets OPENBLAS_CORETYPE itself.
  if (!dltune::engine::g_preset) ::setenv("DLTUNE_TEST_CORETYPE_UNSET", "1", 1);
  dltune::engine::g_preset =
      dltune::engine::g_preset && std::getenv("DLTUNE_TEST_CORETYPE_UNSET") == nullptr;
  dltune::engine::use_native_blas_kernels(argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
