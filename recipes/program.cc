// What a program recipe (recipes/program.h) turns into for one run: its placeholders expanded
// into the command and environment; the tuning signature, which also covers the files the
// command names so that an edited script is tuned again; and the recipe as YAML with every
// default filled in, written so that parsing it gives back the same recipe.
#include "recipes/program.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <type_traits>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/hash.h"
#include "common/strings.h"
#include "recipes/yaml_reader.h"

namespace dltune::recipes {
namespace {

namespace fs = std::filesystem;

// The most of each file the signature reads.
constexpr uint64_t kMaxHashedFileBytes = uint64_t{64} << 20;

const std::vector<std::string> kPlaceholders = {"{batch}",    "{global_batch}", "{steps}",
                                                "{threads}",  "{ranks}",        "{ranks_per_node}",
                                                "{bucket_mb}"};

// The shortest text that reads back as `v`: 4, 0.5, 25.
std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

Result<std::string> count_or(int64_t v, const std::string& why_unset) {
  if (v > 0) return std::to_string(v);
  return invalid_input(why_unset);
}

// The text of placeholder `name` ("batch"), or why it has none.
Result<std::string> placeholder_value(std::string_view name, const ProgramValues& v) {
  const std::string batch_unset =
      "{" + std::string(name) +
      "} has no value: list the per-rank batches to try in tune.search.batch";
  if (name == "batch") return count_or(v.batch, batch_unset);
  if (name == "global_batch") {
    if (v.batch <= 0) return invalid_input(batch_unset);
    return count_or(v.batch * v.ranks, "{global_batch} has no value: the job's ranks are not set");
  }
  if (name == "steps") return count_or(v.steps, "{steps} has no value: the steps are not set");
  if (name == "threads")
    return count_or(v.threads_per_rank, "{threads} has no value: the threads are not set");
  if (name == "ranks") return count_or(v.ranks, "{ranks} has no value: the ranks are not set");
  if (name == "ranks_per_node")
    return count_or(v.ranks_per_node,
                    "{ranks_per_node} has no value: the ranks per node are not set");
  if (name == "bucket_mb") {
    if (v.bucket_mb > 0) return shortest(v.bucket_mb);
    return invalid_input(
        "{bucket_mb} has no value: list the bucket sizes (MB) to try in tune.search.bucket_mb");
  }
  const std::string written = "{" + shown_scalar(std::string(name)) + "}";
  return invalid_input("unknown placeholder " + written + did_you_mean(written, kPlaceholders) +
                       "; known: " + strings::join(kPlaceholders, " ") +
                       " ({{ and }} for literal braces)");
}

Error unmatched(char brace, size_t at, std::string_view text) {
  return invalid_input(std::string("unmatched '") + brace + "' at character " +
                       std::to_string(at + 1) + " of \"" + shown_scalar(std::string(text)) +
                       "\"; write " + brace + brace + " for a literal brace");
}

// `s` with its length in front: strings of the signature text cannot run into each other.
std::string field(std::string_view s) { return std::to_string(s.size()) + ":" + std::string(s); }

template <typename T>
std::string list_text(const std::vector<T>& values, bool is_auto) {
  if (is_auto) return "auto";
  std::string out = "[";
  for (const T& v : values) {
    if constexpr (std::is_floating_point_v<T>) {
      out += shortest(v) + ",";
    } else {
      out += std::to_string(v) + ",";
    }
  }
  return out + "]";
}

// "file ARG SIZE SHA256" for a command argument that names a readable regular file (relative
// ones in `dir`), hashing at most its first kMaxHashedFileBytes; "" for any other argument.
std::string file_text(const std::string& arg, const std::string& dir) {
  if (arg.empty()) return "";
  std::error_code ec;
  fs::path p(arg);
  if (p.is_relative()) p = fs::path(dir) / p;
  if (!fs::is_regular_file(p, ec)) return "";
  const uintmax_t size = fs::file_size(p, ec);
  if (ec) return "";
  std::ifstream in(p, std::ios::binary);
  if (!in) return "";
  // Reads the size stat gives, no more: a file that grows while it is read (or a /proc file
  // that says 0 bytes) cannot keep the signature waiting.
  uint64_t left = std::min<uint64_t>(size, kMaxHashedFileBytes);
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (left > 0 && in) {
    in.read(buf.data(), static_cast<std::streamsize>(std::min<uint64_t>(left, buf.size())));
    const auto got = static_cast<uint64_t>(in.gcount());
    if (got == 0) break;
    h.update(buf.data(), got);
    left -= got;
  }
  return "file " + field(arg) + " " + std::to_string(size) + " " + h.hex_digest() + "\n";
}

}  // namespace

Result<std::string> expand_placeholders(std::string_view text, const ProgramValues& values) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool doubled = i + 1 < text.size() && text[i + 1] == c;
    if ((c == '{' || c == '}') && doubled) {
      out += c;
      ++i;
    } else if (c == '}') {
      return unmatched('}', i, text);
    } else if (c == '{') {
      const size_t close = text.find_first_of("{}", i + 1);
      if (close == std::string_view::npos || text[close] == '{') return unmatched('{', i, text);
      auto value = placeholder_value(text.substr(i + 1, close - i - 1), values);
      if (!value) return std::move(value).error();
      out += *value;
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}

Result<std::vector<std::string>> program_command(const ProgramRecipe& recipe,
                                                 const ProgramValues& values) {
  std::vector<std::string> out;
  for (size_t i = 0; i < recipe.command.size(); ++i) {
    auto arg = expand_placeholders(recipe.command[i], values);
    if (!arg) return std::move(arg).error().wrap("program.command[" + std::to_string(i) + "]");
    out.push_back(std::move(*arg));
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> program_env(const ProgramRecipe& recipe,
                                                                     const ProgramValues& values) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, text] : recipe.env) {
    auto value = expand_placeholders(text, values);
    if (!value) return std::move(value).error().wrap("program.env." + name);
    out.emplace_back(name, std::move(*value));
  }
  if (values.bucket_mb > 0) out.emplace_back("DLTUNE_BUCKET_MB", shortest(values.bucket_mb));
  if (values.batch > 0) out.emplace_back("DLTUNE_BATCH", std::to_string(values.batch));
  return out;
}

