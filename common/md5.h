// MD5 (RFC 1321), only to compare downloaded files with the checksums their publishers list
// (MNIST's and CIFAR-10's archives are published with MD5 sums). Not for anything that must
// resist tampering: signatures and fingerprints use SHA-256 (common/hash.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dltune {

class Md5 {
 public:
  Md5();
  // Feeds bytes; may be called any number of times before hex_digest().
  void update(const void* data, size_t len);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Finishes and returns the digest as 32 lowercase hex characters. The object must not be
  // updated afterwards.
  std::string hex_digest();

 private:
  void block(const uint8_t* p);  // one 64-byte block
  std::array<uint32_t, 4> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

// MD5 of `data` as 32 lowercase hex characters.
std::string md5_hex(std::string_view data);

}  // namespace dltune
