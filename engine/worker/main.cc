// dltune-worker: the rank program the launcher starts (also runs by hand as a single rank).
//
//   dltune-worker train [--plan CONFIG.json] [--model M] [--data SRC] [--steps N] ...
//
// The plan is a TrainConfig JSON (engine/train_config.h); without --plan, the job's plan blob
// (PMIx job data from `dltune run --plan`, or the file DLTUNE_PLAN names) is used when there is
// one, else the defaults. Command line options override plan values. Under a launcher (Open
// MPI / PMIx / Slurm environment) the ranks talk over the MPI communicator, or, with device gpu
// in a build with NCCL, over NCCL (bootstrapped through PMIx; the plan's last algorithm range
// picks the NCCL options when it names one: "nccl", "nccl:ring/ll"); by hand it is rank 0 of 1 with
// no communication. Rank 0 prints a one-line JSON summary on stdout at the end. Exit: 0 success, 1
// training or communication failure, 2 bad input; 130 / 143 when SIGINT / SIGTERM stopped training
// (every rank finishes the same step and the checkpoint, when set, is saved first).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "comm/allreduce.h"
#include "comm/bootstrap/bootstrap.h"
#include "comm/mpi_communicator.h"
#include "comm/nccl_communicator.h"
#include "comm/process_memory.h"
#include "common/env.h"
#include "common/log.h"
#include "common/paths.h"
#include "engine/core/blas_kernels.h"
#include "engine/train/rank_memory.h"
#include "engine/train/train_data.h"
#include "engine/train/trainer.h"
#include "engine/train/training_memory.h"
#include "engine/worker/forward.h"
#include "engine/worker/profile.h"
#include "engine/worker/trial.h"

