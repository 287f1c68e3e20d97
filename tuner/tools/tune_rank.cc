// dltune-tune-rank: one rank of `dltune tune --collectives`. Run it under an MPI launcher
// (mpirun, `dltune run`), or with --threads N to run N ranks as threads of this process. All
// ranks tune together (tuner/collective_tuning.h); rank 0 writes the outcome as JSON to --out
// (or stdout).
//
//   dltune-tune-rank [--min-bytes B] [--max-bytes B] [--strategy model|exhaustive]
//                    [--budget SECONDS] [--deadline UNIX_S] [--verify] [--algo LIST]
//                    [--out FILE] [--progress FILE] [--threads N] [--check-args]
// --deadline: the search ends by this time (the launcher's clock: the ranks' start-up counts
// against its budget); the budget is what is left when the ranks start (the least any rank
// sees); when it ends before any size is measured, the outcome has no sizes (not an error).
// --progress: rank 0 appends one JSON object per comparison to FILE:
// {"event":"sweep","index":I,"count":N,"bytes":B,"algos":[...],"elapsed_s":T}.
// Exit codes: 0 success, 1 failure, 2 bad arguments.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/allreduce.h"
#include "comm/mpi_communicator.h"
#include "comm/process_memory.h"
#include "comm/thread_communicator.h"
#include "common/paths.h"
#include "common/strings.h"
#include "tuner/collective_tuning.h"

namespace dltune::tuner {
namespace {

struct Args {
  TuneOptions tune;
  std::string out, progress;
  double deadline = 0;
  bool check_only = false;
  int threads = 0;
};

Status parse_value(Args& a, const std::string& arg, const std::string& v) {
  if (arg == "--min-bytes" || arg == "--max-bytes") {
    auto b = strings::parse_bytes(v);
    if (!b) return b.error().wrap(arg);
    (arg == "--min-bytes" ? a.tune.min_bytes : a.tune.max_bytes) = *b;
  } else if (arg == "--strategy") {
    a.tune.strategy = v;
  } else if (arg == "--budget") {
    char* end = nullptr;
    const double s = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0' || !(s > 0) || s > 1e6) {
      return invalid_input("--budget expects a positive number of seconds, got '" + v + "'");
    }
    a.tune.source.budget_s = s;
  } else if (arg == "--algo") {
    a.tune.candidates = strings::split(v, ',');
    for (const std::string& c : a.tune.candidates) {
      auto p = parse_candidate(c);
      if (!p) return p.error().wrap("--algo");
    }
  } else if (arg == "--out") {
    a.out = v;
  } else if (arg == "--progress") {
    a.progress = v;
  } else if (arg == "--deadline") {
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != '\0' || !(d > 0)) {
      return invalid_input("--deadline expects seconds since the Unix epoch, got '" + v + "'");
    }
    a.deadline = d;
  } else if (arg == "--threads") {
    auto n = strings::parse_int(v);
    if (!n || *n < 1 || *n > 256) {
      return invalid_input("--threads expects 1 to 256, got '" + v + "'");
    }
    a.threads = static_cast<int>(*n);
  } else {
    return invalid_input("unknown argument '" + arg + "'");
  }
  return ok_status();
}

Result<Args> parse_args(int argc, char** argv) {
  Args a;
  a.tune.source.budget_s = 600;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--verify") {
      a.tune.verify = true;
    } else if (arg == "--check-args") {
      a.check_only = true;
    } else if (arg.rfind("--", 0) == 0 && arg != "--verify") {
      if (i + 1 >= argc) return invalid_input(arg + " needs a value");
      DLTUNE_TRY(parse_value(a, arg, argv[++i]));
    } else {
      return invalid_input("unknown argument '" + arg + "'");
    }
  }
  auto sizes = tuning_sizes(a.tune.min_bytes, a.tune.max_bytes);
  if (!sizes) return sizes.error();
  DLTUNE_TRY(check_strategy(a.tune.strategy));
  return a;
}

double since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int run(comm::Communicator& comm, const Args& args) {
  Args a = args;
  if (a.deadline > 0) {  // every rank the least budget any rank has left
    double left = -(a.deadline - since_epoch());
    if (Status s =
            comm::allreduce(comm, &left, &left, 1, comm::DataType::kF64, comm::ReduceOp::kMax, {});
        !s.ok()) {
      std::fprintf(stderr, "dltune tune: rank %d: %s\n", comm.rank(), s.error().message().c_str());
      return s.error().exit_code();
    }
    a.tune.source.budget_s = std::max(1e-3, -left);
  }
  std::FILE* progress = nullptr;
  if (comm.rank() == 0 && !a.progress.empty()) progress = std::fopen(a.progress.c_str(), "a");
  const auto t0 = std::chrono::steady_clock::now();
  if (progress != nullptr) {
    a.tune.on_measure = [&](uint64_t bytes, size_t index, size_t count,
                            const std::vector<std::string>& algos) {
      const nlohmann::json j = {
          {"event", "sweep"},
          {"index", index},
          {"count", count},
          {"bytes", bytes},
          {"algos", algos},
          {"elapsed_s",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
          {"budget_s", a.tune.source.budget_s}};
      std::fprintf(progress, "%s\n", j.dump().c_str());
      std::fflush(progress);
    };
  }
  auto out = tune_collectives(comm, a.tune);
  if (progress != nullptr) std::fclose(progress);
  if (!out && out.error().kind() == ErrorKind::kTimeout && a.deadline > 0) {
    // The deadline came before any size was measured (the ranks' start-up took the budget):
    // an outcome with no sizes, which the launcher reports and replaces with its defaults,
    // rather than a failed launch.
    TuningOutcome empty;
    empty.ranks = comm.size();
    empty.nodes = comm.node_count();
    empty.strategy = a.tune.strategy;
    empty.budget_exhausted = true;
    out = std::move(empty);
  }
  if (!out) {
    std::fprintf(stderr, "dltune tune: rank %d: %s\n", comm.rank(), out.error().message().c_str());
    return out.error().exit_code();
  }
  if (comm.rank() != 0) return 0;
  const std::string text = outcome_to_json(*out).dump(1) + "\n";
  if (a.out.empty()) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return 0;
  }
  if (Status s = paths::write_file_atomic(a.out, text); !s.ok()) {
    std::fprintf(stderr, "dltune tune: rank 0: writing the outcome: %s\n",
                 s.error().message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace dltune::tuner

int main(int argc, char** argv) {
  using namespace dltune;
  comm::keep_freed_memory();  // measure native as dltune-worker runs it (comm/process_memory.h)
  auto args = tuner::parse_args(argc, argv);
  if (!args) {
    std::fprintf(stderr, "dltune tune: %s\n", args.error().message().c_str());
    return 2;
  }
  if (args->check_only) return 0;
  if (args->threads > 0) {
    int code = 0;
    Status s = comm::spawn(args->threads, [&](comm::Communicator& c) -> Status {
      const int rc = tuner::run(c, *args);
      if (c.rank() == 0) code = rc;
      if (rc != 0) return peer_failed("rank " + std::to_string(c.rank()) + " failed");
      return ok_status();
    });
    return s.ok() ? 0 : (code != 0 ? code : 1);
  }
  int code = 1;
  {
    auto comm = comm::create_mpi_world();
    if (!comm) {
      std::fprintf(stderr, "dltune tune: %s\n", comm.error().message().c_str());
      return comm.error().exit_code();
    }
    code = tuner::run(**comm, *args);
  }
  comm::mpi_finalize();
  return code;
}
