// How every subcommand reports errors (commands.h): one sentence on stderr, and with --json a
// JSON event on standard output; and "did you mean" for a mistyped subcommand.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "launcher/cli/commands.h"

namespace dltune::cli {
namespace {

bool g_json_errors = false;

}  // namespace

void set_json_errors(bool on) { g_json_errors = on; }
bool json_errors() { return g_json_errors; }

int report_error(const std::string& command, const Error& error) {
  const std::string msg = error.message();
  // Messages may quote a file someone else wrote (a bundle, a database, a recipe): nothing a
  // terminal would act on reaches it (a recipe's problems keep their line breaks).
  std::fprintf(stderr, "dltune%s%s: %s\n", command.empty() ? "" : " ", command.c_str(),
               strings::printable(msg).c_str());
  if (g_json_errors) {
    nlohmann::json problems = nlohmann::json::array();
    for (const std::string& line : strings::split(msg, '\n')) {
      if (!line.empty()) problems.push_back(line);
    }
    const nlohmann::json j = {{"event", "error"},
                              {"command", command},
                              {"message", msg},
                              {"problems", problems},
                              {"exit_code", error.exit_code()}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return error.exit_code();
}

std::optional<std::string> unknown_subcommand(CLI::App& app, int argc, const char* const* argv,
                                              std::string* command) {
  CLI::App* cur = &app;
  std::string where;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.empty() || a[0] == '-') return std::nullopt;  // options: CLI11 knows their arity
    const auto subs = cur->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty()) return std::nullopt;
    auto it = std::find_if(subs.begin(), subs.end(), [&](CLI::App* s) { return s->check_name(a); });
    if (it != subs.end()) {
      cur = *it;
      where += (where.empty() ? "" : " ") + a;
      continue;
    }
    if (cur->get_require_subcommand_min() == 0) return std::nullopt;  // a positional argument
    std::vector<std::string> names;
    std::string best;
    size_t best_d = SIZE_MAX;
    for (CLI::App* s : subs) {
      names.push_back(s->get_name());
      const size_t d = strings::edit_distance(a, s->get_name());
      if (d < best_d) best_d = d, best = s->get_name();
    }
    const bool near =
        best_d <= std::max<size_t>(2, a.size() / 3) || (a.size() >= 3 && best.rfind(a, 0) == 0);
    *command = where;
    return "unknown command '" + a + "'" +
           (near ? " (did you mean '" + best + "'?)" : std::string()) + "; the commands are " +
           strings::join(names, ", ") + " (`dltune " + (where.empty() ? "" : where + " ") +
           "--help` explains them)";
  }
  return std::nullopt;
}

}  // namespace dltune::cli
