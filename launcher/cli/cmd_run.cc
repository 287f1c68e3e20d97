// `dltune run -n N [--nodes N] [--bind ...] [--tag-output] [--backend local|slurm] [--plan F]
// -- PROGRAM [ARGS...]`: the generic launcher (issues 3, 25), under which a program runs as it
// would under mpirun or torchrun. Options struct + setup + run, CLI11's one-file shape.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "common/env.h"
#include "common/paths.h"
#include "common/strings.h"
#include "launcher/backend/host_list.h"
#include "launcher/backend/launch_spec.h"
#include "launcher/backend/local_backend.h"
#include "launcher/backend/plan_env.h"
#include "launcher/backend/rank_output.h"
#include "launcher/backend/slurm_backend.h"
#include "launcher/backend/ssh_backend.h"
#include "launcher/cli/commands.h"

namespace dltune::cli {
namespace {

struct RunOptions {
  int nranks = -1;
  int nodes = 0;
  std::string bind;
  std::string bind_to;  // mpirun's --bind-to
  std::string map_by;   // mpirun's --map-by
  bool tag_output = false;
  std::string output_filename;  // --output-filename DIR[:nocopy]
  bool timestamp_output = false;
  std::string backend;
  double timeout_s = 0;
  std::string plan_file;
  std::string recipe_file;
  std::string outcome_file;
  std::string exclude;               // --exclude HOST[,HOST...] (slurm)
  std::vector<std::string> exports;  // -x NAME[=VALUE], as given
  std::string hosts;                 // -H HOST[:SLOTS],...
  std::string hostfile;              // --hostfile FILE
  std::string node_of;               // --node-of ADDR:PORT (the node daemon, internal)
  int node_index = -1;               // --node-index K (with --node-of)
  std::vector<std::string> command;
};

// -H or --hostfile: the hosts of a job over ssh; empty when neither was given. Errors: both
// given, a bad list or file (host_list.h), or a backend or --nodes that contradicts them.
Result<std::vector<launcher::HostSlots>> hosts_option(const RunOptions& o) {
  if (o.hosts.empty() && o.hostfile.empty()) return std::vector<launcher::HostSlots>{};
  if (o.backend == "slurm") {
    return invalid_input(
        "-H / --hostfile start ranks over ssh; under Slurm, srun places them "
        "(drop --backend slurm, or drop the hosts)");
  }
  if (o.nodes > 0 || !o.exclude.empty()) {
    return invalid_input(
        "--nodes and --exclude choose Slurm nodes; with -H / --hostfile the "
        "hosts are the nodes");
  }
  return launcher::hosts_from_options(o.hosts, o.hostfile);
}

// --bind, or mpirun's --bind-to in its words (none, core, numa; hwthread and socket have no
// dltune policy), as --bind's value; "" when neither was given. Errors: both given, or a
// --bind-to value dltune cannot honour.
Result<std::string> bind_option(const RunOptions& o) {
  if (o.bind_to.empty()) return o.bind;
  if (!o.bind.empty()) return invalid_input("give --bind or --bind-to, not both");
  if (o.bind_to == "none" || o.bind_to == "core" || o.bind_to == "numa") return o.bind_to;
  if (o.bind_to == "hwthread" || o.bind_to == "socket" || o.bind_to == "package" ||
      o.bind_to == "l3cache") {
    return invalid_input("--bind-to " + o.bind_to +
                         ": dltune binds a rank to whole cores (core) or to a NUMA domain (numa), "
                         "or not at all (none)");
  }
  return invalid_input("--bind-to " + o.bind_to + ": expected none, core or numa");
}

Result<launcher::LaunchSpec> make_spec(const RunOptions& o, launcher::Backend backend,
                                       bool over_hosts) {
  launcher::LaunchSpec spec;
  spec.argv = o.command;
  spec.nranks = o.nranks;
  spec.nodes = o.nodes;
  if (o.nodes > 1 && backend != launcher::Backend::kSlurm) {
    return invalid_input("--nodes " + std::to_string(o.nodes) +
                         " needs the slurm backend (--backend slurm)");
  }
  if (spec.nranks < 0 && !over_hosts) {
    const char* ntasks = std::getenv("SLURM_NTASKS");
    if (backend != launcher::Backend::kSlurm || ntasks == nullptr) {
      return invalid_input("give the number of ranks with -n N");
    }
    auto n = strings::parse_int(ntasks);
    if (!n) return invalid_input("SLURM_NTASKS is not a number: '" + std::string(ntasks) + "'");
    spec.nranks = static_cast<int>(*n);
  }
  auto user_bind = bind_option(o);
  if (!user_bind) return user_bind.error();
  auto bind = topology::parse_bind_policy(user_bind->empty() ? env::get(env::kBind) : *user_bind);
  if (!bind) return std::move(bind).error().wrap(o.bind.empty() ? "DLTUNE_BIND" : "--bind");
  spec.bind = *bind;
  spec.bind_from_user = !user_bind->empty() || env::get_if_set(env::kBind).has_value();
  if (!o.map_by.empty()) {
    if (backend == launcher::Backend::kSlurm) {
      return invalid_input("--map-by " + o.map_by +
                           " lays out local ranks; under Slurm, srun's --distribution does "
                           "(e.g. srun -m block:cyclic deals a node's tasks over its sockets)");
    }
    auto map = topology::parse_map_policy(o.map_by);
    if (!map) return std::move(map).error().wrap("--map-by");
    spec.map = *map;
    spec.map_from_user = true;
  }
  if (!o.output_filename.empty()) {
    auto out = launcher::parse_output_filename(o.output_filename);
    if (!out) return out.error();
    spec.output = *out;
  }
  spec.output.tag = o.tag_output;
  spec.output.timestamp = o.timestamp_output;
  spec.timeout_s = o.timeout_s;
  auto grace = strings::parse_int(env::get(env::kKillGrace));
  if (!grace || *grace > 600'000) {
    return invalid_input("DLTUNE_KILL_GRACE_MS must be a number of milliseconds up to 600000");
  }
  spec.kill_grace_ms = static_cast<int>(*grace);
  if (!o.plan_file.empty()) {
    auto plan = launcher::read_plan_file(o.plan_file);  // exit 2 before any rank starts
    if (!plan) return plan.error();
    spec.plan_blob = std::move(plan->text);
    spec.plan = std::move(plan->plan);
  }
  if (!o.recipe_file.empty()) {
    auto recipe = paths::read_file(o.recipe_file);
    if (!recipe) return std::move(recipe).error().wrap("--recipe");
    spec.recipe_blob = std::move(*recipe);
  }
  if (!o.exclude.empty()) {
    if (backend != launcher::Backend::kSlurm) {
      return invalid_input("--exclude " + o.exclude + " needs the slurm backend (--backend slurm)");
    }
    for (const std::string& h : strings::split(o.exclude, ',')) {
      if (h.empty() || h.find_first_of(" \t=[]") != std::string::npos) {
        return invalid_input("--exclude expects node names separated by commas, got '" + o.exclude +
                             "'");
      }
      spec.exclude.push_back(h);
    }
  }
  if (spec.nodes > 0 && spec.nranks % spec.nodes != 0) {
    return invalid_input(std::to_string(spec.nranks) + " ranks do not divide evenly over " +
                         std::to_string(spec.nodes) + " nodes; choose -n as a multiple of --nodes");
  }
  auto exported = launcher::parse_exports(o.exports);
  if (!exported) return exported.error();
  spec.extra_env = std::move(*exported);
  spec.warn = [](const std::string& what) {
    std::fprintf(stderr, "dltune run: warning: %s\n", what.c_str());
  };
  if (over_hosts) return spec;  // run_hosts validates it once the slots give nranks
  DLTUNE_TRY(launcher::validate_spec(spec));
  return spec;
}

// The slurm backend runs inside an allocation: outside one, this command runs again under
// salloc with the job's shape (so that --nodes is what the ranks get); inside one, the
// allocation must have the nodes asked for.
Status check_allocation(const launcher::LaunchSpec& spec) {
  if (!launcher::in_slurm_allocation()) {
    return launcher::rerun_in_allocation(spec.nodes, spec.nranks);  // returns only on failure
  }
  const int all = launcher::allocation_nodes();  // 0: unknown
  const int have = all - static_cast<int>(spec.exclude.size());
  if (spec.nodes > 0 && all > 0 && have < spec.nodes) {
    return invalid_input(
        "--nodes " + std::to_string(spec.nodes) + ": this allocation has " + std::to_string(have) +
        " node(s)" + (spec.exclude.empty() ? "" : " besides the excluded ones") +
        "; ask salloc/sbatch for " + std::to_string(spec.nodes) + " or lower --nodes");
  }
  return ok_status();
}

int run_run(const RunOptions& o) {
  if (!o.node_of.empty()) {  // a node daemon of `dltune run -H` (ssh_backend.h)
    auto of = launcher::parse_node_of(o.node_of, o.node_index);
    if (!of) return report_error("run", of.error());
    return launcher::run_node_daemon(*of);
  }
  auto hosts = hosts_option(o);
  if (!hosts) return report_error("run", hosts.error());
  const bool over_hosts = !hosts->empty();
  auto backend = over_hosts || !o.backend.empty()
                     ? launcher::parse_backend(o.backend.empty() ? "local" : o.backend)
                     : launcher::default_backend();
  if (!backend) return report_error("run", backend.error());
  auto spec = make_spec(o, *backend, over_hosts);
  if (!spec) return report_error("run", spec.error());
  if (*backend == launcher::Backend::kSlurm) {
    if (Status s = check_allocation(*spec); !s.ok()) return report_error("run", s.error());
  }
  auto outcome = over_hosts                              ? launcher::run_hosts(*spec, *hosts)
                 : *backend == launcher::Backend::kSlurm ? launcher::run_slurm(*spec)
                                                         : launcher::run_local(*spec);
  if (!outcome) return report_error("run", outcome.error());
  if (!outcome->message.empty()) {
    std::fprintf(stderr, "dltune run: %s\n", outcome->message.c_str());
  }
  if (!o.outcome_file.empty()) {
    if (Status w = paths::write_file_atomic(o.outcome_file, launcher::outcome_to_json(*outcome));
        !w.ok()) {
      std::fprintf(stderr, "dltune run: --outcome-file: %s\n", w.error().message().c_str());
    }
  }
  return outcome->exit_code;
}

}  // namespace

void setup_run(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand(
      "run",
      "Launch N ranks of any program (PMIx client, Open MPI program or plain) and "
      "supervise them, like mpirun");
  cmd->add_option("-n,--np", opts->nranks, "Number of ranks (default under Slurm: SLURM_NTASKS)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--nodes", opts->nodes,
                  "Nodes to spread the ranks over (slurm backend; outside an allocation, "
                  "dltune runs itself again under salloc with this many nodes)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--bind", opts->bind, "CPU binding: none, core, numa or auto (DLTUNE_BIND)");
  cmd->add_option("--bind-to", opts->bind_to, "mpirun's spelling of --bind: none, core or numa");
  cmd->add_option("--map-by", opts->map_by,
                  "How local ranks are dealt over the NUMA domains, as mpirun's --map-by: core "
                  "or slot (consecutive ranks on a domain, the default), numa or socket "
                  "(round-robin)");
  cmd->add_flag("--tag-output", opts->tag_output, "Prefix every output line with [rank]");
  cmd->add_option("--output-filename", opts->output_filename,
                  "DIR[:nocopy]: also write each rank's output to DIR/1/rank.N/stdout and "
                  "stderr (Open MPI's layout); :nocopy: to the files only");
  cmd->add_flag("--timestamp-output", opts->timestamp_output,
                "Start every output line with the time it arrived, [YYYY-MM-DDTHH:MM:SS.mmm]");
  cmd->add_option("--backend", opts->backend,
                  "local (embedded PMIx server) or slurm (srun --mpi=pmix); default: slurm "
                  "inside an allocation, else local (DLTUNE_BACKEND)");
  cmd->add_option("--timeout", opts->timeout_s,
                  "Stop the job and fail when it runs longer than this many seconds")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--plan", opts->plan_file,
                  "A plan file (JSON) handed to every rank, and applied to what they run: Open "
                  "MPI coll/tuned rules, dltune's NCCL tuner plugin, the plan's CPU binding, GPU "
                  "and NIC (unless --bind is given)");
  cmd->add_option("--recipe", opts->recipe_file,
                  "A recipe as run (YAML) handed to every rank with the plan: dltune-worker "
                  "trains it (PMIx job data, else the file DLTUNE_RECIPE names)");
  cmd->add_option("-x", opts->exports,
                  "NAME=VALUE: set NAME in every rank; NAME: every rank gets this command's "
                  "NAME (mpirun's -x; repeatable; it wins over what dltune sets)")
      ->allow_extra_args(false);  // one NAME per -x: `-x A prog` leaves prog to the command
  cmd->add_option("--exclude", opts->exclude,
                  "HOST[,HOST...]: nodes of the allocation not to run on (slurm backend: srun "
                  "--exclude; rank 0 and MASTER_ADDR go to the first node left)");
  cmd->add_option("--outcome-file", opts->outcome_file,
                  "When the ranks have run, write the outcome to this file as JSON: "
                  "{\"exit_code\", \"message\" (the failure's sentence, \"\" on success), "
                  "\"interrupted\" (stopped by a signal to this command), \"host\" (the failed "
                  "rank's node, slurm backend)}");
  cmd->add_option("-H,--host", opts->hosts,
                  "HOST[:SLOTS],...: run the ranks on these machines, started over ssh (DLTUNE_SSH "
                  "replaces the ssh command), filling each host's slots (default 1) in turn, as "
                  "mpirun -H; -n defaults to the slots");
  cmd->add_option("--hostfile", opts->hostfile,
                  "FILE of hosts, one per line: HOST [slots=N], as mpirun's --hostfile");
  cmd->add_option("--node-of", opts->node_of, "(internal) run as the node daemon of a -H job")
      ->group("");
  cmd->add_option("--node-index", opts->node_index, "(internal) with --node-of")->group("");
  cmd->add_option("command", opts->command, "PROGRAM [ARGS...] (after --)");
  cmd->positionals_at_end();
  cmd->footer(
      "Every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR "
      "and MASTER_PORT (PyTorch's env://), OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE, and "
      "OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS as many as its CPUs (bound), "
      "else its share of the node's, unless set; rank 0 reads this command's standard input.\n"
      "Exit status, as mpirun's: 0 when every rank exits 0; else the first failed rank's exit "
      "code, 128 + its signal, or its MPI_Abort error code (the rank, its host and the cause are "
      "named); 1 for a failure without a code (a timeout); 2 for bad usage; 130/143 when "
      "interrupted.");
  cmd->callback([opts, exit_code] { *exit_code = run_run(*opts); });
}

}  // namespace dltune::cli
