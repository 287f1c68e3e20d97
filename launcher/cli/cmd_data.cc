// `dltune data check RECIPE [--set KEY=VALUE]... [--json]`: whether the files a recipe's data
// needs are there and whole (launcher/data_check.h). Exit 0 when they are (or the data is
// synthetic), 1 when a file is missing or wrong (each named, with what to fetch and where to
// put it), 2 for a bad recipe or command line.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/cli/commands.h"
#include "launcher/cli/data_check.h"
#include "recipes/recipe.h"
#include "recipes/recipe_overrides.h"

namespace dltune::cli {
namespace {

struct DataOptions {
  std::string recipe;
  std::vector<std::string> sets;
  bool json = false;
};

int run_data_check(const DataOptions& o) {
  std::vector<recipes::Override> overrides;
  for (const std::string& t : o.sets) {
    auto ov = recipes::parse_override(t);
    if (!ov) return report_error("data check", ov.error());
    overrides.push_back(*ov);
  }
  auto path = recipes::resolve_recipe_path(o.recipe);
  if (!path) return report_error("data check", path.error());
  // The recipe's own problems, except that its data files are missing: that is what this
  // command is here to say, at length.
  const recipes::ParseOutcome parsed = recipes::parse_recipe_with_overrides(*path, overrides);
  std::vector<std::string> problems;
  for (const recipes::Problem& p : parsed.problems) {
    if (p.key != "data.path") problems.push_back(p.to_string());
  }
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "\n") + p;
    return report_error("data check", invalid_input(all));
  }
  const launcher::DataCheck d = launcher::check_data(parsed.recipe.data);
  if (o.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : d.files) {
      files.push_back({{"name", f.name},
                       {"path", f.path},
                       {"ok", f.ok},
                       {"warn", f.warn},
                       {"detail", f.detail}});
    }
    std::printf("%s\n", nlohmann::json{{"recipe", parsed.recipe.name},
                                       {"kind", d.kind},
                                       {"path", d.path},
                                       {"ok", d.ok},
                                       {"summary", d.summary},
                                       {"fetch", d.fetch},
                                       {"files", files}}
                            .dump(1)
                            .c_str());
    return d.ok ? 0 : 1;
  }
  std::printf("%s data of recipe '%s'%s\n", d.kind.c_str(), parsed.recipe.name.c_str(),
              d.path.empty() ? "" : (" in " + d.path).c_str());
  for (const auto& f : d.files) {
    std::printf("  %-4s %-28s %s\n",
                !f.ok    ? "BAD"
                : f.warn ? "warn"
                         : "ok",
                f.name.c_str(), f.detail.c_str());
  }
  std::printf("%s\n", d.summary.c_str());
  if (!d.fetch.empty()) std::printf("to get it: %s\n", d.fetch.c_str());
  return d.ok ? 0 : 1;
}

}  // namespace

void setup_data(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("data", "Check the data a recipe reads");
  cmd->require_subcommand(1);
  auto o = std::make_shared<DataOptions>();
  auto* check = cmd->add_subcommand(
      "check",
      "Verify a recipe's data files: present, sizes, headers, labels, and the archives' "
      "published checksums when they lie beside them (exit 1 when something is missing or "
      "wrong, saying what to fetch and where)");
  check->add_option("RECIPE", o->recipe, "Recipe file or bundled recipe name")->required();
  check->add_option("--set", o->sets, "Change a recipe key first (as dltune launch --set)");
  check->add_flag("--json", o->json, "Print the result as JSON");
  check->callback([exit_code, o] { *exit_code = run_data_check(*o); });
}

}  // namespace dltune::cli
