// Ed25519 signatures for bundles (libsodium): site keys, trusted-key lists, signing and
// verifying. A bundle's SHA-256 checksum only catches accidents (anyone can recompute it); a
// signature says which site vouched for the bundle's whole content, provenance included.
//
// Files (one key per line, "NAME BASE64"; NAME is 1-64 of [A-Za-z0-9._-]):
//   SITE.key  "SITE <base64 of the 64-byte libsodium secret key>", mode 0600
//   SITE.pub  "SITE <base64 of the 32-byte public key>"
//   trusted keys (DLTUNE_TRUSTED_KEYS, or a database's trusted_keys setting): any number of
//             .pub lines; '#' starts a comment; blank lines are ignored.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dltune::tuner::db {

struct PublicKey {
  std::string name;
  std::array<uint8_t, 32> key{};
};

struct SecretKey {
  std::string name;
  std::array<uint8_t, 64> key{};  // libsodium's Ed25519 secret key: seed and public key
  PublicKey public_key() const;
};

// Ok when `name` can name a key: 1 to 64 characters of [A-Za-z0-9._-].
Status check_key_name(std::string_view name);

// Makes a new key pair named `name` and writes DIR/NAME.key (mode 0600, created exclusively:
// an existing file is never overwritten) and DIR/NAME.pub. Errors: a bad name, an existing key
// file, I/O. Returns the public key.
Result<PublicKey> generate_key_files(const std::string& dir, const std::string& name);

// Reads a secret key file. Refuses one that others may read (mode & 077) or that is not one
// well-formed line. Errors name the file.
Result<SecretKey> read_secret_key(const std::string& path);

// Parses trusted-key lines (the .pub format); `origin` names the text in errors ("line N").
// Two keys of one name are an error; so is a bad line.
Result<std::vector<PublicKey>> parse_trusted_keys(std::string_view text, const std::string& origin);
// Reads the file `path` and parses it. Refuses a file that others may change (group- or
// world-writable: mode & 022), naming its mode: whoever writes it decides what is trusted.
Result<std::vector<PublicKey>> read_trusted_keys(const std::string& path);

// "NAME BASE64\n": one line of a .pub or trusted-keys file.
std::string public_key_line(const PublicKey& key);
// Base64 (standard alphabet, padded) of bytes, and back (nullopt-like error when malformed or
// not `expected_len` bytes long).
std::string to_base64(const uint8_t* data, size_t len);
Result<std::vector<uint8_t>> from_base64(std::string_view text, size_t expected_len);

// The detached Ed25519 signature of `message`, base64.
std::string sign(const SecretKey& key, std::string_view message);
// True when `signature_b64` is a valid signature of `message` by `key`.
bool verify(const PublicKey& key, std::string_view message, std::string_view signature_b64);

}  // namespace dltune::tuner::db