namespace dltune::engine {
namespace {

// The signal that asked training to stop (0 = none); set by the handler, read by the trainer.
std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

struct Options {
  std::string plan, model, data, metrics, checkpoint, resume, summary;
  int64_t steps = -1, global_batch = -1, per_rank_batch = -1, threads = -1;
  std::string scaling, device;
  bool no_overlap = false;
};

// `boot`: the job's PMIx bootstrap when launched as a rank (its plan blob is the plan when
// --plan is not given), else null.
Result<TrainConfig> load_config(const Options& o, const comm::Bootstrap* boot) {
  TrainConfig c;
  std::string text;
  std::string source = o.plan;
  if (!o.plan.empty()) {
    auto t = paths::read_file(o.plan);
    if (!t) return not_found("plan file: " + t.error().message());
    text = *t;
  } else if (boot != nullptr) {  // the launcher's plan (PMIx job data), else DLTUNE_PLAN's file
    auto t = boot->plan_blob();
    if (!t) return t.error().wrap("reading the job's plan");
    text = *t;
    source = "the job's plan";
  } else if (auto p = env::get_if_set(env::kPlan)) {
    auto t = paths::read_file(*p);
    if (!t) return t.error().wrap("reading DLTUNE_PLAN");
    text = *t;
  }
  if (!text.empty()) {
    auto parsed = parse_train_config(text);
    if (!parsed)
      return parsed.error().wrap("plan '" + (source.empty() ? "DLTUNE_PLAN" : source) + "'");
    c = *parsed;
  }
  if (!o.model.empty()) c.model = o.model;
  if (!o.data.empty()) c.data = o.data;
  if (!o.metrics.empty()) c.metrics_path = o.metrics;
  if (!o.checkpoint.empty()) c.checkpoint_path = o.checkpoint;
  if (o.steps >= 0) c.steps = o.steps;
  if (o.global_batch > 0) c.global_batch = static_cast<int>(o.global_batch);
  if (o.per_rank_batch > 0) c.per_rank_batch = static_cast<int>(o.per_rank_batch);
  if (o.threads > 0) c.threads = static_cast<int>(o.threads);
  if (o.scaling == "weak") c.scaling = Scaling::kWeak;
  if (o.scaling == "strong") c.scaling = Scaling::kStrong;
  if (o.no_overlap) c.overlap = false;
  if (!o.device.empty()) c.device = o.device;
  DLTUNE_TRY(validate(c));
  return c;
}

// Every rank's estimated and measured training memory (collective over `world`): the memory
// model's terms for its stage against `peak`, this rank's MemoryBaseline::peak_bytes() (its
// resident peak above the baseline taken with the data loaded; -1: nothing is measured). On
// rank 0:
//   {"ranks": [{"rank", "stage", "estimate_bytes", "measured_bytes", "error"}], "max_error",
//    "measured": what was measured}
// where error = |estimate - measured| / measured. On the GPU the training memory is on the
// device: the measurement is the peak of the engine's device buffers (gpu::device_peak_bytes,
// reset before the trainer was built), rank 0's only (the world communicator is NCCL's, which
// reduces device memory; every GPU rank runs the same data-parallel layout).
Result<nlohmann::json> memory_report(const TrainConfig& cfg, comm::Communicator* world,
                                     int64_t my_peak) {
  const int ranks = world ? world->size() : 1, rank = world ? world->rank() : 0;
  const bool gpu = cfg.device == "gpu";
  const bool measured = gpu || my_peak >= 0;
  std::vector<double> peak(static_cast<size_t>(ranks), 0.0);
  if (measured) peak[static_cast<size_t>(rank)] = static_cast<double>(my_peak);
  if (measured && !gpu) {
    if (world && ranks > 1)  // host memory: the communicator is MPI's here, never NCCL's
      DLTUNE_TRY_CTX(comm::allreduce(*world, peak.data(), peak.data(), peak.size(),
                                     comm::DataType::kF64, comm::ReduceOp::kSum, {}),
                     std::string("gathering the ranks' memory"));
  }
  nlohmann::json out = {{"ranks", nlohmann::json::array()}};
  double worst = 0;
  for (int r = 0; r < ranks; ++r) {
    auto est = rank_memory(cfg, ranks, r);
    if (!est) return est.error().wrap("estimating the training memory");
    const auto e = static_cast<double>(est->total());
    const double m = peak[static_cast<size_t>(r)];
    nlohmann::json row = {{"rank", r},
                          {"stage", r % cfg.stages},
                          {"estimate_bytes", est->total()},
                          {"terms", planning::memory_json(*est)}};
    if (m > 0) {
      row["measured_bytes"] = static_cast<int64_t>(m);
      row["error"] = std::abs(e - m) / m;
      worst = std::max(worst, std::abs(e - m) / m);
    }
    out["ranks"].push_back(std::move(row));
  }
  if (measured) {
    out["max_error"] = worst;
    out["measured"] = gpu ? "peak of the engine's GPU buffers (rank 0)" : "resident set peak";
  }
  return out;
}

Status train(const Options& o) {
  // Under a launcher the bootstrap comes first: it carries the plan. It outlives the
  // communicators (NCCL's exchanges its id through it; Open MPI's PMIx client shares the
  // library's reference-counted initialisation).
  std::unique_ptr<comm::Bootstrap> boot;
  if (comm::launched_as_rank()) {
    auto b = comm::Bootstrap::init();
    if (!b) return b.error().wrap("joining the job");
    boot = std::make_unique<comm::Bootstrap>(std::move(*b));
  }
  auto cfg = load_config(o, boot.get());
  if (!cfg) return cfg.error();
  set_blas_threads(cfg->threads);
  std::unique_ptr<comm::Communicator> world;
  if (boot && cfg->device == "gpu" && comm::nccl_available()) {
    const std::string& choice = cfg->algorithms.back().algorithm;
    auto opts = comm::parse_nccl_choice(choice.rfind("nccl", 0) == 0 ? choice : "nccl");
    if (!opts) return opts.error().wrap("train config: key 'algorithms'");
    auto nccl = comm::NcclCommunicator::create(*boot, 0, *opts);
    if (!nccl) return nccl.error().wrap("starting the NCCL communicator");
    world = std::move(*nccl);
  } else if (boot && comm::mpi_available()) {
    auto w = comm::create_mpi_world();
    if (!w) return w.error().wrap("starting the MPI communicator");
    world = std::move(*w);
  }
  // Start-up can take a while (generating ImageNet-sized samples, building AlexNet): rank 0
  // says what it is doing in the metrics file, where the launcher shows it.
  const bool leader = world == nullptr || world->rank() == 0;
  auto say = [&](const std::string& text) {
    if (!leader || cfg->metrics_path.empty()) return;
    auto w = MetricsWriter::open(cfg->metrics_path);
    if (w) w->write(nlohmann::json{{"event", "status"}, {"text", text}}.dump());
  };
  say(cfg->data.starts_with("synthetic")
          ? "generating " + std::to_string(cfg->train_size) + " " + cfg->data + " samples"
          : "reading the " + cfg->data + " data");
  Dataset train_data, heldout;
  DLTUNE_TRY(load_train_data(*cfg, &train_data, &heldout));
  // The training's own memory: the peak above what the process held with its data loaded.
  const MemoryBaseline memory_base = MemoryBaseline::take(/*trim=*/false);
  say("building " + cfg->model + " and its optimizer");
  auto trainer = Trainer::create(*cfg, world.get(), train_data, &heldout);
  if (!trainer) return trainer.error();
  say("running the first step (not timed: it warms the caches)");
  if (!o.resume.empty()) DLTUNE_TRY((*trainer)->resume(o.resume));
  auto metrics = MetricsWriter::open((*trainer)->rank() == 0 ? cfg->metrics_path : "");
  if (!metrics) return metrics.error();
  install_stop_handlers();
  (*trainer)->set_stop_source(&g_stop_signal);
  auto sum = (*trainer)->run(*metrics);
  if (!sum) {
    // Every rank stops at the same diverged step with the same error: rank 0 alone says it.
    if ((*trainer)->diverged() && (*trainer)->rank() != 0) return Error(sum.error().kind(), "");
    return sum.error();
  }
  const int stop_signal = (*trainer)->stop_code();  // agreed over the ranks
  auto memory = memory_report(*cfg, world.get(), memory_base.peak_bytes(**trainer));
  if (!memory) return memory.error();
  if ((*trainer)->rank() == 0) {
    nlohmann::json j = {{"model", cfg->model},
                        {"ranks", (*trainer)->ranks()},
                        {"steps", sum->steps},
                        {"steps_run", sum->steps_run},
                        {"timed_steps", sum->timed_steps},
                        {"global_batch", cfg->global_batch_for((*trainer)->ranks())},
                        {"throughput_sps", sum->samples_per_s},
                        {"final_loss", sum->final_loss},
                        {"heldout_accuracy", sum->heldout_accuracy},
                        {"heldout_loss", sum->heldout_loss},
                        {"compute_s", sum->compute_s},
                        {"comm_s", sum->comm_s},
                        {"wall_seconds", sum->wall_s},
                        {"memory", *memory}};
    if (o.summary.empty()) {
      std::printf("%s\n", j.dump().c_str());
    } else {
      DLTUNE_TRY_CTX(paths::write_file_atomic(o.summary, j.dump() + "\n"), "--summary");
    }
  }
  trainer->reset();
  world.reset();
  boot.reset();
  comm::mpi_finalize();
  // Stopped by a signal: after the checkpoint and an orderly shutdown, exit as the shell
  // reports a process ended by that signal (main() only maps errors to exit codes).
  if (sum->stopped) std::exit(128 + stop_signal);
  return ok_status();
}

}  // namespace
}  // namespace dltune::engine

