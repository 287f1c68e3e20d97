#include "engine/trainer.h"

#include <chrono>
#include <cstring>

#include "comm/allreduce.h"
#include "common/log.h"
#include "engine/loss.h"
#include "engine/models.h"

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
  t->comm_ = comm && comm->size() > 1 ? comm : nullptr;
  t->nccl_ = dynamic_cast<comm::NcclCommunicator*>(t->comm_);
  t->train_ = &train;
  t->heldout_ = heldout;
  Result<ModelSpec> spec =
      config.layers.empty()
          ? builtin_model(config.model)
          : Result<ModelSpec>(ModelSpec{config.model, config.input, config.classes, config.layers});
  if (!spec) return spec.error();
  if (spec->input != train.dims)
    return invalid_input("model '" + config.model + "' expects inputs " + spec->input.str() +
                         " but dataset '" + train.name + "' has " + train.dims.str());
  if (spec->classes != train.classes)
    return invalid_input("model '" + config.model + "' has " + std::to_string(spec->classes) +
                         " classes but dataset '" + train.name + "' has " +
                         std::to_string(train.classes));
  auto model = Model::build(*spec);
  if (!model) return model.error();
  t->model_ = std::make_unique<Model>(std::move(*model));
  t->global_batch_ = config.global_batch_for(t->ranks());
  auto sampler = Sampler::create(train.size, t->global_batch_, t->ranks(), t->rank(), config.seed);
  if (!sampler) return sampler.error();
  t->sampler_ = std::make_unique<Sampler>(std::move(*sampler));
  Model& m = *t->model_;
  const int local_max = t->sampler_->count(0);
  m.reserve(std::max(local_max, 256));  // 256: evaluation batches
  m.init_params(config.seed);
  t->sgd_ = std::make_unique<Sgd>(m.num_params(), static_cast<float>(config.momentum),
                                  static_cast<float>(config.weight_decay));
  t->input_.resize(static_cast<size_t>(256 * train.dims.size()));
  t->input_.reserve(static_cast<size_t>(local_max * train.dims.size()));
  t->dlogits_.resize(static_cast<size_t>(std::max(local_max, 256) * spec->classes));
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
  if (t->comm_ && !t->nccl_) {
    const size_t bytes = static_cast<size_t>(m.num_params()) * sizeof(float);
    auto shared = t->comm_->alloc_shared(bytes);
    if (!shared) return shared.error().wrap("allocating the gradient buffer");
    t->shared_grads_ = std::move(*shared);
    m.set_grad_buffer(t->shared_grads_.as<float>());
    comm::BroadcastOptions bo;
    DLTUNE_TRY_CTX(comm::broadcast(*t->comm_, m.params(), bytes, bo),
                   std::string("broadcasting the initial parameters"));
  }
  if (config.device == "gpu")  // after the host broadcast: the device starts from rank 0's
    DLTUNE_TRY_CTX(t->setup_gpu(*spec, std::max(local_max, 256)), std::string("device 'gpu'"));
  return t;
}

Status Trainer::make_buckets() {
  // Walk layers last to first, closing a bucket at a layer boundary once it holds at least
  // bucket_bytes; buckets therefore cover [0, num_params) from the end backwards.
  const int64_t limit = static_cast<int64_t>(config_.bucket_bytes / sizeof(float));
  int64_t end = model_->num_params();
  for (int i = model_->num_layers() - 1; i >= 0; --i) {
    const int64_t begin = model_->param_offset(i);
    if (model_->layer(i).num_params() == 0) continue;
    if (end - begin >= limit || i == 0 || begin == 0) {
      buckets_.push_back({begin, end, ""});
      end = begin;
    }
  }
  if (end > 0) buckets_.push_back({0, end, ""});
  for (auto& b : buckets_) {
    const AlgorithmRange& r =
        config_.range_for(static_cast<uint64_t>(b.end - b.begin) * sizeof(float));
    b.algorithm = r.algorithm;
    b.segment_bytes = r.segment_bytes;
    if (nccl_) continue;  // NCCL picks its own algorithm (options fixed at its creation)
    auto algo = comm::parse_algorithm(b.algorithm);
    if (!algo) return algo.error().wrap("train config: key 'algorithms'");
  }
  return ok_status();
}

Status Trainer::set_communication(uint64_t bucket_bytes, bool overlap) {
  if (bucket_bytes == 0) return invalid_input("set_communication: bucket_bytes must be positive");
  if (bucket_bytes == config_.bucket_bytes && overlap == config_.overlap) return ok_status();
  const uint64_t old_bytes = config_.bucket_bytes;
  const bool old_overlap = config_.overlap;
  std::vector<Bucket> old = std::move(buckets_);
  buckets_.clear();
  config_.bucket_bytes = bucket_bytes;
  config_.overlap = overlap;
  if (Status st = make_buckets(); !st) {
    config_.bucket_bytes = old_bytes;
    config_.overlap = old_overlap;
    buckets_ = std::move(old);
    return st;
  }
  bucket_issued_.assign(buckets_.size(), {});
  bucket_done_.assign(buckets_.size(), {});
  return ok_status();
}

comm::AllreduceOptions Trainer::bucket_options(const Bucket& b) {
  comm::AllreduceOptions opts;
  opts.algorithm = *comm::parse_algorithm(b.algorithm);  // checked by make_buckets()
  if (b.segment_bytes != 0) opts.segment_bytes = static_cast<size_t>(b.segment_bytes);
  return opts;
}

