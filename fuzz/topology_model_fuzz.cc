// The topology model as dltune-topo-probe sends it back to a plugin (topology/model_json.h):
// any answer is a model or an error, and a model round-trips.
#include <cstdint>
#include <string_view>

#include "topology/model_json.h"

#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::topology;
  auto t = model_from_json(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!t) return 0;
  auto back = model_from_json(model_to_json(*t));
  FUZZ_CHECK(back.ok() && *back == *t);
  (void)fingerprint(*t);
  return 0;
}
