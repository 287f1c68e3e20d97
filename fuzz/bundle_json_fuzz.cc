// Bundles (JSON, tuner/db/bundle.h) as `db import` reads them: any text is a bundle or one
// error; a bundle that parses re-exports to one that parses to the same rows, and its rows
// merge into a database.
#include <cstdint>
#include <string>
#include <string_view>

#include "tuner/db/bundle.h"

#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::tuner::db;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Verification v;
  auto b = parse_bundle(text, {}, &v);
  if (!b) return 0;
  auto again = parse_bundle(bundle_to_json(*b));
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->plans.size() == b->plans.size());
  FUZZ_CHECK(again->measurements.size() == b->measurements.size());
  FUZZ_CHECK(again->recipe_trials.size() == b->recipe_trials.size());
  auto db = TuningDb::open(":memory:", OpenMode::kReadWrite);
  FUZZ_CHECK(db.ok());
  auto merged = db->merge_rows(b->plans, b->measurements, ConflictPolicy::kPreferNewer,
                               b->recipe_trials, "fuzz");
  // Rows that parse are valid rows; only a trial without its plan may still be refused.
  FUZZ_CHECK(merged.ok() ||
             merged.error().message().find("no plan with its key") != std::string::npos);
  return 0;
}
