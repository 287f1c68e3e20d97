// The trainer: one instance per rank; data parallelism, and pipelines of stages replicated
// data-parallel (config.stages > 1: pipeline.cc says how those run a step).
//
// Start: every rank builds the same model graph; rank 0's initial parameters (or the
// init_from weights) and model state are broadcast so all ranks start identical. Step: each rank
// runs forward/backward on its slice of the global batch (Sampler), with the loss gradient
// divided by the GLOBAL number of predictions (global batch x predictions per sample: 1, or T
// for a language model), so the SUM allreduce of the gradients is exactly the gradient of the
// mean loss over the global batch (strong scaling with remainders, weak scaling alike). The
// gradient buffer lives in node-shared memory the communicator provides (alloc_shared), split
// into buckets of ~bucket_bytes at node boundaries in the order gradients become final; with
// overlap on, each bucket's allreduce is started on the communication thread as soon as backward
// has made all of its tensors final (the executor's per-node ready signal), and the step waits
// for all of them after backward. The algorithm of each bucket comes from the config's ranges.
// Then every rank clips (optionally, by the global norm) and applies the same SGD or AdamW
// update, so parameters stay identical without further communication. Batch-norm statistics
// stay per rank, as in PyTorch DDP; checkpoints save rank 0's. A pipeline's checkpoint is the
// whole model's, gathered to rank 0, in the same format whatever the layout (a run may resume
// on another layout, or without stages).
//
// On the GPU (config.device == "gpu", trainer_gpu.cc) the same steps run on a GpuModel with the
// CPU model's exact parameter layout; the CPU Model stays as the host mirror (initial values,
// checkpoints, the host gradient buffer). Gradient buckets: with a comm::NcclCommunicator,
// allreduce_device on the device gradient slice on the communication stream (ordered after
// backward's kernels by an event, so it overlaps the rest of backward when config.overlap);
// with a host communicator, each bucket is copied to the host gradient buffer, reduced with
// the configured CPU algorithm and copied back. Micro-batches, the loss, clipping and the
// optimizer (SGD or AdamW) run on the device; checkpoints copy parameters, model state and the
// optimizer's moments to the host, in the CPU format (a GPU checkpoint resumes on the CPU and
// back).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/allreduce.h"
#include "comm/communicator.h"
#include "comm/nccl_communicator.h"
#include "comm/registration.h"
#include "common/result.h"
#include "engine/core/rng.h"
#include "engine/core/thread_pool.h"
#include "engine/data/dataset.h"
#include "engine/data/loader.h"
#include "engine/data/sampler.h"
#include "engine/graph/model.h"
#include "engine/io/checkpoint.h"
#include "engine/io/checkpoint_writer.h"
#include "engine/optim/optimizer.h"
#include "engine/train/metrics.h"
#include "engine/train/trace.h"
#include "engine/train/train_config.h"

namespace dltune::engine {

struct PipelineStage;  // pipeline.h

struct Bucket {
  int64_t begin = 0, end = 0;  // parameter index range [begin, end)
  Algorithm algorithm = Algorithm::kRing;
  uint64_t segment_bytes = 0;  // the ring's segment (0: comm's default)
  int tensors = 0;             // parameter tensors in it (its gradients are final when all are)
};

struct TrainSummary {
  int64_t steps = 0;        // the step count reached (a resumed run counts the earlier steps)
  int64_t steps_run = 0;    // the steps this run() executed
  int64_t timed_steps = 0;  // those in samples_per_s, compute_s, comm_s (not a fresh run's 1st)
  double final_loss = 0.0, heldout_accuracy = -1.0;
  double heldout_loss = -1.0;  // mean per prediction (nats); -1 without a held-out evaluation
  double samples_per_s = 0.0;  // global samples per second over the timed steps
  double compute_s = 0.0, comm_s = 0.0, wall_s = 0.0;
  bool stopped = false;  // run() ended early because a stop was requested
  // The checkpoints run() wrote, the seconds training waited for them on this rank (copying the
  // state for the background write, or waiting for the previous write; a pipeline's are written
  // while training waits) and the seconds writing them took (0 on ranks that write none).
  int64_t checkpoints = 0;
  double checkpoint_blocked_s = 0.0, checkpoint_write_s = 0.0;
  // Written in the background: true since a pipeline's are too (data parallel: rank 0's copy;
  // pipeline: the stream into rank 0's file), kept as the worker's summary says it.
  bool checkpoint_background = false;
};

class Trainer {
 public:
  // `comm` may be nullptr (one rank, no communication) and must outlive the trainer, as must
  // the datasets (`heldout` may be nullptr). Collective when comm has several ranks: every rank
  // must call create() with the same config. Errors: invalid_input when the config, model and
  // data do not fit (unknown model, input shape or class count mismatch, batch too large, an
  // unknown algorithm name), comm errors from the initial broadcast / shared allocation.
  static Result<std::unique_ptr<Trainer>> create(const TrainConfig& config,
                                                 comm::Communicator* comm, const Dataset& train,
                                                 const Dataset* heldout);
  ~Trainer();

