// Trusted-key files (tuner/db/signing.h, DLTUNE_TRUSTED_KEYS and a database's trusted_keys
// setting): any text is a list of keys or an error naming the line; keys write back as read.
#include <cstdint>
#include <string>
#include <string_view>

#include "tuner/db/signing.h"

#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dltune::tuner::db;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto keys = parse_trusted_keys(text, "fuzz");
  if (!keys) return 0;
  std::string lines;
  for (const PublicKey& k : *keys) lines += public_key_line(k);
  auto again = parse_trusted_keys(lines, "fuzz");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->size() == keys->size());
  for (size_t i = 0; i < keys->size(); ++i) {
    FUZZ_CHECK((*again)[i].name == (*keys)[i].name && (*again)[i].key == (*keys)[i].key);
    // Whatever the key, verifying garbage never succeeds and never crashes.
    FUZZ_CHECK(!verify((*keys)[i], text, "AAAA"));
  }
  return 0;
}
