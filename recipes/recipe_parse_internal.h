// Internal to recipes/: the section parsers shared by recipe_parse*.cc. Not a public API.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/strings.h"
#include "recipes/recipe.h"
#include "recipes/yaml_reader.h"

namespace dltune::recipes::internal {

// The largest count or size a recipe may give (steps, batches, samples, classes, layer sizes):
// the engine holds them in 32-bit ints, and nothing sensible is larger.
inline constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

std::optional<DataKind> parse_data_kind(std::string_view s);

// What model recipes and program recipes (program_parse.cc) parse alike:
// The name a recipe without `name` gets: its file's name without the extension, `fallback`
// when nothing is left.
std::string default_name(const std::string& file, const std::string& fallback);
// Whether `s` may name a recipe: letters, digits, '.', '_' and '-' (it names the run directory).
bool valid_name(const std::string& s);
// Sorts problems by line, then column, keeping the order of equal ones.
void sort_problems(std::vector<Problem>* problems);
// The YAML document of `text`: precheck_yaml() first, then yaml-cpp; on failure, nullopt and
// the problem (a syntax error located at yaml-cpp's mark) appended to `problems`.
std::optional<YAML::Node> load_document(std::string_view text, const std::string& file,
                                        std::vector<Problem>* problems);
// Every problem on its own line (Problem::to_string), for an invalid_input error.
std::string problems_text(const std::vector<Problem>& problems);

// Each reads its section into the recipe, reporting through `r`; relative data paths resolve
// against `base_dir`.
void parse_model(YamlReader& r, const YAML::Node& node, ModelConfig* m);
void parse_data(YamlReader& r, const YAML::Node& node, const std::string& base_dir, DataConfig* d);
void parse_training(YamlReader& r, const YAML::Node& node, const std::string& base_dir,
                    TrainingConfig* t);
void parse_comm(YamlReader& r, const YAML::Node& node, CommConfig* c);
void parse_tune(YamlReader& r, const YAML::Node& node, TuneConfig* t);
void parse_launch(YamlReader& r, const YAML::Node& node, LaunchConfig* l);
// parse_recipe() on a document already loaded (and perhaps changed: `--set`,
// recipe_overrides.h). Values added to the document carry no position; problems in them have
// line 0.
ParseOutcome parse_recipe_document(const YAML::Node& root, const std::string& file,
                                   const std::string& base_dir);
// After `model` and `data` are parsed: model.input defaults to the data's shape and
// model.graph is built (a built-in for the data's input and classes, the chain or the nodes).
void build_model_graph(Recipe* recipe);

// A validation problem with the key paths it depends on: dropped when parsing already reported
// a problem under one of them (so one mistake is not reported twice).
struct Check {
  std::string key;
  std::string message;
  std::vector<std::string> depends;  // key-path prefixes, e.g. "training.batch", "launch"
};
std::vector<Check> cross_checks(const Recipe& recipe);
// Turns checks into problems of recipe.source_path, located at their key (or its nearest
// located parent) when `where` knows it.
std::vector<Problem> locate_checks(const Recipe& recipe, const std::vector<Check>& checks,
                                   const SourceMap* where);

}  // namespace dltune::recipes::internal
