// The `dltune` subcommands. Each lives in its own cmd_<name>.cc (CLI11's one-file-per-
// subcommand shape): setup_<name>() adds the subcommand with its options to `app`; when the
// subcommand is selected, its callback runs it and stores the process exit code in *exit_code
// (0 success, 1 the job or command failed, 2 bad usage or input — DESIGN.md).
#pragma once

#include <CLI/CLI.hpp>

#include "common/result.h"

namespace dltune::cli {

void setup_version(CLI::App& app, int* exit_code);
void setup_topo(CLI::App& app, int* exit_code);
void setup_run(CLI::App& app, int* exit_code);
void setup_bench(CLI::App& app, int* exit_code);
void setup_recipe(CLI::App& app, int* exit_code);
void setup_db(CLI::App& app, int* exit_code);
void setup_tune(CLI::App& app, int* exit_code);
void setup_launch(CLI::App& app, int* exit_code);
void setup_model(CLI::App& app, int* exit_code);
void setup_predict(CLI::App& app, int* exit_code);

// Prints "dltune <command>: <message>" to stderr and returns the error's exit code.
int report_error(const std::string& command, const Error& error);

}  // namespace dltune::cli
