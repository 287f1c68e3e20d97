// Trainer: pipeline stages (config.stages > 1), the set-up and the step.
//
// Layout. Rank r runs stage r % S of replica r / S (S = stages, R = ranks / S replicas). Every
// rank cuts the same graph at config.partition, so all know every stage's nodes and tensors;
// a rank builds only its stage's model (Model::set_first_node keeps initialisation and dropout
// equal to the whole model's). The ranks of one stage (one per replica) form replicas_comm:
// their gradients are summed there exactly as data parallelism sums them over the world. A
// weight tied across stages gets a two-rank communicator per replica (PipelineTie).
//
// A step. The replica's batch (the sampler's slice, over replicas) is cut into M micro-batches
// as compute_cpu() cuts a local batch. All receives of the step are posted first, each into its
// micro-batch's place in in_buf / dout_buf: a message can never wait for a receive, so no order
// of sends can deadlock and a rendezvous transport (MPI) never holds a send. The stage then runs
// its passes in schedule order:
//   forward F(m): waits for m's input (stage > 0), runs the model of m's slot and sends the
//     output to the next stage (tag 2m), or, on the last stage, computes the loss and its
//     gradient (into dlogits_ at m's place);
//   backward B(m): waits for m's output gradient (all but the last stage), runs backward
//     (gradients added after the step's first backward), and sends the input gradient to the
//     previous stage (tag 2m + 1). The step's last backward signals final gradients, which
//     start the bucket allreduces over replicas_comm as in data parallelism.
// Without recomputation each micro-batch in flight has a model of its own (slots: M for GPipe,
// S - s for 1F1B and async), all on one set of weights; with recomputation one model runs every
// pass and, before a backward whose activations it no longer holds, recomputes that forward
// from the kept input (same dropout seed, batch-norm statistics not counted twice). The async
// schedule picks at run time: the next backward whose gradient has arrived, else the next
// forward whose input has arrived, within its window; otherwise it waits for any message.
// Backwards run in micro-batch order in every schedule, so all three sum the same gradients in
// the same order.
//
// After the passes: the bucket allreduces finish, tied copies sum their gradients, the
// gradient norm (clipping) is summed over the world with each tensor counted once, and every
// rank applies the optimizer to its stage. Micro-batch m of replica r uses dropout seed
// mix(step seed, r * M + m): R replicas of M micro-batches draw what one rank with R x M
// micro-batches draws, so a pipeline computes what data parallelism computes.
#include "engine/train/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

#include "comm/allreduce.h"
#include "engine/io/safetensors.h"
#include "engine/train/trainer.h"
#include "planning/schedule.h"

