// Recipe names, loading by path or bundled name, the tuning signature and the JSON view.
#include "recipes/recipe.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/hash.h"
#include "common/paths.h"
#include "common/strings.h"
#include "recipes/recipe_parse_internal.h"
#include "recipes/yaml_reader.h"

#include "dltune/config.h"

namespace dltune::recipes {
namespace fs = std::filesystem;

std::string Problem::to_string() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  return out + ": " + key + ": " + message;
}

std::string_view data_kind_name(DataKind kind) {
  switch (kind) {
    case DataKind::kSyntheticDigits:
      return "synthetic-digits";
    case DataKind::kSyntheticImagenet:
      return "synthetic-imagenet";
    case DataKind::kMnist:
      return "mnist";
    case DataKind::kCifar10:
      return "cifar10";
    case DataKind::kSyntheticCifar:
      return "synthetic-cifar";
    case DataKind::kText:
      return "text";
  }
  return "?";
}

int64_t text_window_stride(int64_t context) { return std::max<int64_t>(1, context / 16); }

int64_t text_heldout_bytes(int64_t bytes, double heldout_fraction) {
  return static_cast<int64_t>(std::llround(static_cast<double>(bytes) * heldout_fraction));
}

int64_t text_windows(int64_t part_bytes, int64_t context) {
  return part_bytes < context + 1 ? 0
                                  : (part_bytes - context - 1) / text_window_stride(context) + 1;
}

std::optional<DataKind> internal::parse_data_kind(std::string_view s) {
  for (DataKind k : {DataKind::kSyntheticDigits, DataKind::kSyntheticImagenet, DataKind::kMnist,
                     DataKind::kCifar10, DataKind::kSyntheticCifar, DataKind::kText})
    if (data_kind_name(k) == s) return k;
  return std::nullopt;
}

std::string_view schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kConstant:
      return "constant";
    case ScheduleKind::kStep:
      return "step";
    case ScheduleKind::kCosine:
      return "cosine";
  }
  return "?";
}

namespace {

// Directories searched for bundled recipes, in order.
std::vector<std::string> bundled_dirs() {
  std::vector<std::string> dirs;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back((exe.parent_path().parent_path() / "share/dltune/recipes").string());
  dirs.push_back(std::string(DLTUNE_SOURCE_DIR) + "/recipes");
  dirs.emplace_back("recipes");
  return dirs;
}

std::vector<std::string> yaml_names_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".yaml" && entry.is_regular_file(ec))
      names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Result<std::string> find_bundled_recipe(const std::string& name) {
  for (const std::string& dir : bundled_dirs()) {
    const std::string path = dir + "/" + name + ".yaml";
    if (fs::is_regular_file(path)) return path;
  }
  return not_found("no bundled recipe named '" + name + "'");
}

std::vector<BundledRecipe> list_bundled_recipes() {
  std::vector<BundledRecipe> out;
  for (const std::string& dir : bundled_dirs()) {
    const std::vector<std::string> names = yaml_names_in(dir);
    if (names.empty()) continue;
    for (const std::string& name : names) {
      BundledRecipe b{name, dir + "/" + name + ".yaml", ""};
      ParseOutcome parsed = parse_recipe_file(b.path);
      b.description = parsed.recipe.description;  // shown even when its data files are absent
      out.push_back(std::move(b));
    }
    break;
  }
  return out;
}

Result<std::string> resolve_recipe_path(const std::string& path_or_name) {
  std::error_code ec;
  if (fs::is_regular_file(path_or_name, ec)) return path_or_name;
  const bool looks_like_name = path_or_name.find('/') == std::string::npos &&
                               !path_or_name.ends_with(".yaml") && !path_or_name.empty();
  if (looks_like_name) {
    auto bundled = find_bundled_recipe(path_or_name);
    if (bundled) return bundled;
  }
  std::vector<std::string> names;
  for (const BundledRecipe& b : list_bundled_recipes()) names.push_back(b.name);
  const std::string stem = fs::path(path_or_name).stem().string();
  const bool is_bundled = std::find(names.begin(), names.end(), stem) != names.end();
  const std::string hint = is_bundled && stem != path_or_name ? " (did you mean '" + stem + "'?)"
                                                              : did_you_mean(stem, names);
  return not_found("no recipe file or bundled recipe named '" + path_or_name + "'" + hint +
                   " (bundled: " + strings::join(names, ", ") + ")");
}

Result<Recipe> load_recipe(const std::string& path_or_name) {
  auto path = resolve_recipe_path(path_or_name);
  if (!path) return std::move(path).error();
  ParseOutcome parsed = parse_recipe_file(*path);
  if (parsed.ok()) return std::move(parsed.recipe);
  std::vector<std::string> lines;
  for (const Problem& p : parsed.problems) lines.push_back(p.to_string());
  return invalid_input(strings::join(lines, "\n"));
}

std::string recipe_signature(const Recipe& recipe) {
  // Versioned, canonical text: change "v1" whenever what goes in here changes.
  std::string text = "dltune-recipe-signature v2\n";
  text += "dtype " + recipe.model.dtype + "\n";
  text += "input " + describe_shape(recipe.data.shape) + "\n";
  text += "classes " + std::to_string(recipe.data.classes) + "\n";
  text += describe_graph(recipe.model.graph);
  return sha256_hex(text);
}

}  // namespace dltune::recipes
