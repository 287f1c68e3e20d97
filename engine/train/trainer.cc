#include "engine/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "comm/allreduce.h"
#include "common/env.h"
#include "common/log.h"
#include "engine/gpu/gpu_context.h"
#include "engine/io/safetensors.h"
#include "engine/ops/library_threads.h"
#include "engine/ops/loss.h"
#include "engine/train/pipeline.h"
#include "planning/buckets.h"

namespace dltune::engine {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

Trainer::~Trainer() {
  for (auto& r : pending_) (void)r.wait();  // never leave the comm thread on freed buffers
}

int Trainer::rank() const { return comm_ ? comm_->rank() : 0; }
int Trainer::ranks() const { return comm_ ? comm_->size() : 1; }

Result<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& config,
                                                 comm::Communicator* comm, const Dataset& train,
                                                 const Dataset* heldout) {
  DLTUNE_TRY(validate(config));
  std::unique_ptr<Trainer> t(new Trainer());
  t->config_ = config;
  // The rank's threads; BLAS and oneDNN then run inside them, one thread each.
  use_engine_threads_for_libraries();
  t->pool_ = std::make_unique<ThreadPool>(config.device == "gpu" ? 1 : config.threads);
  t->comm_ = comm && comm->size() > 1 ? comm : nullptr;
  t->nccl_ = dynamic_cast<comm::NcclCommunicator*>(t->comm_);
  t->train_ = &train;
  t->heldout_ = heldout;
  auto graph = model_graph(config);
  if (!graph) return graph.error();
  if (config.stages > 1) {
    if (!t->comm_)
      return invalid_input("train config: key 'stages': " + std::to_string(config.stages) +
                           " stages need as many ranks per replica; this job has 1 rank");
    DLTUNE_TRY(t->setup_pipeline(*graph));
  }
  // A GPU run on a machine without one says so before the host model is built (after the
  // layout's own checks): gpt2-small's host model (8 x 1024 tokens) took 23 s to build and
  // initialise before this same error.
  if (config.device == "gpu") DLTUNE_TRY_CTX(gpu::gpu_device_count(), std::string("device 'gpu'"));
  PipelineStage* pipe = t->pipe_.get();
  auto model = Model::build(pipe ? pipe->def().graph : *graph, config.model);
  if (!model) return model.error();
  t->model_ = std::make_unique<Model>(std::move(*model));
  Model& m = *t->model_;
  if (pipe) m.set_first_node(pipe->def().begin);
  DLTUNE_TRY(t->configure_model(m));
  // The whole model's input and output (a stage's are boundary activations).
  const recipes::Shape& out = pipe ? pipe->full_info.output() : m.output_shape();
  const recipes::Shape& model_input = pipe ? pipe->full.input : m.input_shape();
  t->classes_ = static_cast<int>(out.back());
  t->predictions_ = recipes::numel(out) / out.back();
  if (model_input != train.shape)
    return invalid_input("model '" + config.model + "' expects inputs " +
                         recipes::describe_shape(model_input) + " but dataset '" + train.name +
                         "' has " + recipes::describe_shape(train.shape));
  // A language model reads text as bytes (256 classes): any vocabulary of at least 256 tokens
  // holds them (GPT-2's 50257 too), the rest of its rows never being a target.
  const bool tokens = graph->input_kind == recipes::InputKind::kTokens;
  const bool classes_fit = tokens ? t->classes_ >= train.classes : t->classes_ == train.classes;
  if (!classes_fit || t->predictions_ != train.label_width)
    return invalid_input("model '" + config.model + "' outputs " + recipes::describe_shape(out) +
                         " but dataset '" + train.name + "' has " +
                         std::to_string(train.label_width) + " label(s) of " +
                         std::to_string(train.classes) + " classes per sample");
  t->global_batch_ = config.global_batch_for(t->ranks());
  DLTUNE_TRY(t->setup_data(train, heldout));
  const int local_max = t->sampler_->count(0);
  // Evaluation runs in chunks of the training batch: no extra activation memory. With
  // micro-batches the model holds one chunk.
  const int chunk_max = (local_max + config.microbatches - 1) / config.microbatches;
  m.reserve(chunk_max);
  m.init_params(config.seed);
  if (pipe)
    DLTUNE_TRY(t->init_pipeline_weights());
  else if (!config.init_from.empty())
    DLTUNE_TRY_CTX(load_safetensors_into(m, config.init_from), std::string("training.init_from"));
  const auto n = m.num_params();
  if (config.optimizer == "adamw")
    t->opt_ = std::make_unique<AdamW>(
        n, static_cast<float>(config.beta1), static_cast<float>(config.beta2),
        static_cast<float>(config.eps), static_cast<float>(config.weight_decay));
  else
    t->opt_ = std::make_unique<Sgd>(n, static_cast<float>(config.momentum),
                                    static_cast<float>(config.weight_decay));
  t->opt_->set_thread_pool(t->pool_.get());
  const auto in_numel = static_cast<size_t>(m.input_numel());
  if (!pipe || pipe->first()) t->input_.resize(static_cast<size_t>(local_max) * in_numel);
  // The loss gradient of one chunk; a pipeline's last stage keeps every micro-batch's.
  if (!pipe || pipe->last())
    t->dlogits_.resize(static_cast<size_t>(pipe ? local_max : chunk_max) *
                       static_cast<size_t>(recipes::numel(out)));
  DLTUNE_TRY(t->make_buckets());
  t->bucket_issued_.resize(t->buckets_.size());
  t->bucket_done_.resize(t->buckets_.size());
  auto trace = TraceWriter::open(config.trace_path, t->rank());
  if (!trace) return trace.error();
  t->trace_ = std::move(*trace);
  if (t->nccl_ && config.device != "gpu")
    return invalid_input(
        "train config: key 'device': an NCCL communicator needs device 'gpu', got '" +
        config.device + "'");
  t->grad_comm_ = pipe ? pipe->replicas_comm.get() : t->comm_;
  if (t->grad_comm_ && !t->nccl_) {
    comm::Communicator& gc = *t->grad_comm_;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    DLTUNE_TRY(t->place_gradients(m, static_cast<size_t>(n)));
    comm::BroadcastOptions bo;
    DLTUNE_TRY_CTX(comm::broadcast(gc, m.params(), bytes, bo),
                   std::string("broadcasting the initial parameters"));
    if (m.num_state() > 0)
      DLTUNE_TRY_CTX(
          comm::broadcast(gc, m.state(), static_cast<size_t>(m.num_state()) * sizeof(float), bo),
          std::string("broadcasting the initial model state"));
  }
  if (pipe) DLTUNE_TRY(t->add_pipeline_slots(local_max));
  if (config.device == "gpu")  // after the host broadcast: the device starts from rank 0's
    DLTUNE_TRY_CTX(t->setup_gpu(local_max), std::string("device 'gpu'"));
  return t;
}

