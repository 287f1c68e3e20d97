// dltune-bench-rank: one rank of `dltune bench` (and of bench/allreduce). Run it under an MPI
// launcher (mpirun, `dltune run`), or with --threads N to use the in-process thread
// communicator. Rank 0 prints the table (or JSON) and, with --summary, bench/allreduce's
// comparison against the native MPI_Allreduce.
//
//   dltune-bench-rank [--backend host|nccl] [--algo LIST|all] [--min-bytes B] [--max-bytes B]
//                     [--rounds N] [--json] [--summary] [--threads N] [--check-args]
//                     [--private] [--malloc dltune|default]
// --private also measures every algorithm on a private buffer (comm/bench_sweep.h). --malloc:
// the rank's glibc malloc settings: `dltune` (the default) those of dltune's own rank programs
// (comm::keep_freed_memory(), so that native's per-call temporaries are measured as the tuner
// and the engine see them), `default` glibc's own, as an ordinary MPI program runs.
// --backend nccl measures ncclAllReduce on GPU memory for NCCL choices ("nccl",
// "nccl:ring/ll", ...; --algo all = default_nccl_choices()) as one rank of a PMIx job
// (`dltune run`); see comm/tools/bench_nccl.h. With --check-args it also checks for a device.
// Exit codes: 0 success, 1 failure, 2 bad arguments or (nccl) no device / no NCCL here.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm/bench_sweep.h"
#include "comm/mpi_communicator.h"
#include "comm/process_memory.h"
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
  bool default_malloc = false;  // --malloc default
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
    } else if (arg == "--private") {
      a.sweep.private_buffers = true;
    } else if (arg == "--malloc") {
      auto v = value();
      if (!v) return v.error();
      if (*v != "dltune" && *v != "default") {
        return invalid_input("--malloc expects 'dltune' or 'default', got '" + *v + "'");
      }
      a.default_malloc = *v == "default";
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

// The ratio figures of bench/allreduce's summary over sizes up to 64 MiB: native time over the
// best dltune time, paired per round, with native and dltune on the buffers given.
struct Ratios {
  double min = 0, r32 = 0, r64 = 0;
};

// The fastest (by median) of `among` at `bytes` on any of `buffers`.
const SweepPoint* best_on(const SweepReport& rep, size_t bytes, const std::vector<Algorithm>& among,
                          std::initializer_list<Buffer> buffers) {
  const SweepPoint* b = nullptr;
  for (Buffer buf : buffers) {
    const SweepPoint* p = rep.best(bytes, among, buf);
    if (p != nullptr && (b == nullptr || p->median_us < b->median_us)) b = p;
  }
  return b;
}

// The user's own buffer: private, and (where measured) the same registered once. Native and
// dltune each take the faster of the two per size.
constexpr std::initializer_list<Buffer> kUsersBuffer = {Buffer::kPrivate, Buffer::kRegistered};

Ratios ratios(const SweepReport& rep, const std::vector<Algorithm>& ours,
              std::initializer_list<Buffer> native_buffers,
              std::initializer_list<Buffer> our_buffers) {
  Ratios r;
  double lo = 1e9;
  for (const auto& b : rep.bounds) {
    const SweepPoint* native = best_on(rep, b.bytes, {Algorithm::kNative}, native_buffers);
    const SweepPoint* best = best_on(rep, b.bytes, ours, our_buffers);
    if (native == nullptr || best == nullptr) continue;
    const double x = SweepReport::paired_ratio(*native, *best);
    if (b.bytes <= (size_t{64} << 20)) lo = std::min(lo, x);
    if (b.bytes == (size_t{32} << 20)) r.r32 = x;
    if (b.bytes == (size_t{64} << 20)) r.r64 = x;
  }
  r.min = lo > 1e8 ? 0 : lo;
  return r;
}

// The first table: native against dltune's best per size, native and dltune on `mine` (like
// with like), then dltune on its node-shared buffer.
void print_native_table(const SweepReport& rep, const std::vector<Algorithm>& ours,
                        std::initializer_list<Buffer> mine, bool have_private) {
  std::printf(
      "\nnative against dltune's best, native on %s; like with like: dltune on the same "
      "buffer%s; design choice: dltune on its node-shared buffer (paired ratios, > 1: dltune "
      "faster)\n",
      have_private ? "the user's private buffer" : "the shared buffer",
      have_private ? " (each side on the faster of the buffer as allocated and the buffer "
                     "registered, '(reg)')"
                   : "");
  std::printf("%10s %12s %-13s %12s %11s %-13s %12s %11s\n", "size", "native_us", "best (same)",
              "best_us", "native/best", "best (shared)", "shared_us", "native/best");
  for (const auto& b : rep.bounds) {
    const SweepPoint* native = best_on(rep, b.bytes, {Algorithm::kNative}, mine);
    const SweepPoint* same = best_on(rep, b.bytes, ours, mine);
    const SweepPoint* shared = rep.best(b.bytes, ours, Buffer::kShared);
    if (native == nullptr || same == nullptr || shared == nullptr) continue;
    const std::string same_name = std::string(algorithm_name(same->algo)) +
                                  (same->buffer == Buffer::kRegistered ? " (reg)" : "");
    std::printf("%10s %12.2f %-13s %12.2f %11.3f %-13s %12.2f %11.3f\n",
                strings::format_bytes(b.bytes).c_str(), native->median_us, same_name.c_str(),
                same->median_us, SweepReport::paired_ratio(*native, *same),
                std::string(algorithm_name(shared->algo)).c_str(), shared->median_us,
                SweepReport::paired_ratio(*native, *shared));
  }
}

// The best algorithm's time at one size against that size's own bounds (measured interleaved):
// ping-pong alpha, the alpha-beta bound, the line exchange; 0 where not measured.
struct VersusBounds {
  double alpha = 0, ab = 0, xchg = 0;
};
VersusBounds versus_bounds(const SweepBound& b, const SweepPoint& best) {
  return {b.pingpong_us > 0 ? best.median_us / b.pingpong_us : 0,
          b.alpha_beta_us > 0 ? best.median_us / b.alpha_beta_us : 0,
          b.exchange_us > 0 ? best.median_us / b.exchange_us : 0};
}

// One row of the bounds table: the best algorithm at b.bytes against the bounds; `shm` (may
// be null) against the traffic bound and the old copy figure.
void print_bound_row(const SweepBound& b, const SweepPoint& best, const SweepPoint* shm) {
  const VersusBounds vs = versus_bounds(b, best);
  char fr[2][16] = {"-", "-"};
  char xchg[16] = "-";  // not measured at this size or rank count
  if (shm) {
    std::snprintf(fr[0], sizeof fr[0], "%.3f", b.membw_us / shm->median_us);
    std::snprintf(fr[1], sizeof fr[1], "%.3f", b.copy_us / shm->median_us);
  }
  if (b.exchange_us > 0) std::snprintf(xchg, sizeof xchg, "%.2f", vs.xchg);
  const double gbs =
      b.membw_us > 0 ? static_cast<double>(b.read_bytes + b.write_bytes) / b.membw_us / 1e3 : 0;
  std::printf("%10s %-13s %10.2f %10zu %10zu %10.2f %7.2f %-7s %10.2f %9s %9s %10.2f %10.2f %10s\n",
              strings::format_bytes(b.bytes).c_str(),
              std::string(algorithm_name(best.algo)).c_str(), best.median_us, b.read_bytes,
              b.write_bytes, b.membw_us, gbs, b.in_cache ? "in LLC" : "memory", b.copy_us, fr[0],
              fr[1], vs.alpha, vs.ab, xchg);
}

// The worst figures over the sizes, for the summary lines under the bounds table.
struct BoundFigures {
  double shm_frac = 1e9, copy_frac = 1e9, alpha_ratio = 0, ab_ratio = 0;
  double xchg_ratio = 0, xchg_alpha = 0;  // small sizes: worst best / exchange, exchange / alpha
  size_t worst_at = 0, within_to = 0;     // the worst size against alpha; 1.1x alpha holds up to
  bool within = true;

  // Takes one size in: small sizes (<= 2 KiB) against the latency bounds, 16-64 MiB's shm
  // (may be null) against the traffic bound.
  void add(const SweepBound& b, const SweepPoint& best, const SweepPoint* shm) {
    const VersusBounds vs = versus_bounds(b, best);
    if (b.bytes <= 2048 && b.pingpong_us > 0) {
      if (vs.alpha > alpha_ratio) worst_at = b.bytes;
      alpha_ratio = std::max(alpha_ratio, vs.alpha);
      ab_ratio = std::max(ab_ratio, vs.ab);
      xchg_ratio = std::max(xchg_ratio, vs.xchg);
      if (b.exchange_us > 0) xchg_alpha = std::max(xchg_alpha, b.exchange_us / b.pingpong_us);
      within = within && vs.alpha <= 1.1;
      if (within) within_to = b.bytes;
    }
    if (shm && b.bytes >= (size_t{16} << 20) && b.bytes <= (size_t{64} << 20)) {
      shm_frac = std::min(shm_frac, b.membw_us / shm->median_us);
      copy_frac = std::min(copy_frac, b.copy_us / shm->median_us);
    }
  }
};

// The bounds table (dltune on its shared buffer), one row a size; returns its worst figures
// (shm_frac and copy_frac 0 where no size had them).
BoundFigures print_bounds_table(const SweepReport& rep, const std::vector<Algorithm>& ours) {
  BoundFigures f;
  std::printf(
      "\nbounds (dltune on its shared buffer): membw = each rank reading and writing its "
      "share, R and W bytes per rank, alone (GB/s: (R + W) / membw per rank; 'in LLC': every "
      "rank's buffer fits the last-level cache the CPU reports, which a VM may overstate: where "
      "GB/s stays at memory speed the data did not sit in cache); copy = the old figure, no "
      "bound\n");
  std::printf("%10s %-13s %10s %10s %10s %10s %7s %-7s %10s %9s %9s %10s %10s %10s\n", "size",
              "best", "best_us", "R_bytes", "W_bytes", "membw_us", "GB/s", "cache", "copy_us",
              "shm/membw", "shm/copy", "best/alpha", "best/ab", "best/xchg");
  for (const auto& b : rep.bounds) {
    const SweepPoint* best = rep.best(b.bytes, ours);
    if (best == nullptr) continue;
    const SweepPoint* shm = rep.find(b.bytes, Algorithm::kShm);
    print_bound_row(b, *best, shm);
    f.add(b, *best, shm);
  }
  if (f.shm_frac > 1e8) f.shm_frac = 0;
  if (f.copy_frac > 1e8) f.copy_frac = 0;
  return f;
}

// bench/allreduce's comparison: native MPI_Allreduce against the best dltune algorithm, like
// with like (both on a private buffer, when measured) and dltune on its node-shared buffer;
// then the bounds.
void print_summary(const SweepReport& rep) {
  std::vector<Algorithm> ours;
  for (Algorithm x : all_algorithms()) {
    if (x != Algorithm::kNative) ours.push_back(x);
  }
  const bool have_private = !rep.results.empty() &&
                            std::any_of(rep.results.begin(), rep.results.end(),
                                        [](const auto& p) { return p.buffer == Buffer::kPrivate; });
  const Buffer mine = have_private ? Buffer::kPrivate : Buffer::kShared;
  if (have_private) {
    print_native_table(rep, ours, kUsersBuffer, true);
  } else {
    print_native_table(rep, ours, {Buffer::kShared}, false);
  }
  const BoundFigures f = print_bounds_table(rep, ours);
  std::printf(
      "small messages (<= 2 KiB): worst best-algorithm latency / ping-pong alpha = %.3f (at %s); "
      "within 1.1x of alpha up to %s; worst / alpha-beta bound = %.3f\n",
      f.alpha_ratio, strings::format_bytes(f.worst_at).c_str(),
      f.within_to > 0 ? strings::format_bytes(f.within_to).c_str() : "no size", f.ab_ratio);
  if (f.xchg_ratio > 0) {
    std::printf(
        "small messages (<= 2 KiB): worst best-algorithm latency / line exchange = %.3f; "
        "the exchange alone reaches %.3fx alpha\n",
        f.xchg_ratio, f.xchg_alpha);
  }
  const bool have_registered =
      std::any_of(rep.results.begin(), rep.results.end(),
                  [](const auto& p) { return p.buffer == Buffer::kRegistered; });
  const Ratios fair = have_private ? ratios(rep, ours, kUsersBuffer, kUsersBuffer)
                                   : ratios(rep, ours, {mine}, {mine});
  const Ratios unregistered = ratios(rep, ours, {mine}, {mine});
  const Ratios shared = ratios(rep, ours, {mine}, {Buffer::kShared});
  std::printf(
      "16-64 MiB: shm reaches %.3f of the traffic bound (worst size); against the old copy "
      "figure it read %.3f\n",
      f.shm_frac, f.copy_frac);
  if (have_registered) {
    std::printf(
        "native / best dltune, like with like (the user's buffer, each side on the faster of "
        "private and registered): min %.3f, 32 MiB %.3f, 64 MiB %.3f; never registered: min "
        "%.3f, 32 MiB %.3f, 64 MiB %.3f\n",
        fair.min, fair.r32, fair.r64, unregistered.min, unregistered.r32, unregistered.r64);
  } else {
    std::printf("native / best dltune, like with like: min %.3f, 32 MiB %.3f, 64 MiB %.3f\n",
                fair.min, fair.r32, fair.r64);
  }
  std::printf(
      "native / best dltune with dltune on its node-shared buffer: min %.3f, 32 MiB %.3f, 64 MiB "
      "%.3f\n",
      shared.min, shared.r32, shared.r64);
  std::printf(
      "summary: min_ratio_vs_native=%.3f ratio_32MiB=%.3f ratio_64MiB=%.3f "
      "shm_bound_fraction_16_64MiB=%.3f min_ratio_vs_native_shared_buffer=%.3f "
      "ratio_32MiB_shared_buffer=%.3f ratio_64MiB_shared_buffer=%.3f",
      fair.min, fair.r32, fair.r64, f.shm_frac, shared.min, shared.r32, shared.r64);
  if (have_registered) {
    std::printf(
        " min_ratio_vs_native_unregistered=%.3f ratio_32MiB_unregistered=%.3f "
        "ratio_64MiB_unregistered=%.3f",
        unregistered.min, unregistered.r32, unregistered.r64);
  }
  std::printf("\n");
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
  // Before any other thread exists (MPI's, the thread communicator's).
  if (!args->default_malloc && !keep_freed_memory()) {
    std::fprintf(stderr,
                 "dltune bench: glibc refused the malloc settings; native is measured "
                 "with glibc's defaults\n");
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
