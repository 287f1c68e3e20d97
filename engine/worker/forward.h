// `dltune-worker forward` (forward.cc): the evaluation-mode logits of a model for a batch.
#pragma once

#include <CLI/CLI.hpp>

namespace dltune::engine {

// Adds the `forward` subcommand to the worker's CLI; run_forward_command() runs it once parsed
// and returns the exit code (0, 1 failure, 2 bad input: a bad or mismatched file).
CLI::App* add_forward_command(CLI::App& app);
int run_forward_command();

}  // namespace dltune::engine
