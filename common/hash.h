// SHA-256 (FIPS 180-4), for fingerprints, recipe signatures and bundle checksums.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dltune {

class Sha256 {
 public:
  Sha256();
  // Feeds bytes; may be called any number of times before digest().
  void update(const void* data, size_t len);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Finishes and returns the 32-byte digest. The object must not be updated afterwards.
  std::array<uint8_t, 32> digest();
  // digest() as 64 lowercase hex characters.
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

// SHA-256 of `data` as 64 lowercase hex characters.
std::string sha256_hex(std::string_view data);

}  // namespace dltune
