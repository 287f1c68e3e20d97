#include "engine/worker/overlap.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "comm/allreduce.h"
#include "comm/mpi_communicator.h"
#include "common/paths.h"
#include "common/stats.h"
#include "common/strings.h"
#include "engine/core/tensor.h"
#include "engine/train/node_costs.h"
#include "engine/train/trainer.h"
#include "engine/worker/profile.h"
#include "planning/overlap.h"

namespace dltune::engine {
namespace {

struct OverlapOptions {
  std::string model, recipe, out;
  int batch = 32, threads = 1, rounds = 3;
  std::string sizes = "65536,1048576,4194304";
};

OverlapOptions& opts() {
  static OverlapOptions o;
  return o;
}

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Drops a step's loss: only its time matters here.
Status stepped(Result<double> r) {
  if (r) return ok_status();
  return r.error();
}

// `v` reduced over the ranks with `op`: every rank calls it at the same point.
Result<double> rank_reduce(comm::Communicator& world, double v, comm::ReduceOp op) {
  comm::AllreduceOptions ao;
  DLTUNE_TRY(comm::allreduce(world, &v, &v, 1, comm::DataType::kF64, op, ao));
  return v;
}

// The ranks' mean of `v`.
Result<double> rank_mean(comm::Communicator& world, double v) {
  auto sum = rank_reduce(world, v, comm::ReduceOp::kSum);
  if (!sum) return sum.error();
  return *sum / world.size();
}

struct SizeResult {
  size_t bytes = 0;
  int calls = 0;
  std::vector<double> compute, comm, step_alone, call_alone;
};

// One size's rounds (the header's protocol) on `buf` of `bytes`.
Status measure_size(comm::Communicator& world, Trainer& trainer, void* buf, size_t bytes,
                    const comm::AllreduceOptions& ao, int rounds, SizeResult* out) {
  const size_t count = bytes / sizeof(float);
  auto reduce = [&]() {
    return comm::allreduce(world, buf, buf, count, comm::DataType::kF32, comm::ReduceOp::kSum, ao);
  };
  // n: the allreduces that last about a step, the largest any rank asks for (timed warm: the
  // buffer's first touch and the algorithm's set-up are in the first calls).
  for (int i = 0; i < 3; ++i) DLTUNE_TRY(reduce());
  auto t0 = Clock::now();
  DLTUNE_TRY(stepped(trainer.step(false)));
  const double step = since(t0);
  DLTUNE_TRY(stepped(rank_mean(world, 0)));
  t0 = Clock::now();
  for (int i = 0; i < 8; ++i) DLTUNE_TRY(reduce());
  const double call = std::max(1e-6, since(t0) / 8);
  auto n =
      rank_reduce(world, std::clamp(std::ceil(step / call), 1.0, 4000.0), comm::ReduceOp::kMax);
  if (!n) return n.error();
  out->bytes = bytes;
  out->calls = static_cast<int>(*n);
  for (int r = 0; r < rounds; ++r) {
    DLTUNE_TRY(stepped(rank_mean(world, 0)));  // start together
    t0 = Clock::now();
    DLTUNE_TRY(stepped(trainer.step(false)));
    const double c0 = since(t0);
    DLTUNE_TRY(stepped(rank_mean(world, 0)));
    t0 = Clock::now();
    for (int i = 0; i < out->calls; ++i) DLTUNE_TRY(reduce());
    const double w = since(t0);  // n x m0
    DLTUNE_TRY(stepped(rank_mean(world, 0)));
    Status comm_status = ok_status();
    double tm = 0;
    const auto start = Clock::now();
    std::thread comm_thread([&] {
      for (int i = 0; i < out->calls && comm_status.ok(); ++i) comm_status = reduce();
      tm = since(start);
    });
    const Status step_status = stepped(trainer.step(false));
    const double tc = since(start);
    comm_thread.join();
    DLTUNE_TRY(comm_status);
    DLTUNE_TRY(step_status);
    // Which stream ran slowed throughout, and which partly (the header's model).
    const planning::Interference::Point slow =
        planning::slowdowns_from_timings(c0, w, std::max(tc, 1e-9), std::max(tm, 1e-9));
    const std::pair<double, std::vector<double>*> figures[] = {{slow.compute, &out->compute},
                                                               {slow.comm, &out->comm},
                                                               {c0, &out->step_alone},
                                                               {w / out->calls, &out->call_alone}};
    for (const auto& [value, into] : figures) {
      auto mean = rank_mean(world, value);
      if (!mean) return mean.error();
      into->push_back(*mean);
    }
  }
  return ok_status();
}

Status overlap(const OverlapOptions& o) {
  if (o.model.empty() == o.recipe.empty()) return invalid_input("give --model or --recipe");
  if (o.batch < 1 || o.threads < 1 || o.rounds < 1)
    return invalid_input("--batch, --threads and --rounds must be at least 1");
  std::vector<size_t> sizes;
  for (const std::string& s : strings::split(o.sizes, ',')) {
    auto b = strings::parse_bytes(std::string(strings::trim(s)));
    if (!b || *b < 4 || *b > (uint64_t{1} << 30))
      return invalid_input(
          "--sizes: expected byte counts from 4 to 1GiB such as 64KiB,4MiB, got '" + o.sizes + "'");
    sizes.push_back(static_cast<size_t>(*b) / 4 * 4);
  }
  if (!comm::launched_as_rank() || !comm::mpi_available())
    return invalid_input(
        "overlap measures ranks together: run it as 2 or more ranks (dltune run "
        "-n 2 -- dltune-worker overlap ...)");
  auto w = comm::create_mpi_world();
  if (!w) return w.error().wrap("starting the MPI communicator");
  std::unique_ptr<comm::Communicator> world = std::move(*w);
  Status st = ok_status();
  nlohmann::json result;
  {
    if (world->size() < 2)
      return invalid_input("overlap needs 2 or more ranks (dltune run -n 2 -- ...)");
    auto cfg = profile_config(o.model, o.recipe, o.batch);
    if (!cfg) return cfg.error();
    set_blas_threads(o.threads);
    auto lone = lone_trainer(*cfg, o.threads);
    if (!lone) return lone.error();
    Trainer& trainer = *lone->trainer;
    for (int i = 0; i < 2; ++i) DLTUNE_TRY(stepped(trainer.step(false)));  // warm
    const bool one_node = world->local().size() == world->size();
    comm::AllreduceOptions ao;
    ao.algorithm = one_node ? comm::Algorithm::kShm : comm::Algorithm::kRing;
    nlohmann::json rows = nlohmann::json::array();
    for (size_t bytes : sizes) {
      std::vector<float> priv;
      comm::SharedBuffer shared;
      void* buf = nullptr;
      if (one_node) {
        auto sb = world->local().alloc_shared(bytes);
        if (!sb) return sb.error().wrap("allocating " + std::to_string(bytes) + " shared bytes");
        shared = std::move(*sb);
        buf = shared.data();
      } else {
        priv.assign(bytes / sizeof(float), 1.0f);
        buf = priv.data();
      }
      std::fill_n(static_cast<float*>(buf), bytes / sizeof(float), 1.0f);
      SizeResult r;
      st = measure_size(*world, trainer, buf, bytes, ao, o.rounds, &r);
      if (!st) break;
      const stats::Summary c = stats::summarize(r.compute), m = stats::summarize(r.comm);
      rows.push_back({{"bytes", r.bytes},
                      {"calls", r.calls},
                      {"compute_slowdown", c.median},
                      {"comm_slowdown", m.median},
                      {"compute_slowdown_range", {c.min, c.max}},
                      {"comm_slowdown_range", {m.min, m.max}},
                      {"step_alone_s", stats::median(r.step_alone)},
                      {"allreduce_alone_s", stats::median(r.call_alone)}});
    }
    result = {{"model", o.model.empty() ? o.recipe : o.model},
              {"batch", o.batch},
              {"threads", o.threads},
              {"ranks", world->size()},
              {"rounds", o.rounds},
              {"algorithm", one_node ? "shm" : "ring"},
              {"sizes", rows}};
  }
  if (!st && world->size() > 1) {
    // The others may wait in a collective this rank will not join: exit, the launcher stops
    // them (as the trial search does).
    std::fprintf(stderr, "dltune-worker overlap: %s\n", st.error().message().c_str());
    std::fflush(stderr);
    std::_Exit(st.error().exit_code());
  }
  if (st.ok() && world->rank() == 0) {
    const std::string text = result.dump() + "\n";
    st = o.out.empty() ? (std::fputs(text.c_str(), stdout), ok_status())
                       : paths::write_file_atomic(o.out, text);
  }
  world.reset();
  comm::mpi_finalize();
  return st;
}

}  // namespace

CLI::App* add_overlap_command(CLI::App& app) {
  OverlapOptions& o = opts();
  auto* cmd = app.add_subcommand(
      "overlap", "measure how compute and allreduces slow each other (run as ranks, for predict)");
  cmd->add_option("--model", o.model, "a built-in model (dltune model list)");
  cmd->add_option("--recipe", o.recipe, "a recipe file or bundled recipe name");
  cmd->add_option("--batch", o.batch, "per-rank batch")->capture_default_str();
  cmd->add_option("--threads", o.threads, "threads each rank computes on")->capture_default_str();
  cmd->add_option("--sizes", o.sizes, "allreduce sizes in bytes")->capture_default_str();
  cmd->add_option("--rounds", o.rounds, "rounds per size (median)")->capture_default_str();
  cmd->add_option("--out", o.out, "rank 0 writes the JSON here instead of standard output");
  return cmd;
}

int run_overlap_command() {
  auto st = overlap(opts());
  if (!st) {
    std::fprintf(stderr, "dltune-worker overlap: %s\n", st.error().message().c_str());
    return st.error().exit_code();
  }
  return 0;
}

}  // namespace dltune::engine
