// `dltune recipe`: check recipes (every problem, located), show one normalised (YAML, or JSON),
// list the bundled ones. A recipe whose data files are missing is still shown, with a note. A
// recipe argument is a file path or a bundled recipe's name.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/backend/rank_program.h"
#include "launcher/cli/commands.h"
#include "launcher/flow/launch_layout.h"
#include "recipes/recipe.h"

namespace dltune::cli {
namespace {

struct RecipeOptions {
  std::vector<std::string> recipes;
  bool json = false;
  bool signature = false;
};

// Parses one recipe argument: problems for a bad or missing file, else the recipe.
recipes::ParseOutcome check_one(const std::string& arg) {
  auto path = recipes::resolve_recipe_path(arg);
  if (!path) {
    recipes::ParseOutcome out;
    out.problems.push_back({arg, 0, 0, "recipe", path.error().message()});
    return out;
  }
  return recipes::parse_recipe_file(*path);
}

// Whether the recipe's model fits a rank's memory in some layout (the layout search with the
// memory model, launch_layout.h) on launch.ranks ranks (auto: its fixed stage count, else 1). A
// recipe that fits nowhere gets a problem saying by how much and what would fit; the best
// layout is returned for the report.
std::optional<std::string> check_memory(const std::string& path, recipes::ParseOutcome& outcome) {
  const recipes::Recipe& r = outcome.recipe;
  launcher::LayoutQuery q;
  if (auto worker = sibling_program("dltune-worker")) q.worker = *worker;  // a GPU's memory
  q.recipe_path = path;
  q.ranks = static_cast<int>(r.launch.ranks > 0 ? r.launch.ranks
                                                : std::max<int64_t>(1, r.training.parallel.stages));
  q.ranks_per_node = static_cast<int>(r.launch.ranks_per_node);
  auto a = launcher::query_layouts(q);
  if (!a) {
    const bool limit = r.launch.memory_per_rank > 0;
    outcome.problems.push_back(
        {path, 0, 0, limit ? "launch.memory_per_rank" : "training.parallel", a.error().message()});
    return std::nullopt;
  }
  return a->candidates.front().layout.reason;
}

int run_check(const RecipeOptions& opts) {
  int code = 0;
  nlohmann::json report = nlohmann::json::array();
  for (const std::string& arg : opts.recipes) {
    recipes::ParseOutcome outcome = check_one(arg);
    std::optional<std::string> layout;
    if (outcome.ok()) layout = check_memory(*recipes::resolve_recipe_path(arg), outcome);
    if (!outcome.ok()) code = 2;
    if (opts.json) {
      nlohmann::json problems = nlohmann::json::array();
      for (const recipes::Problem& p : outcome.problems)
        problems.push_back({{"file", p.file},
                            {"line", p.line},
                            {"column", p.column},
                            {"key", p.key},
                            {"message", p.message},
                            {"text", p.to_string()}});
      report.push_back({{"recipe", arg},
                        {"ok", outcome.ok()},
                        {"problems", problems},
                        {"layout", layout ? nlohmann::json(*layout) : nlohmann::json(nullptr)}});
      continue;
    }
    if (outcome.ok()) {
      std::printf("%s: ok\n", arg.c_str());
      if (layout) std::printf("  layout: %s\n", layout->c_str());
    }
    for (const recipes::Problem& p : outcome.problems)
      std::fprintf(stderr, "%s\n", p.to_string().c_str());
  }
  if (opts.json) std::printf("%s\n", report.dump(2).c_str());
  return code;
}

// Whether a problem is only that the recipe's data files are not there (yet): the recipe
// itself can still be shown.
bool data_files_only(const recipes::Problem& p) {
  return p.key == "data.path" && (p.message.find("does not exist") != std::string::npos ||
                                  p.message.find(" lacks ") != std::string::npos);
}

int run_show(const RecipeOptions& opts) {
  const recipes::ParseOutcome outcome = check_one(opts.recipes.front());
  bool showable = true;
  for (const recipes::Problem& p : outcome.problems) showable = showable && data_files_only(p);
  for (const recipes::Problem& p : outcome.problems) {
    std::fprintf(stderr, "%s%s\n", showable ? "note: " : "", p.to_string().c_str());
  }
  if (!showable) return 2;
  if (opts.signature)
    std::printf("%s\n", recipes::recipe_signature(outcome.recipe).c_str());
  else if (opts.json)
    std::printf("%s\n", recipes::recipe_to_json(outcome.recipe).c_str());
  else
    std::printf("%s", recipes::recipe_to_yaml(outcome.recipe).c_str());
  return 0;
}

int run_list(const RecipeOptions& opts) {
  const std::vector<recipes::BundledRecipe> list = recipes::list_bundled_recipes();
  if (list.empty())
    return report_error("recipe list", not_found("no bundled recipes found (looked in the "
                                                 "installed share directory, the source tree "
                                                 "and ./recipes)"));
  if (opts.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& b : list)
      out.push_back({{"name", b.name}, {"path", b.path}, {"description", b.description}});
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  for (const auto& b : list) std::printf("%-14s %s\n", b.name.c_str(), b.description.c_str());
  return 0;
}

}  // namespace

void setup_recipe(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("recipe", "Check, show or list training recipes");
  cmd->require_subcommand(1);
  auto opts = std::make_shared<RecipeOptions>();

  auto* check = cmd->add_subcommand(
      "check", "Validate recipes: prints 'ok' per file or every problem (exit 2 on any)");
  check->add_option("RECIPE", opts->recipes, "Recipe files or bundled recipe names")
      ->required()
      ->expected(1, -1);
  check->add_flag("--json", opts->json, "Print the result as JSON");
  check->callback([exit_code, opts] { *exit_code = run_check(*opts); });

  auto* show = cmd->add_subcommand(
      "show", "Print a recipe normalised as YAML (--json: JSON), every default filled in");
  show->add_option("RECIPE", opts->recipes, "A recipe file or bundled recipe name")
      ->required()
      ->expected(1);
  show->add_flag("--json", opts->json, "Print JSON (with the model's whole node table)");
  show->add_flag("--signature", opts->signature,
                 "Print only the recipe signature (what the tuning database keys on)");
  show->callback([exit_code, opts] { *exit_code = run_show(*opts); });

  auto* list = cmd->add_subcommand("list", "List the bundled recipes");
  list->add_flag("--json", opts->json, "Print as JSON");
  list->callback([exit_code, opts] { *exit_code = run_list(*opts); });
}

}  // namespace dltune::cli