std::string program_signature(const ProgramRecipe& recipe) {
  // Versioned, canonical text: change the version whenever what goes in here changes. Strings
  // are length-prefixed, the env sorted by name (a mapping's order means nothing), the numbers
  // in their shortest exact form. v1: the command and env as written, the throughput source,
  // the search space, the launch keys the search does not vary, and the files the command names
  // (their size and the SHA-256 of their first 64 MiB).
  std::string text = "dltune-program-signature v1\n";
  text += "command " + std::to_string(recipe.command.size()) + "\n";
  for (const std::string& arg : recipe.command) text += "arg " + field(arg) + "\n";
  std::vector<std::pair<std::string, std::string>> env = recipe.env;
  std::sort(env.begin(), env.end());
  for (const auto& [name, value] : env) text += "env " + field(name) + " " + field(value) + "\n";
  text += "throughput pattern " + field(recipe.throughput.pattern) + " metrics " +
          field(recipe.throughput.metrics_key) + "\n";
  const ProgramSearch& s = recipe.search;
  text += "search batch " + list_text(s.batch, false) + " threads_per_rank " +
          list_text(s.threads_per_rank, s.threads_auto) + " ranks_per_node " +
          list_text(s.ranks_per_node, s.ranks_auto) + " bucket_mb " +
          list_text(s.bucket_mb, false) + "\n";
  const LaunchConfig& l = recipe.launch;
  text += "launch ranks " + std::to_string(l.ranks) + " ranks_per_node " +
          std::to_string(l.ranks_per_node) + " threads_per_rank " +
          std::to_string(l.threads_per_rank) + " binding " + l.binding + "\n";
  for (const std::string& arg : recipe.command) text += file_text(arg, recipe.source_dir);
  return sha256_hex(text);  // the text names a program: no model recipe has the same
}

