// The launcher tests' machines: topology/tests/data's hwloc exports of real servers, loaded by
// file name (a failure to load fails the calling test and gives an empty topology).
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "topology/topology.h"

#include "dltune/config.h"

namespace dltune::launcher::testing {

inline topology::Topology test_topology(const std::string& file) {
  auto topo = topology::load_xml(std::string(DLTUNE_SOURCE_DIR) + "/topology/tests/data/" + file);
  EXPECT_TRUE(topo.ok()) << file << ": " << topo.error().message();
  return topo.ok() ? *topo : topology::Topology{};
}

}  // namespace dltune::launcher::testing
