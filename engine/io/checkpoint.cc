#include "engine/io/checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "common/env.h"
#include "common/hash.h"
#include "common/json_input.h"
#include "common/paths.h"
#include "common/strings.h"

namespace dltune::engine {

namespace {
constexpr const char* kMagic1 = "DLTUNE-CHECKPOINT 1\n";
constexpr const char* kMagic2 = "DLTUNE-CHECKPOINT 2\n";

std::string_view bytes_of(std::span<const float> s) {
  return {reinterpret_cast<const char*>(s.data()), s.size_bytes()};
}
}  // namespace

void checkpoint_fault_stall(int64_t step) {
  const std::string v = env::get(env::kFaultCheckpointStall);
  if (v.empty()) return;
  const size_t colon = v.find(':');
  if (colon != std::string::npos) {
    auto only = strings::parse_int(v.substr(0, colon));
    if (!only || *only != step) return;
  }
  auto ms = strings::parse_int(colon == std::string::npos ? v : v.substr(colon + 1));
  if (ms && *ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(*ms, 60000)));
}

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
  checkpoint_fault_stall(ck.step);
  std::vector<std::string_view> all;
  const std::string head = kMagic2 + meta.dump() + "\n";
  all.push_back(head);
  all.insert(all.end(), parts.begin(), parts.end());
  auto st = paths::write_file_atomic(path, all);
  if (!st) return std::move(st).error().wrap("writing checkpoint");
  return ok_status();
}

namespace {

// The end of read_checkpoint_pieces()'s error for a file that is no longer the one its info was
// read from, which load_checkpoint() reads again.
constexpr std::string_view kReplaced =
    " was replaced by another checkpoint while it was being read";

// Closes a FILE* on every path out.
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

Result<File> open_read(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return errno_error("reading checkpoint '" + path + "'");
  return f;
}

constexpr size_t kMaxMetadata = size_t{16} << 20;
constexpr size_t kChunkBytes = size_t{1} << 20;

}  // namespace

Result<CheckpointInfo> read_checkpoint_info(const std::string& path) {
  auto f = open_read(path);
  if (!f) return f.error();
  const std::string where = "checkpoint '" + path + "'";
  const size_t magic_len = std::strlen(kMagic2);
  std::string head(magic_len, '\0');
  if (std::fread(head.data(), 1, magic_len, f->get()) != magic_len)
    return invalid_input(where + " is not a dltune checkpoint (bad header)");
  const bool v1 = head == kMagic1;
  if (!v1 && head != kMagic2)
    return invalid_input(where + " is not a dltune checkpoint (bad header)");
  std::string line;
  for (int c; (c = std::fgetc(f->get())) != '\n';) {
    if (c == EOF || line.size() > kMaxMetadata)
      return invalid_input(where + " is truncated in its metadata");
    line.push_back(static_cast<char>(c));
  }
  auto parsed = parse_json_bounded(line, {.max_bytes = kMaxMetadata, .max_depth = 16});
  if (!parsed) return parsed.error().wrap(where + "'s metadata");
  const nlohmann::json meta = std::move(*parsed);
  CheckpointInfo info;
  Checkpoint& ck = info.meta;
  try {
    ck.model = meta.at("model").get<std::string>();
    ck.step = meta.at("step").get<int64_t>();
    ck.seed = meta.at("seed").get<uint64_t>();
    ck.global_batch = meta.at("global_batch").get<int>();
    ck.epoch = meta.at("epoch").get<int64_t>();
    ck.rng_state = meta.at("rng_state").get<uint64_t>();
    info.params = meta.at("params").get<size_t>();
    if (v1) {
      info.slots.push_back(meta.at("velocity").get<size_t>());
      ck.optimizer_steps = ck.step;
    } else {
      ck.optimizer = meta.at("optimizer").get<std::string>();
      ck.optimizer_steps = meta.at("optimizer_steps").get<int64_t>();
      info.slots = meta.at("slots").get<std::vector<size_t>>();
      info.state = meta.at("state").get<size_t>();
    }
    info.sha256 = meta.at("sha256").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return invalid_input(where + " has unreadable metadata");
  }
  info.payload_offset = magic_len + line.size() + 1;
  struct stat st {};
  if (fstat(fileno(f->get()), &st) != 0) return errno_error("reading " + where);
  info.file_dev = static_cast<uint64_t>(st.st_dev);
  info.file_ino = static_cast<uint64_t>(st.st_ino);
  if (std::fseek(f->get(), 0, SEEK_END) != 0) return errno_error("reading " + where);
  const long end = std::ftell(f->get());
  if (end < 0) return errno_error("reading " + where);
  const size_t payload = static_cast<size_t>(end) - info.payload_offset;
  // The declared counts are summed against the payload's size, so that no count the metadata
  // claims can wrap the total around (a hostile 2^62 would otherwise pass the size check).
  const size_t cap = payload / sizeof(float);
  bool fits = info.slots.size() <= 8 && info.params <= cap && info.state <= cap - info.params;
  size_t total = fits ? info.params + info.state : 0;
  for (size_t n : info.slots) {
    fits = fits && n <= cap - total;
    if (fits) total += n;
  }
  if (!fits) {
    return invalid_input(where +
                         " is truncated or corrupt: its metadata declares more values than its " +
                         std::to_string(payload) + "-byte payload holds");
  }
  if (payload != total * sizeof(float))
    return invalid_input(where + " is truncated: payload of " + std::to_string(payload) +
                         " bytes, metadata declares " + std::to_string(total * 4));
  return info;
}

