// Tuning databases (SQLite files, tuner/db/) as `db merge`, `db import` and DLTUNE_SITE_DB read
// them: any bytes are a database whose rows come back, or one error (a negative or newer schema
// number, tables that are not ours, damage), never a hang or a crash (a negative schema number
// once indexed the migration steps below zero and ran the binary's bytes as SQL). Rows that
// come back are validated like an import's and the valid ones merge; as a site database the
// file is skipped with one warning or searched, never an error of the look-up.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include "common/paths.h"
#include "tuner/db/bundle.h"
#include "tuner/db/lookup.h"
#include "tuner/db/store.h"

#include "fuzz/fuzz_check.h"

namespace {

// One file per process for the input, rewritten every run (SQLite reads files, not buffers).
const std::string& input_path() {
  static const std::string path =
      dltune::paths::temp_root() + "/dltune-fuzz-db-" + std::to_string(::getpid()) + ".db";
  return path;
}

void remove_files(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::tuner::db;
  const std::string& path = input_path();
  remove_files(path);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(f != nullptr);
  FUZZ_CHECK(std::fwrite(data, 1, size, f) == size);
  std::fclose(f);

  // As a site database: skipped with a warning, or searched; the look-up itself never fails.
  Layers layers;
  layers.site_dbs = {path};
  Key key;
  key.fingerprint = "ab12";
  key.family = "fa01";
  key.versions = {"4.1.4", "4.2.2", "", "0.1.0"};
  key.shape = {1, 2};
  key.recipe = "cafe";
  auto hit = lookup_plan(layers, key);
  FUZZ_CHECK(hit.ok());

  // As a source of `db merge`: rows, or one error; rows that validate merge.
  auto src = read_source(path);
  if (src.ok()) {
    const Bundle& b = src->bundle;
    if (validate_rows(b.plans, b.measurements, b.recipe_trials).ok()) {
      auto db = TuningDb::open(":memory:", OpenMode::kReadWrite);
      FUZZ_CHECK(db.ok());
      auto merged = db->merge_rows(b.plans, b.measurements, ConflictPolicy::kPreferNewer,
                                   b.recipe_trials, "fuzz");
      FUZZ_CHECK(merged.ok());
    }
  }
  remove_files(path);
  return 0;
}
