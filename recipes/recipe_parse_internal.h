// Internal to recipes/: the section parsers shared by recipe_parse*.cc. Not a public API.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

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