Status Trainer::setup_data(const Dataset& train, const Dataset* heldout) {
  // Data parallelism over the replicas: a pipeline's stages of one replica take one slice.
  const PipelineStage* pipe = pipe_.get();
  const int replicas = pipe ? pipe->replicas : ranks();
  const int replica = pipe ? pipe->replica : rank();
  auto sampler = Sampler::create(train.size, global_batch_, replicas, replica, config_.seed);
  if (!sampler) return sampler.error();
  sampler_ = std::make_unique<Sampler>(std::move(*sampler));
  if (train.streamed() || (heldout && heldout->streamed())) {
    // A pipeline's first stage reads the inputs, its last the labels.
    LoaderOptions lo;
    lo.threads = std::max(1, std::atoi(env::get(env::kLoaderThreads).c_str()));
    lo.depth = std::max(1, std::atoi(env::get(env::kLoaderPrefetch).c_str()));
    lo.seed = config_.seed;
    lo.inputs = !pipe || pipe->first();
    lo.labels = !pipe || pipe->last();
    lo.end_step = config_.steps;
    loader_ = std::make_unique<BatchLoader>(train, *sampler_, lo);
  }
  return ok_status();
}

Status Trainer::configure_model(Model& m) const {
  m.set_thread_pool(pool_.get());
  Precision p = Precision::kFp32;
  parse_precision(config_.precision, &p);  // validate() checked it
  if (p == Precision::kBf16 && config_.device != "gpu") log_bf16_path_once();
  m.set_precision(p);
  DLTUNE_TRY_CTX(m.set_kernels(config_.kernels), std::string("train config: key 'kernels'"));
  return ok_status();
}