int main(int argc, char** argv) {
  dltune::engine::use_native_blas_kernels(argv);  // may execute this program again, first
  using dltune::engine::Options;
  dltune::comm::keep_freed_memory();  // as dltune-tune-rank measured (comm/process_memory.h)
  CLI::App app{"dltune-worker: the dltune training rank program"};
  app.require_subcommand(1);
  Options o;
  auto* train = app.add_subcommand("train", "train a model (one rank of a job, or alone)");
  train->add_option("--plan", o.plan, "TrainConfig JSON (default: the job's plan, if any)");
  train->add_option("--model", o.model, "a built-in model (dltune model list)");
  train->add_option("--data", o.data,
                    "synthetic | synthetic-cifar | synthetic-imagenet | mnist:DIR | cifar10:DIR | "
                    "text:FILE");
  train->add_option("--steps", o.steps, "training steps");
  train->add_option("--global-batch", o.global_batch, "global batch (strong scaling)");
  train->add_option("--per-rank-batch", o.per_rank_batch, "per-rank batch (weak scaling)");
  train->add_option("--scaling", o.scaling, "strong | weak")
      ->check(CLI::IsMember({"strong", "weak"}));
  train->add_option("--threads", o.threads, "BLAS threads per rank (default 1)");
  train->add_option("--device", o.device, "cpu | gpu (default: the plan's, else cpu)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  train->add_flag("--no-overlap", o.no_overlap, "allreduce after backward instead of during");
  train->add_option("--metrics", o.metrics, "append JSON-lines metrics to this file");
  train->add_option("--checkpoint", o.checkpoint, "checkpoint file (written atomically)");
  train->add_option("--resume", o.resume, "resume from this checkpoint");
  train->add_option("--summary", o.summary,
                    "write rank 0's JSON summary to this file instead of standard output");
  auto* trial = dltune::engine::add_trial_command(app);
  auto* forward = dltune::engine::add_forward_command(app);
  auto* profile = dltune::engine::add_profile_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (trial->parsed()) return dltune::engine::run_trial_command();
  if (forward->parsed()) return dltune::engine::run_forward_command();
  if (profile->parsed()) return dltune::engine::run_profile_command();
  auto st = dltune::engine::train(o);
  if (!st) {  // an empty message: another rank reports this error
    if (!st.error().message().empty()) {
      std::fprintf(stderr, "dltune-worker train: %s\n", st.error().message().c_str());
    }
    return st.error().exit_code();
  }
  return 0;
}