Status read_checkpoint_pieces(const std::string& path, const CheckpointInfo& info,
                              std::vector<CheckpointPiece> pieces) {
  const std::string where = "checkpoint '" + path + "'";
  // Each part's first float in the payload.
  std::vector<size_t> part_size = {info.params};
  part_size.insert(part_size.end(), info.slots.begin(), info.slots.end());
  part_size.push_back(info.state);
  std::vector<size_t> base(part_size.size(), 0);
  for (size_t k = 1; k < part_size.size(); ++k) base[k] = base[k - 1] + part_size[k - 1];
  for (const CheckpointPiece& p : pieces) {
    if (p.part >= part_size.size() || p.offset > part_size[p.part] ||
        p.count > part_size[p.part] - p.offset || (p.count > 0 && p.dst == nullptr))
      return invalid_input(where + ": a wanted piece lies outside its part");
  }
  std::erase_if(pieces, [](const CheckpointPiece& p) { return p.count == 0; });  // nothing to copy
  // By first byte in the payload: a chunk's pieces are found from where the last chunk's
  // started.
  std::sort(pieces.begin(), pieces.end(), [&](const auto& a, const auto& b) {
    return base[a.part] + a.offset < base[b.part] + b.offset;
  });
  auto f = open_read(path);
  if (!f) return f.error();
  struct stat st {};
  if (fstat(fileno(f->get()), &st) != 0) return errno_error("reading " + where);
  if (info.file_ino != 0 && (static_cast<uint64_t>(st.st_dev) != info.file_dev ||
                             static_cast<uint64_t>(st.st_ino) != info.file_ino)) {
    return io_error(where + std::string(kReplaced));
  }
  if (std::fseek(f->get(), static_cast<long>(info.payload_offset), SEEK_SET) != 0)
    return errno_error("reading " + where);
  const size_t total = (base.back() + part_size.back()) * sizeof(float);
  std::vector<char> chunk(std::min(kChunkBytes, std::max<size_t>(total, 1)));
  Sha256 sha;
  size_t first = 0;  // the first piece that may still overlap
  for (size_t at = 0; at < total;) {
    const size_t n = std::min(chunk.size(), total - at);
    if (std::fread(chunk.data(), 1, n, f->get()) != n)
      return invalid_input(where + " is truncated: its payload ended early");
    sha.update(chunk.data(), n);
    for (size_t i = first; i < pieces.size(); ++i) {
      const CheckpointPiece& p = pieces[i];
      const size_t b = (base[p.part] + p.offset) * sizeof(float);
      const size_t e = b + p.count * sizeof(float);
      if (b >= at + n) break;
      if (e <= at) {
        if (i == first) ++first;
        continue;
      }
      const size_t lo = std::max(b, at), hi = std::min(e, at + n);
      std::memcpy(reinterpret_cast<char*>(p.dst) + (lo - b), chunk.data() + (lo - at), hi - lo);
    }
    at += n;
  }
  if (sha.hex_digest() != info.sha256)
    return invalid_input(where + " is corrupt: checksum mismatch");
  return ok_status();
}

namespace {

// load_checkpoint() once: a checkpoint replaced while it is read is an io_error.
Result<Checkpoint> load_checkpoint_once(const std::string& path) {
  auto info = read_checkpoint_info(path);
  if (!info) return info.error();
  Checkpoint ck = info->meta;
  ck.params.resize(info->params);
  ck.slots.resize(info->slots.size());
  ck.state.resize(info->state);
  std::vector<CheckpointPiece> pieces = {{0, 0, info->params, ck.params.data()}};
  for (size_t k = 0; k < info->slots.size(); ++k) {
    ck.slots[k].resize(info->slots[k]);
    pieces.push_back({1 + k, 0, info->slots[k], ck.slots[k].data()});
  }
  pieces.push_back({1 + info->slots.size(), 0, info->state, ck.state.data()});
  DLTUNE_TRY(read_checkpoint_pieces(path, *info, std::move(pieces)));
  return ck;
}

}  // namespace

Result<Checkpoint> load_checkpoint(const std::string& path) {
  constexpr int kAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    auto ck = load_checkpoint_once(path);
    if (ck || attempt == kAttempts || ck.error().kind() != ErrorKind::kIo ||
        !ck.error().message().ends_with(kReplaced)) {
      return ck;
    }
  }
}

}  // namespace dltune::engine
