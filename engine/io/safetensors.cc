#include "engine/io/safetensors.h"

#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/paths.h"

namespace dltune::engine {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;
constexpr int kMaxDepth = 4;  // {"name": {"shape": [..]}}: 3 levels

// Bytes per element of a dtype; 0 for an unknown one.
int dtype_size(const std::string& d) {
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

bool is_integer(const std::string& d) { return d[0] == 'I' || d[0] == 'U' || d == "BOOL"; }

// The deepest nesting of brackets in `s` outside strings: checked before parsing so that a
// hostile header cannot make the JSON parser recurse without bound.
int max_depth(const std::string& s) {
  int depth = 0, worst = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') worst = std::max(worst, ++depth);
    if (c == '}' || c == ']') --depth;
  }
  return worst;
}

float to_float(const unsigned char* p, const std::string& d) {
  auto le = [p](int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  };
  if (d == "F32") {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (d == "F64") {
    double x;
    std::memcpy(&x, p, 8);
    return static_cast<float>(x);
  }
  const int n = dtype_size(d);
  const uint64_t v = le(n);
  if (d[0] == 'I' && n < 8 && (v >> (8 * n - 1)) != 0)  // sign-extend
    return static_cast<float>(static_cast<int64_t>(v | (~uint64_t{0} << (8 * n))));
  return d[0] == 'I' ? static_cast<float>(static_cast<int64_t>(v)) : static_cast<float>(v);
}

}  // namespace

Result<TensorFile> parse_safetensors(const std::string& bytes, const std::string& what) {
  auto bad = [&](const std::string& m) { return invalid_input(what + ": " + m); };
  if (bytes.size() < 8) return bad("is truncated: shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  if (n > kMaxHeader || n > bytes.size() - 8)
    return bad("declares a header of " + std::to_string(n) + " bytes but the file has " +
               std::to_string(bytes.size()) + "; it is truncated or not a safetensors file");
  const std::string header = bytes.substr(8, n);
  if (max_depth(header) > kMaxDepth) return bad("has a header nested deeper than safetensors'");
  json j = json::parse(header, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("has a header that is not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - n;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data() + 8 + n);
  TensorFile out;
  for (const auto& [name, t] : j.items()) {
    if (name == "__metadata__") continue;
    const std::string where = "tensor '" + name + "'";
    if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() || !t.contains("shape") ||
        !t["shape"].is_array() || !t.contains("data_offsets") || !t["data_offsets"].is_array() ||
        t["data_offsets"].size() != 2)
      return bad(where + " lacks dtype, shape or data_offsets [begin, end]");
    StoredTensor st;
    st.dtype = t["dtype"].get<std::string>();
    const int es = dtype_size(st.dtype);
    if (es == 0) return bad(where + " has the unknown dtype '" + st.dtype + "'");
    uint64_t count = 1;
    for (const json& d : t["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40))
        return bad(where + " has a shape that is not a list of sizes");
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && count > (uint64_t{1} << 40) / v) return bad(where + " is impossibly large");
      count *= v;
      st.shape.push_back(static_cast<int64_t>(v));
    }
    const json& off = t["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return bad(where + " has data_offsets that are not byte offsets");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      return bad(where + " lies at bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                 ") outside the " + std::to_string(data_size) + " data bytes");
    if (end - begin != count * static_cast<uint64_t>(es))
      return bad(where + " has " + std::to_string(end - begin) + " bytes, but " + st.dtype +
                 " of its shape needs " + std::to_string(count * static_cast<uint64_t>(es)));
    st.values.resize(count);
    if (st.dtype == "F32") {
      if (count) std::memcpy(st.values.data(), data + begin, count * 4);
    } else {
      for (uint64_t i = 0; i < count; ++i) st.values[i] = to_float(data + begin + i * es, st.dtype);
    }
    out.emplace(name, std::move(st));
  }
  return out;
}

Result<TensorFile> read_safetensors(const std::string& path) {
  auto bytes = paths::read_file(path);
  if (!bytes) return bytes.error();
  return parse_safetensors(*bytes, "safetensors file '" + path + "'");
}

std::string encode_safetensors(const TensorFile& tensors,
                               const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const bool i64 = t.dtype == "I64";
    const uint64_t size = t.values.size() * (i64 ? 8 : 4);
    header[name] = {{"dtype", i64 ? "I64" : "F32"},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // data 8-byte aligned, as the library writes it
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  out += h;
  for (const auto& [name, t] : tensors) {
    if (t.dtype == "I64") {
      for (float v : t.values) {
        const auto x = static_cast<int64_t>(v);
        for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
      }
    } else {
      out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
    }
  }
  return out;
}

Status write_safetensors(const std::string& path, const TensorFile& tensors,
                         const std::map<std::string, std::string>& metadata) {
  return paths::write_file_atomic(path, encode_safetensors(tensors, metadata));
}

TensorFile model_tensors(const Model& model) {
  TensorFile out;
  auto add = [&](const recipes::TensorInfo& t, const float* base) {
    StoredTensor st;
    st.dtype = t.def.integer ? "I64" : "F32";
    st.shape = t.shape;
    st.values.assign(base + t.offset, base + t.offset + recipes::numel(t.shape));
    out.emplace(t.name, std::move(st));
  };
  for (const auto& t : model.info().params) add(t, model.params());
  for (const auto& t : model.info().state) add(t, model.state());
  return out;
}

Status load_safetensors_into(Model& model, const std::string& path) {
  return load_safetensors_into(model, path, SafetensorsLoad{});
}

Status load_safetensors_into(Model& model, const std::string& path, const SafetensorsLoad& how) {
  auto file = read_safetensors(path);
  if (!file) return file.error();
  const std::string what = "safetensors file '" + path + "'";
  std::vector<std::pair<const recipes::TensorInfo*, float*>> targets;
  for (const auto& t : model.info().params) targets.push_back({&t, model.params() + t.offset});
  for (const auto& t : model.info().state) targets.push_back({&t, model.state() + t.offset});
  // Check everything first: a bad file changes nothing.
  auto stored_name = [&](const recipes::TensorInfo* t) -> const std::string& {
    auto a = how.aliases.find(t->name);
    return a == how.aliases.end() ? t->name : a->second;
  };
  for (const auto& [t, dst] : targets) {
    auto it = file->find(stored_name(t));
    if (it == file->end())
      return invalid_input(what + " lacks tensor '" + stored_name(t) + "' of model '" +
                           model.name() + "' (" + recipes::describe_shape(t->shape) + ")");
    const StoredTensor& s = it->second;
    if (s.shape != t->shape)
      return invalid_input(what + ": tensor '" + t->name + "' has shape " +
                           recipes::describe_shape(s.shape) + " but model '" + model.name() +
                           "' needs " + recipes::describe_shape(t->shape));
    if (t->def.integer ? !is_integer(s.dtype) : s.dtype != "F32")
      return invalid_input(what + ": tensor '" + t->name + "' is " + s.dtype + ", expected " +
                           (t->def.integer ? "an integer dtype" : "F32"));
  }
  for (const auto& [name, s] : *file) {
    bool known = how.others.count(name) > 0;
    for (const auto& [t, dst] : targets) known = known || stored_name(t) == name;
    if (!known)
      return invalid_input(what + " has tensor '" + name + "', which model '" + model.name() +
                           "' does not have");
  }
  for (const auto& [t, dst] : targets) {
    const StoredTensor& s = file->at(stored_name(t));
    std::memcpy(dst, s.values.data(), s.values.size() * sizeof(float));
  }
  return ok_status();
}

}  // namespace dltune::engine
