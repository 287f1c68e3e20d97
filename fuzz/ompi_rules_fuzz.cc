// The Open MPI rules exporter's inputs (tuner/db/ompi_rules.h): a stored plan's collectives
// (first byte even) and a classic rules file (first byte odd). A plan that exports gives a
// rules file that the strict parser reads back with the same rules.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tuner/db/ompi_rules.h"

#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::tuner::db;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 1) {
    auto rules = parse_ompi_rules(text);
    if (rules) (void)format_ompi_rules(*rules);
    return 0;
  }
  auto plan = parse_plan_collectives(text);
  if (!plan) return 0;
  for (int comm_size : {1, 2, 7, 64}) {
    std::vector<std::string> notes;
    auto rules = rules_from_plan(*plan, comm_size, &notes);
    if (!rules) continue;
    auto back = parse_ompi_rules(format_ompi_rules(*rules));
    FUZZ_CHECK(back.ok());
    FUZZ_CHECK(back->collectives.size() == rules->collectives.size());
  }
  return 0;
}
