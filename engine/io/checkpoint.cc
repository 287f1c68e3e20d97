#include "engine/io/checkpoint.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "common/json_input.h"
#include "common/paths.h"

namespace dltune::engine {

namespace {
constexpr const char* kMagic1 = "DLTUNE-CHECKPOINT 1\n";
constexpr const char* kMagic2 = "DLTUNE-CHECKPOINT 2\n";

std::string_view bytes_of(std::span<const float> s) {
  return {reinterpret_cast<const char*>(s.data()), s.size_bytes()};
}
}  // namespace

Status save_checkpoint(const std::string& path, const Checkpoint& ck) {
  std::vector<std::span<const float>> slots;
  for (const auto& s : ck.slots) slots.emplace_back(s);
  return save_checkpoint(path, ck, ck.params, slots, ck.state);
}

Status save_checkpoint(const std::string& path, const Checkpoint& ck, std::span<const float> params,
                       const std::vector<std::span<const float>>& slots,
                       std::span<const float> state) {
  std::vector<std::string_view> parts = {bytes_of(params)};
  nlohmann::json slot_sizes = nlohmann::json::array();
  for (const auto& s : slots) {
    parts.push_back(bytes_of(s));
    slot_sizes.push_back(s.size());
  }
  parts.push_back(bytes_of(state));
  Sha256 sha;
  for (const auto& p : parts) sha.update(p);
  const nlohmann::json meta = {{"model", ck.model},         {"step", ck.step},
                               {"seed", ck.seed},           {"global_batch", ck.global_batch},
                               {"epoch", ck.epoch},         {"rng_state", ck.rng_state},
                               {"optimizer", ck.optimizer}, {"optimizer_steps", ck.optimizer_steps},
                               {"params", params.size()},   {"slots", slot_sizes},
                               {"state", state.size()},     {"sha256", sha.hex_digest()}};
  std::vector<std::string_view> all;
  const std::string head = kMagic2 + meta.dump() + "\n";
  all.push_back(head);
  all.insert(all.end(), parts.begin(), parts.end());
  auto st = paths::write_file_atomic(path, all);
  if (!st) return std::move(st).error().wrap("writing checkpoint");
  return ok_status();
}

Result<Checkpoint> load_checkpoint(const std::string& path) {
  auto data = paths::read_file(path);
  if (!data) return std::move(data).error().wrap("reading checkpoint");
  const std::string where = "checkpoint '" + path + "'";
  const size_t magic_len = std::strlen(kMagic2);
  const bool v1 = data->compare(0, magic_len, kMagic1) == 0;
  if (!v1 && data->compare(0, magic_len, kMagic2) != 0)
    return invalid_input(where + " is not a dltune checkpoint (bad header)");
  const size_t eol = data->find('\n', magic_len);
  if (eol == std::string::npos) return invalid_input(where + " is truncated in its metadata");
  auto parsed = parse_json_bounded(std::string_view(*data).substr(magic_len, eol - magic_len),
                                   {.max_bytes = size_t{16} << 20, .max_depth = 16});
  if (!parsed) return parsed.error().wrap(where + "'s metadata");
  const nlohmann::json meta = std::move(*parsed);
  Checkpoint ck;
  size_t np = 0, ns = 0;
  std::vector<size_t> slots;
  std::string sha;
  try {
    ck.model = meta.at("model").get<std::string>();
    ck.step = meta.at("step").get<int64_t>();
    ck.seed = meta.at("seed").get<uint64_t>();
    ck.global_batch = meta.at("global_batch").get<int>();
    ck.epoch = meta.at("epoch").get<int64_t>();
    ck.rng_state = meta.at("rng_state").get<uint64_t>();
    np = meta.at("params").get<size_t>();
    if (v1) {
      slots.push_back(meta.at("velocity").get<size_t>());
      ck.optimizer_steps = ck.step;
    } else {
      ck.optimizer = meta.at("optimizer").get<std::string>();
      ck.optimizer_steps = meta.at("optimizer_steps").get<int64_t>();
      slots = meta.at("slots").get<std::vector<size_t>>();
      ns = meta.at("state").get<size_t>();
    }
    sha = meta.at("sha256").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return invalid_input(where + " has unreadable metadata");
  }
  const std::string_view payload(data->data() + eol + 1, data->size() - eol - 1);
  // The declared counts are summed against the payload's size, so that no count the metadata
  // claims can wrap the total around (a hostile 2^62 would otherwise pass the size check).
  const size_t cap = payload.size() / sizeof(float);
  bool fits = slots.size() <= 8 && np <= cap && ns <= cap - np;
  size_t total = fits ? np + ns : 0;
  for (size_t s : slots) {
    fits = fits && s <= cap - total;
    if (fits) total += s;
  }
  if (!fits) {
    return invalid_input(where +
                         " is truncated or corrupt: its metadata declares more values than its " +
                         std::to_string(payload.size()) + "-byte payload holds");
  }
  if (payload.size() != total * sizeof(float))
    return invalid_input(where + " is truncated: payload of " + std::to_string(payload.size()) +
                         " bytes, metadata declares " + std::to_string(total * 4));
  if (sha256_hex(payload) != sha) return invalid_input(where + " is corrupt: checksum mismatch");
  const char* p = payload.data();
  auto take = [&p](std::vector<float>& out, size_t n) {
    out.resize(n);
    if (n) std::memcpy(out.data(), p, n * sizeof(float));
    p += n * sizeof(float);
  };
  take(ck.params, np);
  ck.slots.resize(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) take(ck.slots[i], slots[i]);
  take(ck.state, ns);
  return ck;
}

}  // namespace dltune::engine
