// bench-engine-rank: one engine measurement, printed as one JSON line.
//
//   bench-engine-rank train MODEL BATCH RANKS SECONDS [ALGO [overlap|no-overlap]]
//                     [--threads T] [--precision fp32|bf16] [--select-kernels]
//       samples/s of RANKS ranks (threads over the ThreadCommunicator), weak scaling: BATCH per
//       rank; gradient buckets of 1 MiB reduced with ALGO (default: the engine's default, ring)
//       during backward unless no-overlap. Rank r's thread is bound to CPUs r*T .. r*T+T-1 (mod
//       the CPUs it may use), as `dltune run --bind core` binds rank processes, and trains on T
//       threads (engine/core/thread_pool.h) in the given precision; --select-kernels first
//       measures every node's kernels (engine/graph/kernel_select.h) on rank 0 and trains with
//       the fastest (the JSON line then carries "kernels": the report).
//   bench-engine-rank sgemm N                           OpenBLAS sgemm GFLOP/s, 1 thread
//   bench-engine-rank peak N                            one thread's fp32 and bf16 GEMM peaks:
//       OpenBLAS sgemm and oneDNN matmul (fp32, bf16: -1 where oneDNN has no bf16 kernel for
//       this CPU), GFLOP/s, and the CPU's features
// Driven by bench_engine.py, which interleaves it with PyTorch.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <cblas.h>
#include <nlohmann/json.hpp>
#include <sched.h>

#include "comm/allreduce.h"
#include "comm/thread_communicator.h"
#include "engine/core/blas_kernels.h"
#include "engine/core/cpu_features.h"
#include "engine/graph/kernel_select.h"
#include "engine/ops/onednn.h"
#include "engine/train/train_data.h"
#include "engine/train/trainer.h"
#include "topology/topology.h"

using namespace dltune;
using namespace dltune::engine;
using Clock = std::chrono::steady_clock;

static double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Binds the calling thread to CPUs rank*threads .. rank*threads + threads - 1 of those this
// process may use (mod their number): its threads, the trainer's pool and communication thread,
// start inside that mask. Returns false when the system refuses.
static bool bind_to_cpus(int rank, int threads) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  if (cpus.empty()) return false;
  std::vector<int> mine;
  for (int t = 0; t < threads; ++t)
    mine.push_back(cpus[static_cast<size_t>(rank * threads + t) % cpus.size()]);
  return topology::set_affinity(0, mine).ok();
}

static int peak(int n) {
  Buffer a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] = 0.001f * (i % 97);
  std::vector<double> rates;
  auto t = Clock::now();
  while (since(t) < 1.0 || rates.size() < 3) {
    auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a.data(), n, b.data(), n, 0,
                c.data(), n);
    rates.push_back(2.0 * n * n * double(n) / since(t0) / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  const double blas = rates[rates.size() / 2];
  const double f32 = onednn_matmul_gflops(n, Precision::kFp32, 1.0);
  const double bf16 = onednn_matmul_gflops(n, Precision::kBf16, 1.0);
  std::printf("%s\n", nlohmann::json{{"n", n},
                                     {"openblas_sgemm_gflops", blas},
                                     {"onednn_f32_gflops", f32},
                                     {"onednn_bf16_gflops", bf16},
                                     {"fp32_peak_gflops", std::max(blas, f32)},
                                     {"bf16_peak_gflops", bf16 > 0 ? bf16 : std::max(blas, f32)},
                                     {"bf16_hardware", cpu_features().bf16_hardware()},
                                     {"cpu", cpu_features().describe()},
                                     {"onednn", onednn_version()}}
                          .dump()
                          .c_str());
  return 0;
}

static int sgemm(int n) {
  Buffer a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] = 0.001f * (i % 97);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a.data(), n, b.data(), n, 0,
              c.data(), n);
  int reps = 0;
  auto t = Clock::now();
  while (since(t) < 1.0 || reps < 3) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a.data(), n, b.data(), n, 0,
                c.data(), n);
    ++reps;
  }
  double gf = 2.0 * n * n * double(n) * reps / since(t) / 1e9;
  std::printf("%s\n", nlohmann::json{{"sgemm_gflops", gf}, {"n", n}}.dump().c_str());
  return 0;
}

// The training of `bench-engine-rank train MODEL BATCH RANKS SECONDS [ALGO [overlap|no-overlap]]`
// (argv as main() has it after the options): weak scaling, 1 MiB buckets, each model's data as
// bench_engine.py's recipes give it.
static TrainConfig bench_config(int argc, char** argv, int threads, const std::string& precision) {
  TrainConfig c;
  c.threads = threads;
  c.precision = precision;
  c.model = argv[2];
  c.scaling = Scaling::kWeak;
  c.per_rank_batch = std::atoi(argv[3]);
  c.train_size = 4096;
  c.heldout_size = 0;
  c.bucket_bytes = 1 << 20;
  if (argc >= 7) c.algorithms = {AlgorithmRange{UINT64_MAX, *comm::parse_algorithm(argv[6])}};
  if (argc == 8) c.overlap = std::string(argv[7]) == "overlap";
  // Data of the model's shape, as bench_engine.py's recipes give it.
  if (c.model == "resnet20") c.data = "synthetic-cifar";
  if (c.model == "resnet18") {
    c.data = "synthetic-imagenet";
    c.input = {3, 64, 64};
    c.classes = 10;
    c.train_size = 1024;
  }
  if (c.model == "gpt-tiny") {
    c.data = "text:/usr/share/common-licenses/GPL-3";
    c.optimizer = "adamw";
    c.lr = 1e-3;
    c.weight_decay = 0.1;
  }
  return c;
}