Status Trainer::make_buckets() {
  // The buckets of the step-time model (planning/buckets.h says how they are cut), so that
  // what `dltune predict` and the layout search charge is what runs.
  bucket_of_.assign(model_->info().params.size(), -1);
  for (const planning::GradBucket& p :
       planning::gradient_buckets(model_->info(), config_.bucket_bytes)) {
    Bucket b;
    b.begin = p.begin;
    b.end = p.end;
    b.tensors = static_cast<int>(p.tensors.size());
    for (int t : p.tensors) bucket_of_[static_cast<size_t>(t)] = static_cast<int>(buckets_.size());
    buckets_.push_back(std::move(b));
  }
  bucket_left_.assign(buckets_.size(), 0);
  bucket_ready_node_.assign(buckets_.size(), -1);
  for (auto& b : buckets_) {
    const AlgorithmRange& r =
        config_.range_for(static_cast<uint64_t>(b.end - b.begin) * sizeof(float));
    b.algorithm = r.algorithm;
    b.segment_bytes = r.segment_bytes;
    if (nccl_) continue;  // NCCL picks its own algorithm per call (its tuner plugin: the plan)
    if (is_nccl(b.algorithm))
      return invalid_input(
          "train config: 'algorithms': " + std::string(algorithm_name(b.algorithm)) +
          " is NCCL's; the CPU engine runs ring, rd, rabenseifner, tree, hier, "
          "shm or native");
  }
  return ok_status();
}

Status Trainer::set_communication(uint64_t bucket_bytes, bool overlap) {
  if (bucket_bytes == 0) return invalid_input("set_communication: bucket_bytes must be positive");
  if (bucket_bytes == config_.bucket_bytes && overlap == config_.overlap) return ok_status();
  const uint64_t old_bytes = config_.bucket_bytes;
  const bool old_overlap = config_.overlap;
  std::vector<Bucket> old = std::move(buckets_);
  std::vector<int> old_of = bucket_of_;
  buckets_.clear();
  config_.bucket_bytes = bucket_bytes;
  config_.overlap = overlap;
  if (Status st = make_buckets(); !st) {
    config_.bucket_bytes = old_bytes;
    config_.overlap = old_overlap;
    buckets_ = std::move(old);
    bucket_of_ = std::move(old_of);
    bucket_left_.assign(buckets_.size(), 0);
    bucket_ready_node_.assign(buckets_.size(), -1);
    return st;
  }
  bucket_issued_.assign(buckets_.size(), {});
  bucket_done_.assign(buckets_.size(), {});
  return ok_status();
}

comm::AllreduceOptions Trainer::bucket_options(const Bucket& b) {
  comm::AllreduceOptions opts;
  opts.algorithm = b.algorithm;  // a host algorithm: make_buckets() checked it
  if (b.segment_bytes != 0) opts.segment_bytes = static_cast<size_t>(b.segment_bytes);
  return opts;
}

Status Trainer::place_gradients(Model& m, size_t n) {
  comm::Communicator& gc = *grad_comm_;
  const size_t bytes = n * sizeof(float);
  auto shared = gc.alloc_shared(bytes);
  if (shared) {
    shared_grads_ = std::move(*shared);
    m.set_grad_buffer(shared_grads_.as<float>());
    return ok_status();
  }
  // Every local rank saw the refusal (alloc_shared is collective): all register instead.
  // Whole pages, so that every page of the gradients is shared.
  const size_t page = 4096, rounded = (bytes + page - 1) / page * page;
  private_grads_.reset(static_cast<float*>(std::aligned_alloc(page, rounded)));
  if (!private_grads_) return shared.error().wrap("allocating the gradient buffer");
  std::memset(private_grads_.get(), 0, rounded);
  auto reg = gc.register_memory(private_grads_.get(), rounded);
  if (!reg || !reg->active()) {
    return shared.error().wrap(
        "allocating the gradient buffer (and registering private memory instead: " +
        (reg ? reg->reason() : reg.error().message()) + ")");
  }
  registered_grads_ = std::move(*reg);
  if (gc.local().rank() == 0) {
    DLTUNE_LOG(kWarn, "train") << "the gradients are in private memory registered with the "
                                  "node's ranks ('shm' reduces them as 'cma' does): node-shared "
                                  "memory was refused ("
                               << shared.error().message() << ")";
  }
  m.set_grad_buffer(private_grads_.get());
  return ok_status();
}

Status Trainer::reduce_bucket_blocking(const Bucket& b) {
  const comm::AllreduceOptions opts = bucket_options(b);
  float* g = model_->grads() + b.begin;
  return comm::allreduce(*grad_comm_, g, g, static_cast<size_t>(b.end - b.begin),
                         comm::DataType::kF32, comm::ReduceOp::kSum, opts);
}

Status Trainer::allreduce_doubles(double* v, int n) {
  return allreduce_small(v, static_cast<size_t>(n), comm::DataType::kF64, comm::ReduceOp::kSum);
}

