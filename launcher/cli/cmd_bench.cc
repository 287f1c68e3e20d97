// `dltune bench`: measures the allreduce algorithms side by side on this machine.
//
// The measuring itself happens in the rank program dltune-bench-rank (comm/tools/), built next
// to this binary: under an existing launcher (PMIx / MPI environment) this process becomes that
// rank program (exec); otherwise it starts -n ranks of it with `dltune run` (Open MPI's direct
// launch by our PMIx server), or with mpirun in a build without PMIx, or, with neither, runs
// them as threads of one process. With --backend nccl the ranks measure NCCL's allreduce on GPU
// memory for NCCL's algorithm/protocol choices (one GPU per rank). Arguments (and,
// for nccl, the presence of a CUDA device) are checked before anything is launched, so bad
// input is exit 2 with one sentence.
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "common/strings.h"
#include "launcher/backend/rank_program.h"
#include "launcher/cli/commands.h"

#include "dltune/config.h"

namespace dltune::cli {
namespace {

struct BenchOptions {
  std::string backend = "host";
  std::string algo = "all";
  int ranks = 2;
  std::string min_bytes = "4";
  std::string max_bytes = "256MiB";
  bool json = false;
};

int run_bench(const BenchOptions& o) {
  if (o.ranks < 1 || o.ranks > 256) {
    return report_error("bench",
                        invalid_input("-n expects 1 to 256 ranks, got " + std::to_string(o.ranks)));
  }
  for (const std::string* b : {&o.min_bytes, &o.max_bytes}) {
    auto v = strings::parse_bytes(*b);
    if (!v)
      return report_error("bench",
                          v.error().wrap(b == &o.min_bytes ? "--min-bytes" : "--max-bytes"));
  }
  auto prog = sibling_program("dltune-bench-rank");
  if (!prog) return report_error("bench", prog.error());
  std::vector<std::string> args = {*prog,       "--algo",      o.algo,     "--min-bytes",
                                   o.min_bytes, "--max-bytes", o.max_bytes};
  if (o.json) args.push_back("--json");
  const bool nccl = o.backend == "nccl";
  if (nccl) {
    args.push_back("--backend");
    args.push_back("nccl");
  }

  // Check the arguments first (the rank program validates them without starting MPI).
  std::vector<std::string> check = args;
  check.push_back("--check-args");
  auto rc = run_to_completion(check, "bench");
  if (!rc) return report_error("bench", rc.error());
  if (*rc != 0) return *rc == 2 ? 2 : 1;  // the rank program printed the reason

  const bool under_launcher = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK");
  if (under_launcher) {  // we are one rank of a job: become the rank program
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    return report_error("bench", errno_error("exec " + *prog));
  }
  // NCCL ranks bootstrap over PMIx, one GPU each: always this binary's own launcher.
  auto l =
      nccl ? dltune_run_prefix(o.ranks) : local_rank_launcher_or_threads("bench", o.ranks, &args);
  if (!l) return report_error("bench", l.error());
  std::vector<std::string> launch = std::move(*l);
  launch.insert(launch.end(), args.begin(), args.end());
  rc = run_to_completion(launch, "bench");
  if (!rc) return report_error("bench", rc.error());
  if (*rc != 0) {
    return report_error(
        "bench", peer_failed("the benchmark ranks failed (exit code " + std::to_string(*rc) + ")"));
  }
  return 0;
}

}  // namespace

void setup_bench(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand(
      "bench",
      "Measure the allreduce algorithms side by side (interleaved in time) with their lower "
      "bounds");
  cmd->add_option("--algo", opts->algo,
                  "Comma-separated algorithms (ring, rd, rabenseifner, tree, hier, shm, cma, "
                  "native) or 'all'; with --backend nccl, NCCL choices (nccl, nccl:ring/ll, "
                  "nccl:tree/simple, ...) or 'all'")
      ->capture_default_str();
  cmd->add_option("--backend", opts->backend,
                  "host: dltune's algorithms on host memory; nccl: NCCL's allreduce on GPU "
                  "memory, one rank per GPU")
      ->check(CLI::IsMember({"host", "nccl"}))
      ->capture_default_str();
  cmd->add_option("-n,--ranks", opts->ranks, "Number of ranks")->capture_default_str();
  cmd->add_option("--min-bytes", opts->min_bytes, "Smallest message (e.g. 4, 64KiB)")
      ->capture_default_str();
  cmd->add_option("--max-bytes", opts->max_bytes,
                  "Largest message (sizes double from the smallest)")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print JSON: {ranks, nodes, results[], bounds[]}");
  cmd->callback([opts, exit_code] { *exit_code = run_bench(*opts); });
}

}  // namespace dltune::cli
