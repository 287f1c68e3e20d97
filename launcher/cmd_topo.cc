// `dltune topo`: what dltune sees in a machine (topology issue).
#include "launcher/commands.h"

namespace dltune::cli {

void setup_topo(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("topo", "Show the node's CPUs, GPUs, NICs and rank placement");
  cmd->callback([exit_code] {
    *exit_code = report_error("topo", unsupported("topology discovery is not built yet"));
  });
}

}  // namespace dltune::cli
