#include "engine/checkpoint.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "common/paths.h"

namespace dltune::engine {

namespace {
constexpr const char* kMagic = "DLTUNE-CHECKPOINT 1\n";
}

Status save_checkpoint(const std::string& path, const Checkpoint& ck) {
  return save_checkpoint(path, ck, ck.params, ck.velocity);
}

Status save_checkpoint(const std::string& path, const Checkpoint& ck, std::span<const float> params,
                       std::span<const float> velocity) {
  const std::string_view p(reinterpret_cast<const char*>(params.data()), params.size_bytes());
  const std::string_view v(reinterpret_cast<const char*>(velocity.data()), velocity.size_bytes());
  Sha256 sha;
  sha.update(p);
  sha.update(v);
  const nlohmann::json meta = {{"model", ck.model},         {"step", ck.step},
                               {"seed", ck.seed},           {"global_batch", ck.global_batch},
                               {"epoch", ck.epoch},         {"rng_state", ck.rng_state},
                               {"params", params.size()},   {"velocity", velocity.size()},
                               {"sha256", sha.hex_digest()}};
  const std::string head = kMagic + meta.dump() + "\n";
  auto st = paths::write_file_atomic(path, {head, p, v});
  if (!st) return std::move(st).error().wrap("writing checkpoint");
  return ok_status();
}

Result<Checkpoint> load_checkpoint(const std::string& path) {
  auto data = paths::read_file(path);
  if (!data) return std::move(data).error().wrap("reading checkpoint");
  const std::string where = "checkpoint '" + path + "'";
  const size_t magic_len = std::strlen(kMagic);
  if (data->compare(0, magic_len, kMagic) != 0)
    return invalid_input(where + " is not a dltune checkpoint (bad header)");
  const size_t eol = data->find('\n', magic_len);
  if (eol == std::string::npos) return invalid_input(where + " is truncated in its metadata");
  auto meta = nlohmann::json::parse(data->substr(magic_len, eol - magic_len), nullptr, false);
  Checkpoint ck;
  size_t np = 0, nv = 0;
  std::string sha;
  try {
    ck.model = meta.at("model").get<std::string>();
    ck.step = meta.at("step").get<int64_t>();
    ck.seed = meta.at("seed").get<uint64_t>();
    ck.global_batch = meta.at("global_batch").get<int>();
    ck.epoch = meta.at("epoch").get<int64_t>();
    ck.rng_state = meta.at("rng_state").get<uint64_t>();
    np = meta.at("params").get<size_t>();
    nv = meta.at("velocity").get<size_t>();
    sha = meta.at("sha256").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return invalid_input(where + " has unreadable metadata");
  }
  const std::string_view payload(data->data() + eol + 1, data->size() - eol - 1);
  if (payload.size() != (np + nv) * sizeof(float))
    return invalid_input(where + " is truncated: payload of " + std::to_string(payload.size()) +
                         " bytes, metadata declares " + std::to_string((np + nv) * 4));
  if (sha256_hex(payload) != sha) return invalid_input(where + " is corrupt: checksum mismatch");
  ck.params.resize(np);
  ck.velocity.resize(nv);
  if (np) std::memcpy(ck.params.data(), payload.data(), np * 4);
  if (nv) std::memcpy(ck.velocity.data(), payload.data() + np * 4, nv * 4);
  return ck;
}

}  // namespace dltune::engine
