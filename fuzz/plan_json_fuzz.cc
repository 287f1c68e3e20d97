// Plans (JSON, recipes/plan.h) as the database, a bundle or DLTUNE_PLAN hand them over: any
// text is a plan or an error; a plan round-trips exactly and has a rule for every size.
#include <cstdint>
#include <string>
#include <string_view>

#include "recipes/plan.h"

#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::recipes;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto plan = parse_plan(text);
  if (!plan) return 0;
  (void)check_plan_plausible(*plan);
  auto again = parse_plan(serialize_plan(*plan));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *plan);
  for (const auto& [c, ranges] : plan->collectives) {
    for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{4096}, kPlanMaxBytes}) {
      FUZZ_CHECK(plan->algorithm_for(c, bytes).has_value());
    }
  }
  return 0;
}
