// YamlReader: typed, located reads from yaml-cpp nodes that collect problems instead of
// throwing. The recipe parser is written on top of it; every getter reports a problem (with
// the file, 1-based line/column, key path and what is allowed) and returns false on bad input,
// and returns true leaving *out untouched when the key is absent.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "recipes/recipe.h"

namespace dltune::recipes {

// "a.b" from ("a", "b"); just "b" when the parent is empty.
std::string join_key(const std::string& parent, std::string_view key);

// The entries of one YAML mapping, by key, with their locations.
class Fields {
 public:
  struct Entry {
    YAML::Node key;
    YAML::Node value;
    std::string path;  // the full key path
  };
  const Entry* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const std::string& path() const { return path_; }
  const YAML::Node& node() const { return node_; }

 private:
  friend class YamlReader;
  std::string path_;
  YAML::Node node_;
  std::vector<Entry> entries_;
};

class YamlReader {
 public:
  YamlReader(std::string file, std::vector<Problem>* problems, SourceMap* where)
      : file_(std::move(file)), problems_(problems), where_(where) {}

  const std::string& file() const { return file_; }
  size_t problem_count() const { return problems_->size(); }

  // Records a problem at `at` (its value position; a null value's key position when `key_at`
  // is given) for key path `key`.
  void report(const YAML::Node& at, const std::string& key, std::string message);
  void report(const Fields::Entry& e, std::string message);
  // Records a problem at a 1-based line and column.
  void report_at(int line, int column, const std::string& key, std::string message);
  // Remembers where `key` is (1-based) for later cross-field checks.
  void locate(const std::string& key, const YAML::Node& at);

  // Reads a mapping at `path`: every key must be in `allowed` (else "unknown key ... did you
  // mean"), none may repeat, all keys must be plain strings. False (reported) when `node` is
  // not a mapping; unknown keys are reported but the known ones are still returned.
  bool fields(const YAML::Node& node, const std::string& path,
              std::initializer_list<std::string_view> allowed, Fields* out);
  bool fields(const YAML::Node& node, const std::string& path,
              const std::vector<std::string>& allowed, Fields* out);

  // Scalar getters over a Fields entry. Absent: true, *out untouched. Bad: reported, false.
  bool get_string(const Fields& f, std::string_view key, std::string* out);
  // An integer in [min, max]: "expected a positive integer, got \"x\"".
  bool get_int(const Fields& f, std::string_view key, int64_t min, int64_t max, int64_t* out);
  // A positive integer or `auto` (-> 0).
  bool get_int_or_auto(const Fields& f, std::string_view key, int64_t* out);
  // A finite number in [min, max] (max_open: strictly below max; min_open: strictly above).
  bool get_number(const Fields& f, std::string_view key, double min, bool min_open, double max,
                  bool max_open, double* out);
  // One of `allowed`; the message lists them and suggests a near miss.
  bool get_choice(const Fields& f, std::string_view key, const std::vector<std::string>& allowed,
                  std::string* out);
  // A byte count (4096, 64MiB, 4M: common/strings.h parse_bytes) in [min, max], or `auto`
  // (-> 0).
  bool get_bytes_or_auto(const Fields& f, std::string_view key, uint64_t min, uint64_t max,
                         uint64_t* out);

  // Helpers for values that are not map entries (list items, top-level scalars).
  bool scalar_string(const YAML::Node& v, const std::string& path, std::string* out);
  bool scalar_int(const YAML::Node& v, const std::string& path, int64_t min, int64_t max,
                  int64_t* out);
  bool scalar_choice(const YAML::Node& v, const std::string& path,
                     const std::vector<std::string>& allowed, std::string* out);

 private:
  std::string file_;
  std::vector<Problem>* problems_;
  SourceMap* where_;
};

// `got "x"` / `got a mapping` / `got a list` / `got nothing`, for messages.
std::string describe_value(const YAML::Node& v);
// A scalar as messages show it: at most 80 characters (then "..."), control characters and bytes
// that are not UTF-8 as '?'.
std::string shown_scalar(const std::string& s);

// Checks YAML text before yaml-cpp builds a tree of it: at most 1 MiB, well-formed UTF-8,
// collections nested at most 32 deep, at most 100,000 nodes, no aliases (`*name`, which would
// let a small file stand for a huge tree), one document (a second, after `---`, is an error,
// not silently dropped). nullopt when fine; else the problem, located at the offending
// position (key "syntax").
std::optional<Problem> precheck_yaml(std::string_view text, const std::string& file);
// " (did you mean 'x'?)" for the closest of `candidates` within a small edit distance, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace dltune::recipes
