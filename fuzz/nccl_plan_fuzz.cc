// The NCCL tuner plugin's plan reader (plugins/nccl_tuner/decision.h), inside a user's
// training job: any text is rules or an error, and applying the rules to a cost table stays
// inside the table.
#include <cstdint>
#include <string>
#include <vector>

#include "plugins/nccl_tuner/decision.h"

#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::plugins;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto d = Decision::from_plan_json(text, 8, 2);
  if (!d) return 0;
  constexpr int kAlgos = 7, kProtos = 3;
  std::vector<float> cells(kAlgos * kProtos, 1.0f);
  std::vector<float*> rows;
  for (int a = 0; a < kAlgos; ++a) rows.push_back(&cells[static_cast<size_t>(a * kProtos)]);
  for (int coll = 0; coll < 6; ++coll) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{65536}, ~size_t{0}}) {
      (void)d->apply(coll, bytes, rows.data(), kAlgos, kProtos);
      (void)d->apply(coll, bytes, rows.data(), 2, 1);  // a smaller table than the rules name
    }
  }
  return 0;
}
