// Golden-output tests for the human-readable `dltune topo` text of every fixture. After an
// intended change of the format, rewrite the files with
//   DLTUNE_UPDATE_GOLDEN=1 ctest -R topology_test
// and review the diff of topology/tests/data/*.golden.txt.
#include <string>

#include <gtest/gtest.h>

#include "common/env.h"
#include "common/paths.h"
#include "topology/tests/test_util.h"

namespace dltune::topology {
namespace {

class Golden : public ::testing::TestWithParam<const char*> {};

TEST_P(Golden, TextOutputMatches) {
  const std::string name = GetParam();
  Topology t = testing::load_fixture(name + ".xml");
  t.source = name + ".xml";  // the path differs between checkouts; the file name does not
  const std::string got = render_text(t, place(t, 0, BindPolicy::kAuto));
  const std::string golden = testing::data_path(name + ".golden.txt");
  if (env::get(env::kUpdateGolden) == "1") {
    ASSERT_TRUE(paths::write_file_atomic(golden, got).ok());
    GTEST_SKIP() << "rewrote " << golden;
  }
  auto want = paths::read_file(golden);
  ASSERT_TRUE(want.ok()) << want.error().message() << " (create it with DLTUNE_UPDATE_GOLDEN=1)";
  EXPECT_EQ(got, *want) << "output of " << name
                        << " changed; if intended, rerun with DLTUNE_UPDATE_GOLDEN=1";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden,
                         ::testing::Values("hwloc_nvidiaDGX2", "hwloc_power8gpudistances",
                                           "mpibind_coral-lassen", "mpibind_cts1-pascal",
                                           "mpibind_cts1-quartz-smt1", "mpibind_eas-tioga",
                                           "mpibind_g4dnmetal"),
                         [](const auto& p) {
                           std::string s = p.param;
                           for (char& c : s) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace dltune::topology
