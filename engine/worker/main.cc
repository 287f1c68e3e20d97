// dltune-worker: the rank program the launcher starts (also runs by hand as a single rank).
//
//   dltune-worker train [--recipe FILE|NAME [--set KEY=VALUE]...] [--plan PLAN.json]
//                       [--run-dir DIR] [--metrics F] [--checkpoint F] [--resume CKPT]
//                       [--summary F]
//
// A rank trains the recipe as run under the Plan of its job (engine/worker/rank_job.h: given
// by PMIx job data under `dltune launch` / `dltune run --plan P --recipe R`, else by the files
// DLTUNE_PLAN / DLTUNE_RECIPE name, else by --plan / --recipe; no plan: the recipe's own
// settings). Under a launcher (Open MPI / PMIx / Slurm environment) the ranks talk over the MPI
// communicator, or, on the GPU engine in a build with NCCL, over NCCL (bootstrapped through
// PMIx; NCCL picks its algorithm per call, steered per message size by dltune's NCCL tuner
// plugin, which reads the same Plan); by hand it is rank 0 of 1 with no communication. Rank 0
// prints a one-line JSON summary on stdout at the end (or writes it to --summary, or to the run
// directory). Exit: 0 success, 1 training or communication failure, 2 bad input; 130 / 143 when
// SIGINT / SIGTERM stopped training (every rank finishes the same step and the checkpoint, when
// set, is saved first).
//
// The other subcommands measure for the launcher: trial (the recipe tuner's trial trainings,
// trial.h), forward (forward.h), profile (one rank's compute per node, profile.h) and overlap
// (compute and allreduces slowing each other, overlap.h).
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
#include "common/run_layout.h"
#include "engine/core/blas_kernels.h"
#include "engine/train/rank_memory.h"
#include "engine/train/train_data.h"
#include "engine/train/trainer.h"
#include "engine/train/training_memory.h"
#include "engine/worker/forward.h"
#include "engine/worker/overlap.h"
#include "engine/worker/profile.h"
#include "engine/worker/rank_job.h"
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
  RankJobOptions job;
  std::string resume;
};

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
  auto job =
      load_rank_job(o.job, boot.get(), boot ? boot->size() : 1, boot ? boot->num_nodes() : 1);
  if (!job) return job.error();
  const TrainConfig* cfg = &job->config;
  set_blas_threads(cfg->threads);
  std::unique_ptr<comm::Communicator> world;
  if (boot && cfg->device == "gpu" && comm::nccl_available()) {
    // NCCL's own choice per call: the plan's GPU rules reach it per message size through
    // dltune's NCCL tuner plugin (NCCL_TUNER_PLUGIN and DLTUNE_PLAN, set by the launcher).
    auto opts = comm::parse_nccl_choice("nccl");
    if (!opts) return opts.error();
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
  // Rank 0's metrics, and the same scalars as TensorBoard events (metrics.h says where).
  auto metrics = MetricsWriter::open((*trainer)->rank() == 0 ? cfg->metrics_path : "",
                                     /*tensorboard=*/true);
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
                        {"checkpoints",
                         {{"count", sum->checkpoints},
                          {"blocked_s", sum->checkpoint_blocked_s},
                          {"write_s", sum->checkpoint_write_s},
                          {"background", sum->checkpoint_background}}},
                        {"memory", *memory}};
    if (job->summary_path.empty()) {
      std::printf("%s\n", j.dump().c_str());
    } else {
      DLTUNE_TRY_CTX(paths::write_file_atomic(job->summary_path, j.dump() + "\n"),
                     "writing the summary");
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

// A rank that gave up waiting for a peer (a timeout: the sign of a hung rank, which itself says
// nothing) leaves its error in RUN_DIR/failures/rank-N.txt for the launch's restart row; N from
// the launcher's PMIX_RANK. Best effort: a rank that cannot write it exits as it would anyway.
void note_timeout(const std::string& run_dir, const Error& e) {
  if (run_dir.empty() || e.kind() != ErrorKind::kTimeout || e.message().empty()) return;
  const char* env = std::getenv("PMIX_RANK");
  std::string rank = env != nullptr ? env : "0";
  if (rank.empty() || rank.size() > 9 || rank.find_first_not_of("0123456789") != std::string::npos)
    rank = "0";
  const std::string dir = run_layout::in(run_dir, run_layout::kFailures);
  if (!paths::make_dirs(dir).ok()) return;
  const std::string text = e.message().substr(0, 1000) + "\n";
  (void)paths::write_file_atomic(dir + "/rank-" + rank + ".txt", text);
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
  auto* train = app.add_subcommand("train", "train a recipe (one rank of a job, or alone)");
  train->add_option("--recipe", o.job.recipe,
                    "recipe file or bundled recipe name (default: the job's recipe)");
  train->add_option("--set", o.job.sets, "change a key of --recipe's file (as dltune launch)");
  train->add_option("--plan", o.job.plan,
                    "Plan file (default: the job's plan, else the recipe's own settings)");
  train->add_option("--run-dir", o.job.run_dir,
                    "write metrics, checkpoint, trace and summary into this run directory");
  train->add_option("--metrics", o.job.metrics, "append JSON-lines metrics to this file");
  train->add_option("--checkpoint", o.job.checkpoint, "checkpoint file (written atomically)");
  train->add_option("--resume", o.resume, "resume from this checkpoint");
  train->add_option("--summary", o.job.summary,
                    "write rank 0's JSON summary to this file instead of standard output");
  auto* trial = dltune::engine::add_trial_command(app);
  auto* forward = dltune::engine::add_forward_command(app);
  auto* profile = dltune::engine::add_profile_command(app);
  auto* overlap = dltune::engine::add_overlap_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (trial->parsed()) return dltune::engine::run_trial_command();
  if (forward->parsed()) return dltune::engine::run_forward_command();
  if (profile->parsed()) return dltune::engine::run_profile_command();
  if (overlap->parsed()) return dltune::engine::run_overlap_command();
  auto st = dltune::engine::train(o);
  if (!st) {  // an empty message: another rank reports this error
    if (!st.error().message().empty()) {
      std::fprintf(stderr, "dltune-worker train: %s\n", st.error().message().c_str());
    }
    dltune::engine::note_timeout(o.job.run_dir, st.error());
    return st.error().exit_code();
  }
  return 0;
}
