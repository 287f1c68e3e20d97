// The `dltune` subcommands. Each lives in its own cmd_<name>.cc (CLI11's one-file-per-
// subcommand shape): setup_<name>() adds the subcommand with its options to `app`; when the
// subcommand is selected, its callback runs it and stores the process exit code in *exit_code
// (0 success, 1 the job or command failed, 2 bad usage or input — DESIGN.md).
#pragma once

#include <optional>
#include <string>

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
void setup_data(CLI::App& app, int* exit_code);

// Prints "dltune <command>: <message>" to stderr and returns the error's exit code. With JSON
// errors on (set_json_errors), also prints {"event":"error","command":C,"message":M,
// "problems":[each line of M],"exit_code":N} on standard output, where a script reading the
// command's --json events finds it.
int report_error(const std::string& command, const Error& error);
void set_json_errors(bool on);
bool json_errors();

// When the command line names a subcommand that does not exist where one is required
// (`dltune launhc`, `dltune db shwo`): the one-sentence error with "did you mean" and the
// commands there, and in *command the command it belongs to ("" or "db"); nullopt otherwise
// (CLI11 reports everything else).
std::optional<std::string> unknown_subcommand(CLI::App& app, int argc, const char* const* argv,
                                              std::string* command);

}  // namespace dltune::cli
