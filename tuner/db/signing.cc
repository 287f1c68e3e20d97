#include "tuner/db/signing.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/strings.h"

namespace dltune::tuner::db {
namespace {

constexpr size_t kMaxKeyFileBytes = 1 << 20;

Status init_sodium() {
  if (sodium_init() < 0) return internal_error("libsodium could not be initialised");
  return ok_status();
}

// Splits one "NAME BASE64" line; `where` names it in errors.
Result<std::pair<std::string, std::string>> split_key_line(std::string_view line,
                                                           const std::string& where) {
  const std::string t = strings::trim(line);
  const size_t space = t.find_first_of(" \t");
  if (space == std::string::npos) {
    return invalid_input(where + ": expected 'NAME BASE64-KEY', got a line without a space");
  }
  std::string name = t.substr(0, space);
  std::string key = strings::trim(std::string_view(t).substr(space));
  DLTUNE_TRY_CTX(check_key_name(name), where);
  if (key.find_first_of(" \t") != std::string::npos) {
    return invalid_input(where + ": expected 'NAME BASE64-KEY', got more than two fields");
  }
  return std::make_pair(std::move(name), std::move(key));
}

// The permission bits as ls -l's octal: "644".
std::string mode_text(mode_t mode) {
  return std::to_string((mode >> 6) & 7) + std::to_string((mode >> 3) & 7) +
         std::to_string(mode & 7);
}

}  // namespace

PublicKey SecretKey::public_key() const {
  PublicKey p;
  p.name = name;
  std::memcpy(p.key.data(), key.data() + 32, 32);  // libsodium: sk = seed || pk
  return p;
}

Status check_key_name(std::string_view name) {
  if (name.empty() || name.size() > 64) {
    return invalid_input("a key name must be 1 to 64 characters long");
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return invalid_input("a key name may only use letters, digits, '.', '_' and '-'");
    }
  }
  return ok_status();
}

std::string to_base64(const uint8_t* data, size_t len) {
  std::string out(sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), data, len, sodium_base64_VARIANT_ORIGINAL);
  out.resize(std::strlen(out.c_str()));
  return out;
}

Result<std::vector<uint8_t>> from_base64(std::string_view text, size_t expected_len) {
  DLTUNE_TRY(init_sodium());
  std::vector<uint8_t> out(expected_len + 3);
  size_t len = 0;
  const char* end = nullptr;
  if (text.size() > 4 * (expected_len + 3) ||
      sodium_base642bin(out.data(), out.size(), text.data(), text.size(), nullptr, &len, &end,
                        sodium_base64_VARIANT_ORIGINAL) != 0 ||
      end != text.data() + text.size() || len != expected_len) {
    return invalid_input("not base64 of " + std::to_string(expected_len) + " bytes");
  }
  out.resize(len);
  return out;
}

std::string public_key_line(const PublicKey& key) {
  return key.name + " " + to_base64(key.key.data(), key.key.size()) + "\n";
}

Result<PublicKey> generate_key_files(const std::string& dir, const std::string& name) {
  DLTUNE_TRY_CTX(check_key_name(name), "--name");
  DLTUNE_TRY(init_sodium());
  SecretKey sk;
  sk.name = name;
  PublicKey pk;
  pk.name = name;
  crypto_sign_ed25519_keypair(pk.key.data(), sk.key.data());
  DLTUNE_TRY(paths::make_dirs(dir));
  const std::string key_path = dir + "/" + name + ".key";
  const std::string pub_path = dir + "/" + name + ".pub";
  const int fd = ::open(key_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) {
      return invalid_input("'" + key_path + "' exists already: a key is never overwritten");
    }
    return errno_error("cannot create '" + key_path + "'");
  }
  const std::string line = name + " " + to_base64(sk.key.data(), sk.key.size()) + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  sodium_memzero(sk.key.data(), sk.key.size());
  if (!written || ::fsync(fd) != 0) {
    const Error e = errno_error("cannot write '" + key_path + "'");
    ::close(fd);
    ::unlink(key_path.c_str());
    return e;
  }
  ::close(fd);
  if (Status s = paths::write_file_atomic(pub_path, public_key_line(pk)); !s.ok()) {
    ::unlink(key_path.c_str());
    return std::move(s).error();
  }
  return pk;
}