  // One training step; returns this step's global mean loss when `want_loss` (one extra
  // scalar allreduce), else this rank's local mean loss. Errors: communication failures.
  Result<double> step(bool want_loss = true);
  // Frees the host model's activations and scratch until the next step allocates them again
  // (Model::release()), and a data loader's batches read ahead; for the recipe tuner, which
  // keeps a trainer per candidate and steps one at a time. The GPU model keeps its memory.
  void release_scratch() {
    if (!gpu_) model_->release();
    if (loader_) loader_->release();
  }
  // Regroups the gradients into buckets of ~bucket_bytes and sets overlap, as if the trainer
  // had been created with them; the model, optimizer state and step count are kept. Between
  // steps only. For the recipe tuner, whose candidates that differ only in these two settings
  // train one model. Errors: bucket_bytes == 0, an algorithm the config's ranges name for a new
  // bucket size that this build does not know (the trainer is then unchanged).
  Status set_communication(uint64_t bucket_bytes, bool overlap);
  // Trains until config.steps, logging metrics (rank 0 writes `metrics`), evaluating per
  // epoch or eval_every, checkpointing per checkpoint_every and at the end. A logged loss that
  // is NaN or infinite ends it on every rank with diverged_error(), before the next checkpoint,
  // as do parameters that are not finite when a checkpoint is due (an update that diverged in a
  // step whose loss was still finite; data-parallel CPU ranks, which hold the same ones). A
  // stop request (set_stop_source) ends it after the step in which any rank saw the request: every
  // rank stops after the same step, saves the checkpoint (when checkpoint_path is set) and returns
  // with summary.stopped. Whatever ends it, it returns once the checkpoint being written is on
  // disk (or failed).
  Result<TrainSummary> run(MetricsWriter& metrics);
  // Whether run() ended because the loss diverged (then the same error on every rank).
  bool diverged() const { return diverged_; }
  // Every step then checks *stop (non-zero = stop requested; e.g. set by a signal handler) and
  // agrees with the other ranks on it, in the same scalar allreduce as the loss (one extra
  // 16-byte allreduce on steps that log no loss). `stop` must outlive the trainer; nullptr
  // turns the check off.
  void set_stop_source(const std::atomic<int>* stop) { stop_source_ = stop; }
  // Whether the last step() ended with a stop agreed by all ranks, and then the largest *stop
  // value any rank saw (e.g. the signal number; 0 when not stopped).
  bool stop_agreed() const { return stop_agreed_; }
  int stop_code() const { return stop_code_; }
  // Held-out accuracy and mean loss, sharded over the ranks (collective).
  Result<EvalMetrics> evaluate();

  // Rank 0 writes the checkpoint (atomically) and returns when it is written; every rank calls
  // it (no communication, but for pipelines: the stages of replica 0 send theirs to rank 0).
  // (run() writes data parallelism's checkpoints in the background: checkpoint_writer.h.)
  Status save(const std::string& path) const;
  // Every rank loads the same checkpoint (a pipeline stage: its tensors of it) and continues at
  // its step. Errors: unreadable file, a checkpoint of another model / parameter count / seed /
  // global batch.
  Status resume(const std::string& path);

