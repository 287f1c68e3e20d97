// dltune-bench-rank: one rank of `dltune bench` (and of bench/allreduce). Run it under an MPI
// launcher (mpirun, `dltune run`), or with --threads N to use the in-process thread
// communicator. Rank 0 prints the table (or JSON) and, with --summary, bench/allreduce's
// comparison against the native MPI_Allreduce.
//
//   dltune-bench-rank [--backend host|nccl] [--algo LIST|all] [--min-bytes B] [--max-bytes B]
//                     [--rounds N] [--json] [--summary] [--threads N] [--check-args]
// --backend nccl measures ncclAllReduce on GPU memory for NCCL choices ("nccl",
// "nccl:ring/ll", ...; --algo all = default_nccl_choices()) as one rank of a PMIx job
// (`dltune run`); see comm/tools/bench_nccl.h. With --check-args it also checks for a device.
// Exit codes: 0 success, 1 failure, 2 bad arguments or (nccl) no device / no NCCL here.
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "comm/bench_sweep.h"
#include "comm/mpi_communicator.h"
#include "comm/thread_communicator.h"
#include "comm/tools/bench_nccl.h"
#include "common/strings.h"

namespace dltune::comm {
namespace {

struct Args {
  SweepOptions sweep;
  bool nccl = false;  // --backend nccl
  NcclBenchOptions nccl_bench;
  bool json = false;
  bool summary = false;
  bool check_only = false;
  int threads = 0;
};

Result<Args> parse_args(int argc, char** argv) {
  Args a;
  a.sweep.algorithms = all_algorithms();
  std::string algo = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> Result<std::string> {
      if (i + 1 >= argc) return invalid_input(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--json") {
      a.json = true;
    } else if (arg == "--summary") {
      a.summary = true;
    } else if (arg == "--check-args") {
      a.check_only = true;
    } else if (arg == "--algo") {
      auto v = value();
      if (!v) return v.error();
      algo = *v;
    } else if (arg == "--backend") {
      auto v = value();
      if (!v) return v.error();
      if (*v != "host" && *v != "nccl") {
        return invalid_input("--backend expects 'host' or 'nccl', got '" + *v + "'");
      }
      a.nccl = *v == "nccl";
    } else if (arg == "--min-bytes" || arg == "--max-bytes") {
      auto v = value();
      if (!v) return v.error();
      auto b = strings::parse_bytes(*v);
      if (!b) return b.error().wrap(arg);
      (arg == "--min-bytes" ? a.sweep.min_bytes : a.sweep.max_bytes) = *b;
    } else if (arg == "--rounds" || arg == "--threads") {
      auto v = value();
      if (!v) return v.error();
      auto n = strings::parse_int(*v);
      if (!n || *n < 1 || *n > 1000) {
        return invalid_input(arg + " expects an integer from 1 to 1000, got '" + *v + "'");
      }
      (arg == "--rounds" ? a.sweep.rounds : a.threads) = static_cast<int>(*n);
    } else {
      return invalid_input("unknown argument '" + arg + "'");
    }
  }
  if (a.nccl) {
    auto l = parse_nccl_choice_list(algo);
    if (!l) return l.error().wrap("--algo");
    a.nccl_bench.choices = *l;
    if (a.threads > 0) return invalid_input("--threads does not apply to --backend nccl");
  } else {
    auto l = parse_algorithm_list(algo);
    if (!l) return l.error().wrap("--algo");
    a.sweep.algorithms = *l;
  }
  if (a.sweep.min_bytes < 4 || a.sweep.max_bytes < a.sweep.min_bytes ||
      a.sweep.max_bytes > (size_t{1} << 30)) {
    return invalid_input("sizes must satisfy 4 B <= --min-bytes <= --max-bytes <= 1 GiB, got " +
                         strings::format_bytes(a.sweep.min_bytes) + " and " +
                         strings::format_bytes(a.sweep.max_bytes));
  }
  return a;
}

// bench/allreduce's comparison: native MPI_Allreduce against the best dltune algorithm.
void print_summary(const SweepReport& rep) {
  std::vector<Algorithm> ours;
  for (Algorithm x : all_algorithms()) {
    if (x != Algorithm::kNative) ours.push_back(x);
  }
  double min_ratio = 1e9, r32 = 0, r64 = 0, shm_frac = 1e9, alpha_ratio = 0, ab_ratio = 0;
  double xchg_ratio = 0, xchg_alpha = 0;  // small sizes: worst best / exchange, exchange / alpha
  size_t worst_at = 0, within_to = 0;     // the worst size against alpha; 1.1x alpha holds up to
  bool within = true;
  std::printf("\n%10s %12s %-13s %12s %14s %10s %10s %10s %10s %10s\n", "size", "native_us", "best",
              "best_us", "native/best", "membw_us", "best/alpha", "best/ab", "xchg_us",
              "best/xchg");
  for (const auto& b : rep.bounds) {
    const SweepPoint* native = rep.find(b.bytes, Algorithm::kNative);
    const SweepPoint* best = rep.best(b.bytes, ours);
    if (best == nullptr) continue;
    const double ratio = native ? SweepReport::paired_ratio(*native, *best) : 0;
    // Against this size's own ping-pong alpha and alpha-beta bound (measured interleaved).
    const double vs_alpha = b.pingpong_us > 0 ? best->median_us / b.pingpong_us : 0;
    const double vs_ab = b.alpha_beta_us > 0 ? best->median_us / b.alpha_beta_us : 0;
    const double vs_xchg = b.exchange_us > 0 ? best->median_us / b.exchange_us : 0;
    char xchg[2][16] = {"-", "-"};  // not measured at this size or rank count
    if (b.exchange_us > 0) {
      std::snprintf(xchg[0], sizeof xchg[0], "%.2f", b.exchange_us);
      std::snprintf(xchg[1], sizeof xchg[1], "%.2f", vs_xchg);
    }
    std::printf("%10s %12.2f %-13s %12.2f %14.3f %10.2f %10.2f %10.2f %10s %10s\n",
                strings::format_bytes(b.bytes).c_str(), native ? native->median_us : 0.0,
                std::string(algorithm_name(best->algo)).c_str(), best->median_us, ratio, b.membw_us,
                vs_alpha, vs_ab, xchg[0], xchg[1]);
    if (native && b.bytes <= (size_t{64} << 20)) min_ratio = std::min(min_ratio, ratio);
    if (b.bytes == (size_t{32} << 20)) r32 = ratio;
    if (b.bytes == (size_t{64} << 20)) r64 = ratio;
    if (b.bytes <= 2048 && b.pingpong_us > 0) {
      if (vs_alpha > alpha_ratio) worst_at = b.bytes;
      alpha_ratio = std::max(alpha_ratio, vs_alpha);
      ab_ratio = std::max(ab_ratio, vs_ab);
      xchg_ratio = std::max(xchg_ratio, vs_xchg);
      if (b.exchange_us > 0) xchg_alpha = std::max(xchg_alpha, b.exchange_us / b.pingpong_us);
      within = within && vs_alpha <= 1.1;
      if (within) within_to = b.bytes;
    }
    const SweepPoint* shm = rep.find(b.bytes, Algorithm::kShm);
    if (shm && b.bytes >= (size_t{16} << 20) && b.bytes <= (size_t{64} << 20)) {
      shm_frac = std::min(shm_frac, b.membw_us / shm->median_us);
    }
  }
  if (min_ratio > 1e8) min_ratio = 0;
  if (shm_frac > 1e8) shm_frac = 0;
  std::printf(
      "small messages (<= 2 KiB): worst best-algorithm latency / ping-pong alpha = %.3f (at %s); "
      "within 1.1x of alpha up to %s; worst / alpha-beta bound = %.3f\n",
      alpha_ratio, strings::format_bytes(worst_at).c_str(),
      within_to > 0 ? strings::format_bytes(within_to).c_str() : "no size", ab_ratio);
  if (xchg_ratio > 0) {
    std::printf(
        "small messages (<= 2 KiB): worst best-algorithm latency / line exchange = %.3f; "
        "the exchange alone reaches %.3fx alpha\n",
        xchg_ratio, xchg_alpha);
  }
  std::printf(
      "summary: min_ratio_vs_native=%.3f ratio_32MiB=%.3f ratio_64MiB=%.3f "
      "shm_bound_fraction_16_64MiB=%.3f\n",
      min_ratio, r32, r64, shm_frac);
}

int run(Communicator& comm, const Args& a) {
  auto rep = run_sweep(comm, a.sweep);
  if (!rep) {
    std::fprintf(stderr, "dltune bench: rank %d: %s\n", comm.rank(), rep.error().message().c_str());
    return rep.error().exit_code();
  }
  if (comm.rank() == 0) {
    std::fputs((a.json ? format_json(*rep) : format_table(*rep)).c_str(), stdout);
    if (a.summary) print_summary(*rep);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace dltune::comm

int main(int argc, char** argv) {
  using namespace dltune::comm;
  auto args = parse_args(argc, argv);
  if (!args) {
    std::fprintf(stderr, "dltune bench: %s\n", args.error().message().c_str());
    return 2;
  }
  if (args->nccl) {
    NcclBenchOptions o = args->nccl_bench;
    o.min_bytes = args->sweep.min_bytes, o.max_bytes = args->sweep.max_bytes;
    o.rounds = args->sweep.rounds, o.json = args->json;
    if (args->check_only) {
      dltune::Status s = check_nccl_device();
      if (!s) std::fprintf(stderr, "dltune bench: %s\n", s.error().message().c_str());
      return s.ok() ? 0 : s.error().exit_code();
    }
    return run_nccl_bench(o);
  }
  if (args->check_only) return 0;
  if (args->threads > 0) {
    int code = 0;
    dltune::Status s = spawn(args->threads, [&](Communicator& c) -> dltune::Status {
      int rc = run(c, *args);
      if (c.rank() == 0) code = rc;
      return dltune::ok_status();
    });
    return s.ok() ? code : 1;
  }
  int code = 1;
  {
    auto comm = create_mpi_world();
    if (!comm) {
      std::fprintf(stderr, "dltune bench: %s\n", comm.error().message().c_str());
      return comm.error().exit_code();
    }
    code = run(**comm, *args);
  }
  mpi_finalize();
  return code;
}