void Trainer::start_bucket(size_t index, bool traced) {
  const Bucket& b = buckets_[index];
  const comm::AllreduceOptions opts = bucket_options(b);
  float* g = model_->grads() + b.begin;
  if (traced) bucket_issued_[index] = Clock::now();
  pending_.push_back(comm::allreduce_async(*grad_comm_, g, g, static_cast<size_t>(b.end - b.begin),
                                           comm::DataType::kF32, comm::ReduceOp::kSum, opts));
  if (traced)  // the comm thread runs operations in order: this marks the bucket's end
    pending_.push_back(grad_comm_->start_async([this, index] {
      bucket_done_[index] = Clock::now();
      return ok_status();
    }));
}

double Trainer::loss_and_gradient(const float* logits, const int32_t* labels, int B,
                                  float* dlogits) {
  // logits (B x predictions, classes) against labels (B x predictions); the gradient is divided
  // by every rank's predictions together, so the summed gradients are the global mean's.
  const auto rows = static_cast<int>(B * predictions_);
  const auto denom = static_cast<float>(int64_t{global_batch_} * predictions_);
  return softmax_cross_entropy(*pool_, logits, labels, rows, classes_, denom, dlogits);
}

void Trainer::tensors_final(int node, bool traced) {
  for (int t : model_->final_after(node)) {
    const int b = bucket_of_[static_cast<size_t>(t)];
    if (--bucket_left_[static_cast<size_t>(b)] == 0) {
      bucket_ready_node_[static_cast<size_t>(b)] = node;
      start_bucket(static_cast<size_t>(b), traced);
    }
  }
}

Result<double> Trainer::compute_cpu(int B, uint64_t seed, bool traced, StepTimes& tm) {
  // Micro-batches (gradient accumulation): the local batch in M chunks split as the sampler
  // splits a global batch over ranks, gradients added over the chunks, so 1 rank with M
  // micro-batches computes what M ranks compute (batch-norm statistics per chunk as per rank).
  // Each bucket's allreduce starts during the last chunk's backward, as soon as all its
  // gradients are final.
  const int M = std::min(config_.microbatches, B);
  const int64_t sz = model_->input_numel(), lw = predictions_;
  const bool overlap = grad_comm_ && config_.overlap;
  for (size_t b = 0; b < buckets_.size(); ++b) bucket_left_[b] = buckets_[b].tensors;
  std::function<void(int)> ready;
  if (overlap) ready = [&](int node) { tensors_final(node, traced); };
  double loss = 0.0;
  int offset = 0;
  for (int m = 0; m < M; ++m) {
    const int b = B / M + (m < B % M ? 1 : 0);
    const float* x = input_.data() + offset * sz;
    const uint64_t s = M == 1 ? seed : Rng::mix(seed, static_cast<uint64_t>(rank() * M + m));
    const float* logits = model_->forward(x, b, true, s);
    loss += loss_and_gradient(logits, labels_.data() + offset * lw, b, dlogits_.data());
    if (m == 0) tm.forward_end = Clock::now();
    model_->backward(x, dlogits_.data(), b, m + 1 == M ? ready : std::function<void(int)>{}, m > 0);
    offset += b;
  }
  tm.backward_end = Clock::now();
  Status st = wait_buckets();
  if (!st)
    return std::move(st).error().wrap("allreducing gradients at step " + std::to_string(step_));
  tm.reduce_end = Clock::now();
  if (config_.clip_grad_norm > 0.0)
    clip_grad_norm(model_->grads(), model_->num_params(), config_.clip_grad_norm, *pool_);
  const double lr = learning_rate(config_, step_);
  opt_->step(model_->params(), model_->grads(), static_cast<float>(lr));
  tm.update_end = Clock::now();
  return loss;
}

Status Trainer::wait_buckets() {
  Status st;
  if (!grad_comm_) return st;
  if (config_.overlap) {
    for (auto& r : pending_)
      if (auto s = r.wait(); !s && st) st = s;
    pending_.clear();
  } else {
    for (size_t i = 0; i < buckets_.size() && st; ++i) {
      bucket_issued_[i] = Clock::now();
      st = reduce_bucket_blocking(buckets_[i]);
      bucket_done_[i] = Clock::now();
    }
  }
  return st;
}

