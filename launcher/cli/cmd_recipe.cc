// `dltune recipe`: check recipes (every problem, located), show one normalised (YAML, or JSON),
// list the bundled ones. A recipe whose data files are missing is still shown, with a note. A
// recipe argument is a file path or a bundled recipe's name; a file with a top-level `program`
// key is a program recipe (recipes/program.h) and goes to its own parser.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "common/paths.h"
#include "common/strings.h"
#include "launcher/backend/rank_program.h"
#include "launcher/cli/commands.h"
#include "launcher/flow/launch_layout.h"
#include "recipes/program.h"
#include "recipes/recipe.h"
#include "topology/topology.h"
#include "tuner/program_tuning.h"

namespace dltune::cli {
namespace {

struct RecipeOptions {
  std::vector<std::string> recipes;
  bool json = false;
  bool signature = false;
};

// One recipe argument, parsed by the parser its text asks for.
struct Checked {
  std::string path;      // resolved; "" when the argument named nothing
  bool program = false;  // a program recipe: `prog` holds it, else `model`
  recipes::ParseOutcome model;
  recipes::ProgramParseOutcome prog;
  std::vector<recipes::Problem>& problems() { return program ? prog.problems : model.problems; }
  bool ok() const { return program ? prog.ok() : model.ok(); }
};

// Parses one recipe argument: problems for a bad or missing file, else the recipe.
Checked check_one(const std::string& arg) {
  Checked c;
  auto path = recipes::resolve_recipe_path(arg);
  if (!path) {
    c.model.problems.push_back({arg, 0, 0, "recipe", path.error().message()});
    return c;
  }
  c.path = *path;
  auto text = paths::read_file(c.path);  // unreadable: the model parser says so
  c.program = text.ok() && recipes::names_program(*text);
  if (c.program)
    c.prog = recipes::parse_program_recipe_file(c.path);
  else
    c.model = recipes::parse_recipe_file(c.path);
  // A program recipe's search space as a launch here expands it (`auto` is every ranks per
  // node this machine's cores allow): more than a launch takes is refused here too.
  if (c.program && c.prog.ok()) {
    if (auto topo = topology::discover_default()) {
      const tuner::ProgramMachine m = tuner::program_machine(*topo);
      if (auto cands = tuner::program_candidates(c.prog.recipe, m); !cands) {
        c.prog.problems.push_back({c.path, 0, 0, "tune.search",
                                   cands.error().message() + " (on this machine: " +
                                       std::to_string(m.cores_per_node) + " cores)"});
      }
    }
  }
  return c;
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

nlohmann::json problems_json(const std::vector<recipes::Problem>& problems) {
  nlohmann::json out = nlohmann::json::array();
  for (const recipes::Problem& p : problems)
    out.push_back({{"file", p.file},
                   {"line", p.line},
                   {"column", p.column},
                   {"key", p.key},
                   {"message", p.message},
                   {"text", p.to_string()}});
  return out;
}

int run_check(const RecipeOptions& opts) {
  int code = 0;
  nlohmann::json report = nlohmann::json::array();
  for (const std::string& arg : opts.recipes) {
    Checked c = check_one(arg);
    std::optional<std::string> layout;
    if (c.ok() && !c.program) layout = check_memory(c.path, c.model);
    if (!c.ok()) code = 2;
    if (opts.json) {
      report.push_back({{"recipe", arg},
                        {"kind", c.program ? "program" : "model"},
                        {"ok", c.ok()},
                        {"problems", problems_json(c.problems())},
                        {"layout", layout ? nlohmann::json(*layout) : nlohmann::json(nullptr)}});
      continue;
    }
    if (c.ok()) {
      std::printf("%s: ok\n", arg.c_str());
      if (layout) std::printf("  layout: %s\n", layout->c_str());
      if (c.program)
        std::printf("  program: %s\n", strings::join(c.prog.recipe.command, " ").c_str());
    }
    for (const recipes::Problem& p : c.problems())
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

// A YAML view as JSON: plain scalars that are numbers become numbers, everything else strings
// (the YAML view quotes the strings that would read as numbers).
nlohmann::ordered_json yaml_to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (auto it = n.begin(); it != n.end(); ++it)
      out[it->first.Scalar()] = yaml_to_json(it->second);
    return out;
  }
  if (n.IsSequence()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const YAML::Node& item : n) out.push_back(yaml_to_json(item));
    return out;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string& s = n.Scalar();
  if (n.Tag() == "?") {
    if (auto i = strings::parse_int(s)) return *i;
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return d;
  }
  return s;
}

int show_program(const RecipeOptions& opts, const Checked& c) {
  for (const recipes::Problem& p : c.prog.problems)
    std::fprintf(stderr, "%s\n", p.to_string().c_str());
  if (!c.prog.ok()) return 2;
  const std::string yaml = recipes::program_recipe_to_yaml(c.prog.recipe);
  if (opts.signature)
    std::printf("%s\n", recipes::program_signature(c.prog.recipe).c_str());
  else if (opts.json)
    std::printf("%s\n", yaml_to_json(YAML::Load(yaml)).dump(2).c_str());  // our own YAML
  else
    std::printf("%s", yaml.c_str());
  return 0;
}

int run_show(const RecipeOptions& opts) {
  Checked c = check_one(opts.recipes.front());
  if (c.program) return show_program(opts, c);
  const recipes::ParseOutcome& outcome = c.model;
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