Status Trainer::reduce_bucket_blocking(const Bucket& b) {
  const comm::AllreduceOptions opts = bucket_options(b);
  float* g = model_->grads() + b.begin;
  return comm::allreduce(*comm_, g, g, static_cast<size_t>(b.end - b.begin), comm::DataType::kF32,
                         comm::ReduceOp::kSum, opts);
}

Status Trainer::allreduce_doubles(double* v, int n) {
  return allreduce_small(v, static_cast<size_t>(n), comm::DataType::kF64, comm::ReduceOp::kSum);
}

void Trainer::start_bucket(size_t index, bool traced) {
  const Bucket& b = buckets_[index];
  const comm::AllreduceOptions opts = bucket_options(b);
  float* g = model_->grads() + b.begin;
  if (traced) bucket_issued_[index] = Clock::now();
  pending_.push_back(comm::allreduce_async(*comm_, g, g, static_cast<size_t>(b.end - b.begin),
                                           comm::DataType::kF32, comm::ReduceOp::kSum, opts));
  if (traced)  // the comm thread runs operations in order: this marks the bucket's end
    pending_.push_back(comm_->start_async([this, index] {
      bucket_done_[index] = Clock::now();
      return ok_status();
    }));
}

Result<double> Trainer::compute_cpu(int B, uint64_t seed, bool traced, StepTimes& tm) {
  const float* logits = model_->forward(input_.data(), B, true, seed);
  const int K = model_->spec().classes;
  double loss = softmax_cross_entropy(logits, labels_.data(), B, K,
                                      static_cast<float>(global_batch_), dlogits_.data());
  tm.forward_end = Clock::now();
  // Backward, starting each bucket's allreduce as soon as its gradients are final.
  size_t next = 0;
  auto ready = [&](int64_t from) {
    if (!comm_ || !config_.overlap) return;
    while (next < buckets_.size() && from <= buckets_[next].begin) start_bucket(next++, traced);
  };
  model_->backward(input_.data(), dlogits_.data(), B, ready);
  tm.backward_end = Clock::now();
  Status st;
  if (comm_) {
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
  }
  if (!st)
    return std::move(st).error().wrap("allreducing gradients at step " + std::to_string(step_));
  tm.reduce_end = Clock::now();
  const double lr = learning_rate(config_, global_batch_, step_);
  sgd_->step(model_->params(), model_->grads(), static_cast<float>(lr));
  tm.update_end = Clock::now();
  return loss;
}

Result<double> Trainer::step(bool want_loss) {
  const auto t0 = Clock::now();
  sampler_->indices(step_, indices_);
  const int B = static_cast<int>(indices_.size());
  const int64_t sz = train_->dims.size();
  labels_.resize(static_cast<size_t>(B));
  for (int i = 0; i < B; ++i) {
    std::memcpy(input_.data() + i * sz, train_->image(indices_[i]), sizeof(float) * sz);
    labels_[i] = train_->labels[indices_[i]];
  }
  const uint64_t seed = Rng::mix(Rng::mix(config_.seed, static_cast<uint64_t>(step_)), rank());
  const bool traced = trace_->enabled() && TraceWriter::traced_step(step_);
  StepTimes tm;
  auto computed = gpu_ ? compute_gpu(B, seed, traced, tm) : compute_cpu(B, seed, traced, tm);
  if (!computed) return computed.error();
  const double loss = *computed;
  const double lr = learning_rate(config_, global_batch_, step_);
  const auto tf = tm.forward_end, t1 = tm.backward_end, t2 = tm.reduce_end, t3 = tm.update_end;
  double mean = loss / B;
  // The loss and the stop flag share one allreduce, so every rank stops after the same step.
  const int code = stop_source_ ? stop_source_->load() : 0;
  stop_agreed_ = code != 0;
  stop_code_ = code;
  if (want_loss || stop_source_) {
    double sums[2] = {loss, code != 0 ? 1.0 : 0.0};
    DLTUNE_TRY(allreduce_doubles(sums, 2));
    if (want_loss) mean = sums[0] / global_batch_;
    stop_agreed_ = sums[1] > 0.0;
    if (stop_agreed_ && comm_) {  // once per run: which code to report
      int32_t c = code;
      DLTUNE_TRY(allreduce_small(&c, 1, comm::DataType::kI32, comm::ReduceOp::kMax));
      stop_code_ = c;
    }
  }
  const auto t4 = Clock::now();
  if (traced) {
    trace_->complete("forward", kTraceCompute, t0, tf, step_);
    trace_->complete("backward", kTraceCompute, tf, t1, step_);
    if (comm_) {
      if (config_.overlap) trace_->complete("wait for allreduce", kTraceCompute, t1, t2, step_);
      Clock::time_point prev_end = tf;
      for (size_t i = 0; i < buckets_.size(); ++i) {  // the comm thread ran them in order
        const auto begin = std::max(bucket_issued_[i], prev_end);
        const uint64_t bytes = static_cast<uint64_t>(buckets_[i].end - buckets_[i].begin) * 4;
        trace_->complete(bucket_event_name(i, buckets_[i].algorithm, bytes), kTraceComm, begin,
                         bucket_done_[i], step_);
        prev_end = bucket_done_[i];
      }
      trace_->complete("loss allreduce", kTraceComm, t3, t4, step_);
    }
    trace_->complete("optimizer", kTraceCompute, t2, t3, step_);
  }
  const double step_s = seconds_since(t0);
  last_ = StepMetrics{step_,
                      mean,
                      lr,
                      global_batch_ / step_s,
                      std::chrono::duration<double>(t1 - t0).count(),
                      std::chrono::duration<double>(t2 - t1).count(),
                      step_s,
                      global_batch_};
  ++step_;
  return mean;
}

}  // namespace dltune::engine