Result<SecretKey> read_secret_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return not_found("key file '" + path + "' does not exist");
  if ((st.st_mode & 077) != 0) {
    return invalid_input("key file '" + path + "' may be read by others (mode " +
                         mode_text(st.st_mode) + "): chmod 600 it");
  }
  if (st.st_size > static_cast<off_t>(kMaxKeyFileBytes)) {
    return invalid_input("key file '" + path + "' is not a dltune key (too large)");
  }
  auto text = paths::read_file(path);
  if (!text) return std::move(text).error();
  auto fields = split_key_line(*text, "key file '" + path + "'");
  if (!fields) return std::move(fields).error();
  auto bytes = from_base64(fields->second, 64);
  if (!bytes) return std::move(bytes).error().wrap("key file '" + path + "'");
  SecretKey sk;
  sk.name = fields->first;
  std::memcpy(sk.key.data(), bytes->data(), 64);
  sodium_memzero(bytes->data(), bytes->size());
  return sk;
}

Result<std::vector<PublicKey>> parse_trusted_keys(std::string_view text,
                                                  const std::string& origin) {
  std::vector<PublicKey> keys;
  int line_no = 0;
  for (const std::string& raw : strings::split(text, '\n')) {
    ++line_no;
    std::string line = raw;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (strings::trim(line).empty()) continue;
    const std::string where = origin + ": line " + std::to_string(line_no);
    auto fields = split_key_line(line, where);
    if (!fields) return std::move(fields).error();
    auto bytes = from_base64(fields->second, 32);
    if (!bytes) return std::move(bytes).error().wrap(where);
    for (const PublicKey& k : keys) {
      if (k.name == fields->first) {
        return invalid_input(where + ": a second key named '" + k.name + "'");
      }
    }
    PublicKey k;
    k.name = fields->first;
    std::memcpy(k.key.data(), bytes->data(), 32);
    keys.push_back(std::move(k));
  }
  return keys;
}

Result<std::vector<PublicKey>> read_trusted_keys(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return not_found("trusted keys file '" + path + "' does not exist");
  }
  // Whoever may write it decides what this machine trusts: as a secret key's mode is checked.
  if ((st.st_mode & 022) != 0) {
    return invalid_input("trusted keys file '" + path + "' may be changed by others (mode " +
                         mode_text(st.st_mode) +
                         "): anyone who can write it can make dltune trust their key; chmod "
                         "go-w it");
  }
  auto text = paths::read_file(path);
  if (!text) return std::move(text).error();
  if (text->size() > kMaxKeyFileBytes) {
    return invalid_input("trusted keys file '" + path + "' is larger than 1 MiB");
  }
  return parse_trusted_keys(*text, "trusted keys file '" + path + "'");
}

std::string sign(const SecretKey& key, std::string_view message) {
  DLTUNE_CHECK(sodium_init() >= 0);
  uint8_t sig[crypto_sign_ed25519_BYTES];
  crypto_sign_ed25519_detached(sig, nullptr, reinterpret_cast<const uint8_t*>(message.data()),
                               message.size(), key.key.data());
  return to_base64(sig, sizeof sig);
}

bool verify(const PublicKey& key, std::string_view message, std::string_view signature_b64) {
  auto sig = from_base64(signature_b64, crypto_sign_ed25519_BYTES);
  if (!sig) return false;
  return crypto_sign_ed25519_verify_detached(sig->data(),
                                             reinterpret_cast<const uint8_t*>(message.data()),
                                             message.size(), key.key.data()) == 0;
}

}  // namespace dltune::tuner::db