Result<double> Trainer::step(bool want_loss) {
  const auto t0 = Clock::now();
  sampler_->indices(step_, indices_);
  const int B = static_cast<int>(indices_.size());
  const int64_t sz = train_->sample_numel(), lw = train_->label_width;
  labels_.resize(static_cast<size_t>(B * lw));
  // A pipeline's first stage reads the inputs, its last the labels.
  const bool inputs = !pipe_ || pipe_->first(), labels = !pipe_ || pipe_->last();
  if (train_->streamed()) {
    DLTUNE_TRY(
        loader_->next(step_, inputs ? input_.data() : nullptr, labels ? labels_.data() : nullptr));
  } else {
    for (int i = 0; i < B; ++i) {
      if (inputs)
        std::memcpy(input_.data() + i * sz, train_->image(indices_[i]), sizeof(float) * sz);
      if (labels)
        std::memcpy(labels_.data() + i * lw, train_->label(indices_[i]), sizeof(int32_t) * lw);
    }
  }
  const auto t_data = Clock::now();  // the batch is in place: computation starts
  // Dropout masks: per rank, or (micro-batches) per rank and chunk (compute_cpu()); pipelines
  // per replica and micro-batch (compute_pipeline()).
  const uint64_t step_seed = Rng::mix(config_.seed, static_cast<uint64_t>(step_));
  const uint64_t seed = config_.microbatches > 1 ? step_seed : Rng::mix(step_seed, rank());
  const bool traced = trace_->enabled() && TraceWriter::traced_step(step_);
  StepTimes tm;
  auto computed = pipe_  ? compute_pipeline(B, step_seed, traced, tm)
                  : gpu_ ? compute_gpu(B, seed, traced, tm)
                         : compute_cpu(B, seed, traced, tm);
  if (!computed) return computed.error();
  const double loss = *computed;
  const double lr = learning_rate(config_, step_);
  const auto tf = tm.forward_end, t1 = tm.backward_end, t2 = tm.reduce_end, t3 = tm.update_end;
  const double per_sample_predictions = static_cast<double>(predictions_);
  double mean = loss / (B * per_sample_predictions);
  // The loss and the stop flag share one allreduce, so every rank stops after the same step.
  const int code = stop_source_ ? stop_source_->load() : 0;
  stop_agreed_ = code != 0;
  stop_code_ = code;
  if (want_loss || stop_source_) {
    double sums[2] = {loss, code != 0 ? 1.0 : 0.0};
    DLTUNE_TRY(allreduce_doubles(sums, 2));
    if (want_loss) mean = sums[0] / (global_batch_ * per_sample_predictions);
    stop_agreed_ = sums[1] > 0.0;
    if (stop_agreed_ && comm_) {  // once per run: which code to report
      int32_t c = code;
      DLTUNE_TRY(allreduce_small(&c, 1, comm::DataType::kI32, comm::ReduceOp::kMax));
      stop_code_ = c;
    }
  }
  const auto t4 = Clock::now();
  if (traced) {
    if (!pipe_) {  // a pipeline traced each micro-batch's passes
      if (train_->streamed()) trace_->complete("wait for data", kTraceCompute, t0, t_data, step_);
      trace_->complete("forward", kTraceCompute, t_data, tf, step_);
      trace_->complete("backward", kTraceCompute, tf, t1, step_);
    }
    if (grad_comm_) {
      if (config_.overlap) trace_->complete("wait for allreduce", kTraceCompute, t1, t2, step_);
      Clock::time_point prev_end = tf;
      for (size_t i = 0; i < buckets_.size(); ++i) {  // the comm thread ran them in order
        const auto begin = std::max(bucket_issued_[i], prev_end);
        const uint64_t bytes = static_cast<uint64_t>(buckets_[i].end - buckets_[i].begin) * 4;
        trace_->complete(bucket_event_name(i, algorithm_name(buckets_[i].algorithm), bytes),
                         kTraceComm, begin, bucket_done_[i], step_);
        prev_end = bucket_done_[i];
      }
    }
    if (comm_) trace_->complete("loss allreduce", kTraceComm, t3, t4, step_);
    trace_->complete("optimizer", kTraceCompute, t2, t3, step_);
  }
  const double step_s = seconds_since(t0);
  last_ = StepMetrics{step_,
                      mean,
                      lr,
                      global_batch_ / step_s,
                      std::chrono::duration<double>(t1 - t_data).count(),
                      std::chrono::duration<double>(t2 - t1).count(),
                      step_s,
                      global_batch_,
                      std::chrono::duration<double>(t_data - t0).count()};
  ++step_;
  return mean;
}

}  // namespace dltune::engine
