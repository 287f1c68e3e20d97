// `dltune db`: being written (see the open issues); registered so the CLI stays whole.
#include "launcher/commands.h"

namespace dltune::cli {

void setup_db(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("db", "(in progress)");
  cmd->callback([exit_code] {
    *exit_code = report_error("db", unsupported("this command is not built yet"));
  });
}

}  // namespace dltune::cli