namespace dltune::engine {

namespace {
using Clock = std::chrono::steady_clock;

std::string stage_name(const PipelineStage& p) {
  return "stage " + std::to_string(p.stage) + " of replica " + std::to_string(p.replica);
}

// A batch of B samples cut into M micro-batches as compute_cpu() cuts a local batch: the first
// B % M get one sample more. at() is micro-batch m's place in a buffer of `numel` floats per
// sample; bytes() its size there.
struct MicroBatches {
  std::vector<int> size, offset;
  MicroBatches(int B, int M) : size(static_cast<size_t>(M)), offset(static_cast<size_t>(M)) {
    for (int m = 0, o = 0; m < M; ++m) {
      size[static_cast<size_t>(m)] = B / M + (m < B % M ? 1 : 0);
      offset[static_cast<size_t>(m)] = o;
      o += size[static_cast<size_t>(m)];
    }
  }
  float* at(const Buffer& buf, int m, int64_t numel) const {
    return const_cast<float*>(buf.data()) + offset[static_cast<size_t>(m)] * numel;
  }
  size_t bytes(int m, int64_t numel) const {
    return static_cast<size_t>(size[static_cast<size_t>(m)] * numel) * sizeof(float);
  }
};

// Posts every receive of a step into its micro-batch's place (see the top of this file):
// recvs[m] is m's input (into in_buf; stages after the first), recvs[M + m] its output gradient
// (into dout_buf; stages before the last). M = mb.size.size().
std::vector<comm::Request> post_receives(comm::Communicator& c, PipelineStage& p,
                                         const MicroBatches& mb, const comm::Deadline& deadline) {
  const int M = static_cast<int>(mb.size.size());
  const int64_t in = p.in_numel, out = p.out_numel;
  std::vector<comm::Request> recvs(static_cast<size_t>(2 * M));
  for (int m = 0; m < M; ++m) {
    if (!p.first())
      recvs[static_cast<size_t>(m)] =
          c.irecv(p.prev, forward_tag(m), mb.at(p.in_buf, m, in), mb.bytes(m, in), deadline);
    if (!p.last())
      recvs[static_cast<size_t>(M + m)] =
          c.irecv(p.next, backward_tag(m), mb.at(p.dout_buf, m, out), mb.bytes(m, out), deadline);
  }
  return recvs;
}

// Waits for receive i unless it has arrived already (wait_any reset it), and resets it.
Status take_receive(std::vector<comm::Request>& recvs, size_t i) {
  comm::Request& r = recvs[i];
  if (!r.valid()) return ok_status();
  Status st = r.wait();
  r = comm::Request{};
  return st;
}

// Why a schedule stopped: the pass's error and what it was doing ("forward of micro-batch 3").
struct ScheduleFailure {
  Status status;
  std::string what;
};

// Runs the stage's passes in its schedule's order (see the top of this file): the static
// schedules from planning::static_schedule; async by what has arrived, within its window.
// `pass(forward, m)` runs one pass; recvs are the step's posted receives (recvs[m]: m's input,
// recvs[M + m]: its output gradient; a received one is reset). nullopt when every pass ran.
std::optional<ScheduleFailure> run_schedule(const PipelineStage& p, int M,
                                            std::vector<comm::Request>& recvs,
                                            const comm::Deadline& deadline,
                                            const std::function<Status(bool, int)>& pass) {
  auto failed = [](Status st, bool fwd, int m) {
    return ScheduleFailure{std::move(st), std::string(fwd ? "forward" : "backward") +
                                              " of micro-batch " + std::to_string(m)};
  };
  if (p.schedule != recipes::PipelineSchedule::kAsync) {
    for (const planning::PipeOp& op : planning::static_schedule(p.schedule, p.stages, p.stage, M))
      if (Status st = pass(op.forward, op.microbatch); !st)
        return failed(std::move(st), op.forward, op.microbatch);
    return std::nullopt;
  }
  // The next backward whose gradient is here, else the next forward whose input is here
  // (within the window), else wait for any message.
  const int window = planning::async_window(p.stages, p.stage, M);
  int next_f = 0, next_b = 0;
  while (next_b < M) {
    const bool b_ready =
        next_b < next_f && (p.last() || !recvs[static_cast<size_t>(M + next_b)].valid());
    const bool f_ready = next_f < M && next_f - next_b < window &&
                         (p.first() || !recvs[static_cast<size_t>(next_f)].valid());
    if (b_ready || f_ready) {
      const bool fwd = !b_ready;
      const int m = fwd ? next_f++ : next_b++;
      if (Status st = pass(fwd, m); !st) return failed(std::move(st), fwd, m);
      continue;
    }
    auto got = comm::wait_any(recvs, deadline);
    if (!got) return ScheduleFailure{got.error(), "waiting for a neighbouring stage"};
  }
  return std::nullopt;
}

// Sums each tied weight's gradient over its two-rank communicator (PipelineTie).
Status sum_tied_gradients(Model& model, const std::vector<PipelineTie>& ties) {
  for (const auto& tie : ties) {
    float* g = model.grads() + tie.offset;
    DLTUNE_TRY(comm::allreduce(*tie.comm, g, g, static_cast<size_t>(tie.count),
                               comm::DataType::kF32, comm::ReduceOp::kSum, {}));
  }
  return ok_status();
}

// The sum of squares of this stage's gradients, each tensor once (a tied copy not again).
double stage_gradient_squares(Model& model, const std::vector<PipelineTie>& ties) {
  const float* g = model.grads();
  double sq = 0.0;
  for (int64_t i = 0; i < model.num_params(); ++i) sq += static_cast<double>(g[i]) * g[i];
  for (const auto& tie : ties)
    if (tie.copy)
      for (int64_t i = tie.offset; i < tie.offset + tie.count; ++i)
        sq -= static_cast<double>(g[i]) * g[i];
  return sq;
}
}  // namespace

void Trainer::PipeDeleter::operator()(PipelineStage* p) const { delete p; }

Status Trainer::setup_pipeline(const recipes::Graph& full) {
  const int S = config_.stages, world = ranks();
  if (config_.device == "gpu")
    return invalid_input(
        "train config: pipeline stages (stages " + std::to_string(S) +
        ") run on the CPU in this build; use device 'cpu' or one stage per replica");
  if (world % S != 0)
    return invalid_input("train config: key 'stages': " + std::to_string(world) +
                         " ranks are not a whole number of replicas of " + std::to_string(S) +
                         " stages");
  pipe_.reset(new PipelineStage());
  PipelineStage& p = *pipe_;
  p.stages = S;
  p.replicas = world / S;
  p.stage = rank() % S;
  p.replica = rank() / S;
  p.prev = p.first() ? -1 : rank() - 1;
  p.next = p.last() ? -1 : rank() + 1;
  p.full = full;
  p.full_info = recipes::analyze_graph(full);
  if (!p.full_info.ok())
    return invalid_input("model '" + config_.model + "': " + p.full_info.problems[0].second);
  auto firsts = recipes::partition_nodes(full, p.full_info, config_.partition);
  if (!firsts) return firsts.error().wrap("train config: key 'partition'");
  const int n = static_cast<int>(full.nodes.size());
  for (int s = 0; s < S; ++s) {
    const int end = s + 1 < S ? (*firsts)[static_cast<size_t>(s + 1)] : n;
    auto def = recipes::make_stage(full, p.full_info, (*firsts)[static_cast<size_t>(s)], end);
    if (!def) return def.error().wrap("train config: stage " + std::to_string(s));
    p.infos.push_back(recipes::analyze_graph(def->graph));
    p.defs.push_back(std::move(*def));
  }
  p.schedule = config_.pipeline_schedule;
  p.recompute = config_.recompute;
  const recipes::GraphInfo& mine = p.infos[static_cast<size_t>(p.stage)];
  p.in_numel = recipes::numel(p.def().graph.input);
  p.out_numel = recipes::numel(mine.output());

  // Groups: this stage's replicas; per tied weight, its two stages in each replica. Every rank
  // calls split() once per group kind in the same order (collective over the world).
  auto reps = comm_->split(p.stage, p.replica);
  if (!reps) return reps.error().wrap("grouping the replicas of " + stage_name(p));
  if ((*reps)->size() > 1) p.replicas_comm = std::move(*reps);
  for (int s = 0; s < S; ++s)
    for (const auto& [copy, owner] : p.defs[static_cast<size_t>(s)].shared) {
      const int owner_node = recipes::find_node(full, owner.substr(0, owner.rfind('.')));
      int owner_stage = 0;
      while (owner_stage + 1 < S && (*firsts)[static_cast<size_t>(owner_stage + 1)] <= owner_node)
        ++owner_stage;
      const bool in = p.stage == s || p.stage == owner_stage;
      auto group = comm_->split(in ? p.replica : comm::kUndefined, p.stage);
      if (!group) return group.error().wrap("grouping the stages that share '" + owner + "'");
      if (!in) continue;
      PipelineTie tie;
      tie.comm = std::move(*group);
      tie.copy = p.stage == s;
      const std::string& name = tie.copy ? copy : owner;
      for (const auto& t : mine.params)
        if (t.name == name) tie.offset = t.offset, tie.count = recipes::numel(t.shape);
      p.ties.push_back(std::move(tie));
    }
  return ok_status();
}

Status Trainer::init_pipeline_weights() {
  PipelineStage& p = *pipe_;
  Model& m = *model_;
  if (!config_.init_from.empty()) {
    // The file holds the whole model: this stage takes its tensors, a shared copy its owner's.
    SafetensorsLoad load;
    for (const auto& [copy, owner] : p.def().shared) load.aliases[copy] = owner;
    for (const auto& t : p.full_info.params) load.others.insert(t.name);
    for (const auto& t : p.full_info.state) load.others.insert(t.name);
    DLTUNE_TRY_CTX(load_safetensors_into(m, config_.init_from, load),
                   std::string("training.init_from"));
  }
  comm::BroadcastOptions bo;  // root 0: the owner (the earlier stage) in a tie's group
  for (auto& tie : p.ties)
    DLTUNE_TRY_CTX(comm::broadcast(*tie.comm, m.params() + tie.offset,
                                   static_cast<size_t>(tie.count) * sizeof(float), bo),
                   std::string("copying a tied weight to the stage that shares it"));
  return ok_status();
}

double Trainer::pipeline_busy_seconds() const { return pipe_ ? pipe_->busy_s : 0.0; }
double Trainer::pipeline_schedule_seconds() const { return pipe_ ? pipe_->schedule_s : 0.0; }

Status Trainer::add_pipeline_slots(int local_max) {
  // Models for the micro-batches in flight beyond the first (after the gradient buffer moved
  // to shared memory: they take the owner's pointers).
  PipelineStage& p = *pipe_;
  const int M = std::min(config_.microbatches, local_max);
  const int chunk_max = (local_max + M - 1) / M;
  const int slots = p.recompute ? 1 : planning::in_flight(p.schedule, p.stages, p.stage, M);
  for (int i = 1; i < slots; ++i) {
    auto extra = Model::build(p.def().graph, config_.model, model_.get());
    if (!extra) return extra.error();
    p.extra.push_back(std::make_unique<Model>(std::move(*extra)));
    Model& e = *p.extra.back();
    e.set_first_node(p.def().begin);
    e.share_scratch_of(*model_);  // passes run one at a time: one set of scratch
    DLTUNE_TRY(configure_model(e));
    e.reserve(chunk_max);
  }
  // Rank 0's checkpoint receive buffer (see PipelineStage): the largest run another stage sends
  // is at most its parameter (or state) count.
  if (rank() == 0) {
    size_t largest = 0;
    for (int s = 1; s < p.stages; ++s) {
      const recipes::GraphInfo& info = p.infos[static_cast<size_t>(s)];
      largest = std::max(
          {largest, static_cast<size_t>(info.parameters), static_cast<size_t>(info.state_floats)});
    }
    p.ck_packed.resize(largest);
  }
  const auto per = static_cast<size_t>(local_max);
  if (!p.first()) p.in_buf.resize(per * static_cast<size_t>(p.in_numel));
  if (!p.first()) p.din_buf.resize(per * static_cast<size_t>(p.in_numel));
  if (!p.last()) p.dout_buf.resize(per * static_cast<size_t>(p.out_numel));
  return ok_status();
}

Result<double> Trainer::compute_pipeline(int B, uint64_t step_seed, bool traced, StepTimes& tm) {
  PipelineStage& p = *pipe_;
  const auto started = Clock::now();
  const int M = std::min(config_.microbatches, B);
  const int64_t in = p.in_numel, out = p.out_numel, lw = predictions_;
  const MicroBatches mb(B, M);
  const std::vector<int>& size = mb.size;
  const std::vector<int>& offset = mb.offset;
  auto at = [&](const Buffer& buf, int m, int64_t numel) { return mb.at(buf, m, numel); };
  auto bytes = [&](int m, int64_t numel) { return mb.bytes(m, numel); };
  auto input_of = [&](int m) -> const float* {
    return p.first() ? at(input_, m, in) : at(p.in_buf, m, in);
  };
  const comm::Deadline deadline = comm_->deadline_from_now();
  std::vector<comm::Request> recvs = post_receives(*comm_, p, mb, deadline), sends;
  auto fail = [&](Status st, const std::string& what) -> Error {
    for (auto& s : sends) (void)s.wait();  // the buffers outlive the sends
    return std::move(st).error().wrap(stage_name(p) + " (rank " + std::to_string(rank()) +
                                      "), step " + std::to_string(step_) + ": " + what);
  };
  auto received = [&](size_t i) { return take_receive(recvs, i); };

  // Models: slot k is model_ (k = 0) or extra[k - 1]; with recomputation only model_.
  std::vector<Model*> models{model_.get()};
  for (auto& e : p.extra) models.push_back(e.get());
  std::vector<int> slot_of(static_cast<size_t>(M), -1), free_slots;
  for (int k = static_cast<int>(models.size()) - 1; k >= 0; --k) free_slots.push_back(k);
  std::vector<comm::Request> out_send(models.size());  // the last send from a model's output
  int resident = -1;  // recomputation: the micro-batch whose activations model_ holds
  auto seed_of = [&](int m) {
    return Rng::mix(step_seed, static_cast<uint64_t>(p.replica * M + m));
  };
  for (size_t b = 0; b < buckets_.size(); ++b) bucket_left_[b] = buckets_[b].tensors;
  std::function<void(int)> ready;
  if (grad_comm_ && config_.overlap) ready = [&](int node) { tensors_final(node, traced); };
  double loss = 0.0;
  int backwards = 0;

  auto forward = [&](int m) -> Status {
    const auto t0 = Clock::now();
    const auto mu = static_cast<size_t>(m);
    if (Status st = received(mu); !st) return st;
    const int slot = free_slots.back();
    free_slots.pop_back();
    slot_of[mu] = slot;
    Model& model = *models[static_cast<size_t>(slot)];
    if (auto& s = out_send[static_cast<size_t>(slot)]; s.valid()) DLTUNE_TRY(s.wait());
    const auto c0 = Clock::now();  // computing from here (not waiting)
    const float* y = model.forward(input_of(m), size[mu], true, seed_of(m));
    resident = m;
    if (p.last())
      loss +=
          loss_and_gradient(y, labels_.data() + offset[mu] * lw, size[mu], at(dlogits_, m, out));
    else
      sends.push_back(out_send[static_cast<size_t>(slot)] =
                          comm_->isend(p.next, forward_tag(m), y, bytes(m, out), deadline));
    if (p.recompute) free_slots.push_back(slot);  // one model; its activations stay resident
    p.busy_s += std::chrono::duration<double>(Clock::now() - c0).count();
    if (traced) trace_->complete("F" + std::to_string(m), kTraceCompute, t0, Clock::now(), step_);
    return ok_status();
  };
  auto backward = [&](int m) -> Status {
    const auto mu = static_cast<size_t>(m);
    if (!p.last())
      if (Status st = received(static_cast<size_t>(M) + mu); !st) return st;
    const auto t0 = Clock::now();
    const int slot = slot_of[mu];
    Model& model = *models[static_cast<size_t>(slot)];
    if (p.recompute && resident != m) {
      if (auto& s = out_send[static_cast<size_t>(slot)]; s.valid()) DLTUNE_TRY(s.wait());
      model.forward(input_of(m), size[mu], true, seed_of(m), /*update_state=*/false);
      resident = m;
    }
    const float* dy = p.last() ? at(dlogits_, m, out) : at(p.dout_buf, m, out);
    float* dx = p.first() ? nullptr : at(p.din_buf, m, in);
    ++backwards;
    model.backward(input_of(m), dy, size[mu], backwards == M ? ready : std::function<void(int)>{},
                   backwards > 1, dx);
    if (dx) sends.push_back(comm_->isend(p.prev, backward_tag(m), dx, bytes(m, in), deadline));
    if (!p.recompute) free_slots.push_back(slot);
    p.busy_s += std::chrono::duration<double>(Clock::now() - t0).count();
    if (traced) trace_->complete("B" + std::to_string(m), kTraceCompute, t0, Clock::now(), step_);
    return ok_status();
  };

  if (auto failed = run_schedule(p, M, recvs, deadline,
                                 [&](bool fwd, int m) { return fwd ? forward(m) : backward(m); }))
    return fail(std::move(failed->status), failed->what);
  tm.forward_end = tm.backward_end = Clock::now();
  p.schedule_s += std::chrono::duration<double>(tm.backward_end - started).count();
  Status st = wait_buckets();
  for (auto& s : sends)
    if (Status ss = s.wait(); !ss && st) st = ss;
  if (!st) return fail(std::move(st), "reducing gradients");
  if (Status ts = sum_tied_gradients(*model_, p.ties); !ts)
    return fail(std::move(ts), "summing a tied weight's gradients");
  tm.reduce_end = Clock::now();
  if (config_.clip_grad_norm > 0.0) {
    // The global norm: every stage's squares once, summed over the world, where each replica
    // adds the same values.
    double sq[1] = {stage_gradient_squares(*model_, p.ties)};
    DLTUNE_TRY(allreduce_doubles(sq, 1));
    const double norm = std::sqrt(std::max(0.0, sq[0] / p.replicas));
    const double coef = config_.clip_grad_norm / (norm + 1e-6);  // clip_grad_norm()'s rule
    if (coef < 1.0) {
      float* gw = model_->grads();
      for (int64_t i = 0; i < model_->num_params(); ++i) gw[i] *= static_cast<float>(coef);
    }
  }
  const double lr = learning_rate(config_, step_);
  opt_->step(model_->params(), model_->grads(), static_cast<float>(lr));
  tm.update_end = Clock::now();
  return loss;
}

}  // namespace dltune::engine