// --select-kernels: rank 0's measurement of every node's kernels, on its threads, into
// c->kernels (the choices every rank then runs) and `report` (the JSON line's "kernels").
static Status choose_kernels(TrainConfig* c, const Dataset& data, int threads,
                             nlohmann::json* report) {
  if (!bind_to_cpus(0, threads)) std::fprintf(stderr, "bench-engine-rank: cannot bind\n");
  auto t = Trainer::create(*c, nullptr, data, nullptr);
  if (!t) return t.error();
  KernelSelectOptions ko;
  ko.batch = c->per_rank_batch;
  ko.repeats = 5;
  auto chosen = select_kernels((*t)->model(), ko);
  if (!chosen) return chosen.error();
  c->kernels = choices_of(*chosen);
  *report = kernel_report_json(*chosen);
  return ok_status();
}

int main(int argc, char** argv) {
  use_native_blas_kernels(argv);  // as dltune-worker does (engine/core/blas_kernels.h)
  set_blas_threads(1);
  if (argc == 3 && std::string(argv[1]) == "sgemm") return sgemm(std::atoi(argv[2]));
  if (argc == 3 && std::string(argv[1]) == "peak") return peak(std::atoi(argv[2]));
  // The options after the positional arguments.
  int threads = 1;
  std::string precision = "fp32";
  bool select = false;
  std::vector<char*> pos;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--precision" && i + 1 < argc) {
      precision = argv[++i];
    } else if (a == "--select-kernels") {
      select = true;
    } else {
      pos.push_back(argv[i]);
    }
  }
  argc = static_cast<int>(pos.size());
  argv = pos.data();
  if (argc < 6 || argc > 8 || std::string(argv[1]) != "train" || threads < 1) {
    std::fprintf(
        stderr,
        "usage: bench-engine-rank train MODEL BATCH RANKS SECONDS [ALGO [overlap|no-overlap]]"
        " [--threads T] [--precision fp32|bf16] [--select-kernels] | sgemm N | peak N\n");
    return 2;
  }
  TrainConfig c = bench_config(argc, argv, threads, precision);
  const int ranks = std::atoi(argv[4]);
  const double seconds = std::atof(argv[5]);
  Dataset data;
  if (Status loaded = load_train_data(c, &data, nullptr); !loaded) {
    std::fprintf(stderr, "bench-engine-rank: %s\n", loaded.error().message().c_str());
    return 1;
  }
  double sps = 0.0, flops = 0.0, compute_ms = 0.0, exposed_ms = 0.0;
  nlohmann::json kernels = nlohmann::json::array();
  if (select) {
    if (Status chosen = choose_kernels(&c, data, threads, &kernels); !chosen) {
      std::fprintf(stderr, "bench-engine-rank: %s\n", chosen.error().message().c_str());
      return 1;
    }
  }
  std::mutex mu;
  Status st = comm::spawn(ranks, [&](comm::Communicator& comm) -> Status {
    if (!bind_to_cpus(comm.rank(), threads))
      std::fprintf(stderr, "bench-engine-rank: cannot bind\n");
    auto t = Trainer::create(c, ranks > 1 ? &comm : nullptr, data, nullptr);
    if (!t) return t.error();
    // Fixed step counts for every rank: measure a probe on each, then agree on rank 0's.
    for (int i = 0; i < 3; ++i) DLTUNE_TRY((*t)->step(false));
    auto probe = Clock::now();
    for (int i = 0; i < 5; ++i) DLTUNE_TRY((*t)->step(false));
    int32_t steps = static_cast<int32_t>(seconds / (since(probe) / 5)) + 1;
    if (ranks > 1) {
      comm::BroadcastOptions bo;
      DLTUNE_TRY(comm::broadcast(comm, &steps, sizeof steps, bo));
    }
    auto start = Clock::now();
    double compute = 0, exposed = 0;
    for (int i = 0; i < steps; ++i) {
      DLTUNE_TRY((*t)->step(false));
      compute += (*t)->last().compute_s;
      exposed += (*t)->last().comm_s;
    }
    double r = steps * double((*t)->last().batch) / since(start);
    std::lock_guard<std::mutex> lock(mu);
    if (comm.rank() == 0) {
      sps = r;
      compute_ms = 1e3 * compute / steps;
      exposed_ms = 1e3 * exposed / steps;
      flops = 3.0 * (*t)->model().forward_flops_per_sample();
    }
    return ok_status();
  });
  if (!st) {
    std::fprintf(stderr, "bench-engine-rank: %s\n", st.error().message().c_str());
    return 1;
  }
  nlohmann::json out = {{"model", c.model},
                        {"batch", c.per_rank_batch},
                        {"ranks", ranks},
                        {"threads", threads},
                        {"precision", precision},
                        {"samples_per_s", sps},
                        {"compute_ms_per_step", compute_ms},
                        {"exposed_comm_ms_per_step", exposed_ms},
                        {"flops_per_sample", flops},
                        {"gflops", sps * flops / 1e9}};
  if (select) out["kernels"] = kernels;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