namespace {

// A string as YAML: plain where that reads back as the same string, else quoted (single quotes
// for text with backslashes, such as a regex, where they keep it readable).
void emit_string(YAML::Emitter& e, const std::string& s) {
  std::string lower = s;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::vector<std::string> kWords = {"yes",  "no",   "true",  "false", "on",
                                                  "off",  "null", "~",     "y",     "n",
                                                  "auto", ".inf", "-.inf", "+.inf", ".nan"};
  const bool word = std::find(kWords.begin(), kWords.end(), lower) != kWords.end();
  char* end = nullptr;
  (void)std::strtod(s.c_str(), &end);  // also 0x10, +5, inf: what YAML may read as a number
  const bool numeric = !s.empty() && end == s.c_str() + s.size();
  const bool control = strings::find_control(s) != std::string::npos;
  if (s.find('\\') != std::string::npos && !control)
    e << YAML::SingleQuoted;
  else if (s.empty() || word || numeric)
    e << YAML::DoubleQuoted;
  e << s;
}

void emit_key(YAML::Emitter& e, const char* key) { e << YAML::Key << key << YAML::Value; }

std::string auto_or(int64_t v) { return v > 0 ? std::to_string(v) : "auto"; }

template <typename T>
void emit_list(YAML::Emitter& e, const char* key, const std::vector<T>& values, bool is_auto) {
  if (is_auto) {
    emit_key(e, key);
    e << "auto";
    return;
  }
  if (values.empty()) return;  // not searched: an empty list is not a value a recipe may give
  emit_key(e, key);
  e << YAML::Flow << YAML::BeginSeq;
  for (const T& v : values) {
    if constexpr (std::is_floating_point_v<T>) {
      e << shortest(v);
    } else {
      e << std::to_string(v);
    }
  }
  e << YAML::EndSeq;
}

void emit_program(YAML::Emitter& e, const ProgramRecipe& r) {
  e << YAML::BeginMap;
  emit_key(e, "command");
  e << YAML::Flow << YAML::BeginSeq;
  for (const std::string& arg : r.command) emit_string(e, arg);
  e << YAML::EndSeq;
  emit_key(e, "env");
  if (r.env.empty()) e << YAML::Flow;
  e << YAML::BeginMap;
  for (const auto& [name, value] : r.env) {
    e << YAML::Key;
    emit_string(e, name);  // NULL, say, is a variable name that YAML reads as null unquoted
    e << YAML::Value;
    emit_string(e, value);
  }
  e << YAML::EndMap;
  emit_key(e, "throughput");
  e << YAML::Flow << YAML::BeginMap;
  emit_key(e, r.throughput.pattern.empty() ? "metrics" : "pattern");
  emit_string(e, r.throughput.pattern.empty() ? r.throughput.metrics_key : r.throughput.pattern);
  e << YAML::EndMap;
  emit_key(e, "steps");
  e << std::to_string(r.steps);
  emit_key(e, "trial_steps");
  e << std::to_string(r.trial_steps);
  emit_key(e, "trial_timeout");
  e << shortest(r.trial_timeout_s);
  e << YAML::EndMap;
}

void emit_tune(YAML::Emitter& e, const ProgramRecipe& r) {
  const ProgramSearch& s = r.search;
  e << YAML::BeginMap;
  emit_key(e, "budget");
  e << shortest(r.budget_seconds);
  emit_key(e, "screening");
  e << r.screening;
  emit_key(e, "search");
  const bool none = s.batch.empty() && s.threads_per_rank.empty() && !s.threads_auto &&
                    s.ranks_per_node.empty() && !s.ranks_auto && s.bucket_mb.empty();
  if (none) e << YAML::Flow;
  e << YAML::BeginMap;
  emit_list(e, "batch", s.batch, false);
  emit_list(e, "threads_per_rank", s.threads_per_rank, s.threads_auto);
  emit_list(e, "ranks_per_node", s.ranks_per_node, s.ranks_auto);
  emit_list(e, "bucket_mb", s.bucket_mb, false);
  e << YAML::EndMap << YAML::EndMap;
}

}  // namespace

std::string program_recipe_to_yaml(const ProgramRecipe& recipe) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  emit_key(e, "name");
  emit_string(e, recipe.name);
  emit_key(e, "description");
  emit_string(e, recipe.description);
  emit_key(e, "program");
  emit_program(e, recipe);
  emit_key(e, "tune");
  emit_tune(e, recipe);
  const LaunchConfig& l = recipe.launch;
  emit_key(e, "launch");
  e << YAML::BeginMap;
  emit_key(e, "ranks");
  e << auto_or(l.ranks);
  emit_key(e, "ranks_per_node");
  e << auto_or(l.ranks_per_node);
  emit_key(e, "threads_per_rank");
  e << auto_or(l.threads_per_rank);
  emit_key(e, "binding");
  e << l.binding;
  emit_key(e, "restarts");
  e << std::to_string(l.restarts);
  e << YAML::EndMap << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace dltune::recipes
