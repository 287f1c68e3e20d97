// dltune: the command-line entry point. Thin: parses the command line, dispatches to the
// subcommand, and maps errors to exit codes. Nothing throws past main().
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "common/env.h"
#include "launcher/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "dltune: launch distributed deep-learning training, autotuned for this machine.\n"
      "Run `dltune COMMAND --help` for a command's options.",
      "dltune"};
  app.require_subcommand(1);
  bool help_env = false;
  app.add_flag("--help-env", help_env, "List the DLTUNE_* environment variables and exit");
  app.footer(
      "Environment: see `dltune --help-env`. Exit codes: 0 success, 1 failure, 2 bad input.");

  int exit_code = 0;
  dltune::cli::setup_version(app, &exit_code);
  dltune::cli::setup_topo(app, &exit_code);
  dltune::cli::setup_run(app, &exit_code);
  dltune::cli::setup_bench(app, &exit_code);
  dltune::cli::setup_recipe(app, &exit_code);
  dltune::cli::setup_db(app, &exit_code);
  dltune::cli::setup_tune(app, &exit_code);
  dltune::cli::setup_launch(app, &exit_code);
  dltune::cli::setup_model(app, &exit_code);
  dltune::cli::setup_predict(app, &exit_code);
  dltune::cli::setup_data(app, &exit_code);

  try {
    // --help-env must work without a subcommand.
    for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i) {
      // mpirun's `-np N` (a single dash) is `--np N` here; the program's own arguments after
      // "--" are left alone.
      if (std::string_view(argv[i]) == "-np") argv[i] = const_cast<char*>("--np");
    }
    for (int i = 1; i < argc; ++i) {
      if (std::string_view(argv[i]) == "--help-env") {
        std::printf("dltune environment variables:\n%s", dltune::env::describe_all().c_str());
        return 0;
      }
      // --json anywhere: a script reads standard output, so errors are JSON events there too.
      if (std::string_view(argv[i]) == "--json") dltune::cli::set_json_errors(true);
    }
    std::string command;
    if (auto unknown = dltune::cli::unknown_subcommand(app, argc, argv, &command)) {
      return dltune::cli::report_error(command, dltune::invalid_input(*unknown));
    }
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0 && dltune::cli::json_errors()) {
      return dltune::cli::report_error("", dltune::invalid_input(e.what()));
    }
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dltune: internal error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