  // The host model. On the GPU its parameters are refreshed from the device only by save()
  // and sync_host_params().
  Model& model() { return *model_; }
  // The rank's threads (config.threads; engine/core/thread_pool.h).
  ThreadPool& thread_pool() { return *pool_; }
  // GPU: copies the device parameters, model state and optimizer moments into the host model /
  // optimizer.
  Status sync_host_params() const;
  bool on_gpu() const { return gpu_ != nullptr; }
  int64_t steps_done() const { return step_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Per bucket: the node whose backward completed it in the last step whose allreduces started
  // during backward (overlap on, more than one rank), -1 where none did. What the step-time
  // model's planning::GradBucket::ready_after says beforehand (tests/predict checks the two).
  const std::vector<int>& bucket_ready_nodes() const { return bucket_ready_node_; }
  int rank() const;
  int ranks() const;
  // A pipeline stage's seconds of forward and backward computation so far, and of running its
  // schedule (the steps' pipelined part: computation and waiting); 0 without stages.
  double pipeline_busy_seconds() const;
  // Bytes of this rank's gradient buffer when it lives in node-shared memory (0 otherwise):
  // node-shared collectives read the peers' buffers, whose pages then count in this process's
  // resident set without being its memory.
  int64_t node_shared_gradient_bytes() const { return static_cast<int64_t>(shared_grads_.bytes()); }
  double pipeline_schedule_seconds() const;
  // Whether the gradients are in registered private memory instead of node-shared memory
  // (node-shared memory was refused; see private_grads_).
  bool gradients_registered() const { return registered_grads_.active(); }
  // Timing of the last step.
  const StepMetrics& last() const { return last_; }
  // Datasets read on demand (Dataset::reader): the loader that reads the training batches
  // ahead of the steps and the held-out samples (DLTUNE_LOADER_THREADS threads,
  // DLTUNE_LOADER_PREFETCH batches ahead); null for data in memory.
  const BatchLoader* loader() const { return loader_.get(); }

 private:
  struct Gpu;  // trainer_gpu.cc
  struct GpuDeleter {
    void operator()(Gpu* g) const;
  };
  struct PipeDeleter {  // pipeline.cc
    void operator()(PipelineStage* p) const;
  };
  struct StepTimes {
    std::chrono::steady_clock::time_point forward_end, backward_end, reduce_end, update_end;
  };

  Trainer() = default;
  // Puts a model of this rank on its threads, in the config's precision, with the config's
  // kernel choices (invalid_input naming 'kernels' for a node or kernel the model lacks).
  Status configure_model(Model& m) const;
  // The step's compute and gradient reduction on the CPU / the GPU; return the local loss sum.
  Result<double> compute_cpu(int batch, uint64_t seed, bool traced, StepTimes& times);
  Result<double> compute_gpu(int batch, uint64_t seed, bool traced, StepTimes& times);
  // A pipeline stage's step (pipeline.cc): its passes of the replica's batch in schedule order,
  // then the reduction and the update; returns the local loss sum (0 but on the last stage).
  Result<double> compute_pipeline(int batch, uint64_t step_seed, bool traced, StepTimes& times);
  // Pipelines (pipeline.cc): the layout, the groups and this stage's sub-graph (before the model
  // is built); the init_from / tied weights (after init_params); the models of the micro-batches
  // in flight and the step's message buffers (after the gradient buffer is in place).
  Status setup_pipeline(const recipes::Graph& full);
  // create()'s data: the sampler of this rank's slice of each global batch (a pipeline's
  // replica's), and, for data read on demand, the loader that reads ahead of the steps.
  Status setup_data(const Dataset& train, const Dataset* heldout);
  Status init_pipeline_weights();
  Status add_pipeline_slots(int local_max);
  // Pipelines (pipeline_io.cc): held-out evaluation through the stages; the whole model's
  // checkpoint gathered to / read back from the layout-independent format.
  Result<EvalMetrics> evaluate_pipeline();
  // Held-out samples [first, first + b) into x (b, sample) and y (b, label_width), either null:
  // copied, or read by the loader. Errors: the reader's.
  Status read_heldout(int64_t first, int b, float* x, int32_t* y);
  Status save_pipeline(const std::string& path) const;
  // The pipeline's checkpoint up to its finish: the stages' tensors streamed to rank 0 and
  // written into the file (pipeline_io.cc); rank 0 gets the unfinished stream
  // (CheckpointStream, hashing at finish with `hash_at_finish`), every other rank nullptr.
  Result<std::unique_ptr<CheckpointStream>> stream_pipeline(const std::string& path,
                                                            bool hash_at_finish) const;
  // run()'s checkpoint at this step, written in the background (ckpt_writer_): rank 0 of a
  // data-parallel run copies the state and a thread writes it; a pipeline's rank 0 waits for
  // the previous write, receives the stages' tensors into the file while training waits, and a
  // thread hashes, syncs and renames it. Adds the seconds training waited to ckpt_blocked_s_.
  // Errors: the previous background write's, save()'s, stream_pipeline()'s.
  Status checkpoint(const std::string& path);
  // Whether config.checkpoint_every_s has passed since the last checkpoint (or the run's start),
  // by rank 0's clock, agreed by every rank: one 4-byte allreduce a step while it is set.
  Result<bool> checkpoint_due_by_time();
  Status resume_pipeline(const std::string& path);
  // The checkpoint's fields but the tensors; whether a loaded checkpoint fits this run (the
  // whole model's `params` and `state` floats), else invalid_input naming `path`.
  Checkpoint checkpoint_header() const;
  Status check_checkpoint(const CheckpointInfo& info, const std::string& path, int64_t params,
                          int64_t state) const;
  // Waits for the step's bucket allreduces (overlap), or runs them now; over grad_comm_.
  Status wait_buckets();
  // GPU: creates the device model from the host one (after the initial broadcast).
  Status setup_gpu(int max_batch);
  // GPU: logits (b, classes) of held-out images on the host (in dlogits_).
  Result<const float*> eval_logits_gpu(const float* images, int b);
  // GPU: host params / model state / optimizer moments -> device (after resume).
  Status upload_state_gpu();
  // GPU with a host communicator: copies bucket `index` of the device gradients to the host
  // gradient buffer (synchronous).
  Status stage_bucket_to_host(size_t index);
  Status make_buckets();
  // The loss sum of a local batch of B samples given its logits, and, when `dlogits` is not
  // null, its gradient there.
  double loss_and_gradient(const float* logits, const int32_t* labels, int B, float* dlogits);
  // Marks node `node`'s final tensors done; starts every bucket that became complete.
  void tensors_final(int node, bool traced);
  // The error run() returns when the global loss of a logged step is not finite, or the
  // parameters (`what`: "the loss is NaN", ...): invalid_input (the recipe's optimisation
  // settings cannot train this model), naming the step, the learning rate and the scaling
  // behind it.
  Error diverged_error(const std::string& what) const;
  // The allreduce options of bucket `b`: its algorithm (make_buckets() checked the name) and,
  // when the plan gave one, the ring's segment size.
  static comm::AllreduceOptions bucket_options(const Bucket& b);
  // Puts the n gradients in node-shared memory, or where that is refused in registered private
  // memory (collective over grad_comm_), and points the model at them.
  Status place_gradients(Model& m, size_t n);
  Status reduce_bucket_blocking(const Bucket& b);
  // Sums v[0..n) over the ranks (in place).
  Status allreduce_doubles(double* v, int n);
  // A small host-memory allreduce (loss, stop flag, evaluation counts) over comm_: recursive
  // doubling on host communicators, staged through device memory on an NCCL communicator.
  Status allreduce_small(void* v, size_t count, comm::DataType type, comm::ReduceOp op);
  // Starts bucket `index`'s allreduce on the communication thread; with `traced`, also records
  // when the comm thread finished it (bucket_done_).
  void start_bucket(size_t index, bool traced);

  TrainConfig config_;
  std::unique_ptr<ThreadPool> pool_;    // the rank's threads (before the models: they use it)
  comm::Communicator* comm_ = nullptr;  // the world (null with one rank)
  // Where gradients are summed: comm_ (data parallelism), a stage's replicas (pipelines; null
  // with one replica).
  comm::Communicator* grad_comm_ = nullptr;
  std::unique_ptr<PipelineStage, PipeDeleter> pipe_;
  const Dataset* train_ = nullptr;
  const Dataset* heldout_ = nullptr;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<BatchLoader> loader_;  // datasets read on demand
  std::vector<int32_t> eval_labels_;     // a chunk of held-out labels read by the loader
  comm::SharedBuffer shared_grads_;
  // Where node-shared memory was refused (a full /dev/shm): the gradients in private pages
  // registered with the node's ranks (comm/registration.h), which 'shm' and 'cma' reduce in
  // place. Declared before registered_grads_: the registration ends first.
  std::unique_ptr<float, void (*)(void*)> private_grads_{nullptr, &std::free};
  comm::Registration registered_grads_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;          // per parameter tensor: its bucket
  std::vector<int> bucket_left_;        // per bucket: tensors not yet final in this backward
  std::vector<int> bucket_ready_node_;  // per bucket: bucket_ready_nodes()
  int64_t predictions_ = 1;             // per sample: 1, or T for a language model
  int classes_ = 0;                     // scores per prediction
  std::vector<comm::Request> pending_;
  Buffer input_, dlogits_;
  std::vector<int32_t> labels_;
  std::vector<int64_t> indices_;
  int global_batch_ = 0;
  int64_t step_ = 0;
  StepMetrics last_;
  std::unique_ptr<TraceWriter> trace_;
  std::unique_ptr<Gpu, GpuDeleter> gpu_;
  comm::NcclCommunicator* nccl_ = nullptr;  // comm_, when it is an NCCL communicator
  std::vector<std::chrono::steady_clock::time_point> bucket_issued_, bucket_done_;
  const std::atomic<int>* stop_source_ = nullptr;
  bool stop_agreed_ = false;
  int stop_code_ = 0;
  bool diverged_ = false;
  CheckpointWriter ckpt_writer_;  // rank 0: the checkpoint being written
  double ckpt_blocked_s_ = 0.0;   // seconds run() waited for checkpoints
  int64_t ckpt_step_ = -1;        // the step of the last checkpoint run() wrote (-1: none)
  std::chrono::steady_clock::time_point ckpt_at_;  // when run() began or last checkpointed
  int64_t ckpt_count_ = 0;
};

}  // namespace dltune::engine
