// The trial search's work on one candidate: its data and trainer (built, or its family's
// switched to its buckets and overlap), its steps, the ranks' agreement after each run of steps
// (a step that broke or diverged on some ranks), its timed chunks and its buckets' allreduce
// times. The rounds that call them: trial_search.cc.
#include "engine/worker/trial_search_impl.h"

namespace dltune::engine::trial_detail {

Result<const Dataset*> Search::data_for(const TrainConfig& c) {
  auto graph = model_graph(c);
  if (!graph) return graph.error();
  int64_t size = c.train_size;
  if (c.data.starts_with("synthetic")) {
    int64_t g = 0;
    for (const Cand& k : cands_) g = std::max<int64_t>(g, k.global_batch);
    double sample_bytes = 4;
    for (int64_t d : graph->input) sample_bytes *= static_cast<double>(d);
    const auto fit = static_cast<int64_t>(kTrialDataBytes / sample_bytes);
    size = std::min(
        size, std::max<int64_t>(2 * g, std::min<int64_t>(fit, std::max<int64_t>(4096, 8 * g))));
  }
  const std::string key = c.data + "|" + std::to_string(size) + "|" + std::to_string(c.seed) + "|" +
                          recipes::describe_shape(graph->input) + "|" + std::to_string(c.classes);
  auto it = data_.find(key);
  if (it != data_.end()) return &it->second;
  Dataset d;
  DLTUNE_TRY(load_train_data(c, &d, nullptr, size));
  return &data_.emplace(key, std::move(d)).first->second;
}

Status Search::prepare(Cand& c) {
  if (!trainer(c)) DLTUNE_TRY(build(c));
  if (c.failed || !trainer(c)) return ok_status();
  if (Status st = trainer(c)->set_communication(c.cfg.bucket_bytes, c.cfg.overlap); !st) {
    fail(c, st.error().message());  // the same on every rank: it depends on the config only
  }
  return ok_status();
}

Status Search::build(Cand& c) {
  const double t = now();
  const double agreed_start = elapsed_;
  log_.write({{"event", "trial_build"},
              {"candidate", index(c)},
              {"label", c.label},
              {"round", halving_->rounds()}});
  std::string why;
  MemoryBaseline base;
  try {
    set_blas_threads(c.cfg.threads);
    auto d = data_for(c.cfg);
    if (!d) {
      why = d.error().message();
    } else {
      DLTUNE_LOG(kInfo, "tuner") << "data ready after " << now() - t << " s";
      base = MemoryBaseline::take(/*trim=*/true);  // earlier trainers' pages leave first
      auto tr = Trainer::create(c.cfg, world_, **d, nullptr);
      if (!tr) {
        why = tr.error().message();
      } else {
        families_[c.family].trainer = std::move(*tr);
        families_[c.family].first_loss = 0;
        ++trainers_built_;
      }
    }
  } catch (const std::bad_alloc&) {
    why = "out of memory building the trainer (batch too large?)";
  }
  std::vector<double> flag = {why.empty() ? 0.0 : 1.0, now()};
  DLTUNE_TRY(reduce_max(flag));
  elapsed_ = flag[1];
  if (flag[0] != 0) {
    fail(c, why.empty() ? "failed on another rank" : why);
  } else {
    Steps warm = run_steps(c, s_.halving.warmup_steps, nullptr);
    std::vector<double> end = {now()};
    auto stands = agree(c, warm, &end);
    if (!stands) return stands.error();
    elapsed_ = end[0];
    if (*stands) {
      cost_.record_setup(c.global_batch, elapsed_ - agreed_start);
      DLTUNE_TRY(measure_memory(c, base));
    }
  }
  if (trainer(c)) trainer(c)->release_scratch();
  setup_s_ += now() - t;
  DLTUNE_LOG(kInfo, "tuner") << "candidate " << c.label << " set up in " << now() - t << " s";
  return ok_status();
}

Status Search::measure_memory(Cand& c, const MemoryBaseline& base) {
  const auto n = static_cast<size_t>(ranks()), me = static_cast<size_t>(rank());
  std::vector<double> v(2 * n, 0.0);  // rank r: [2r] its estimate, [2r + 1] its peak (0: none)
  if (auto est = rank_memory(c.cfg, ranks(), rank())) v[2 * me] = static_cast<double>(est->total());
  v[2 * me + 1] = static_cast<double>(std::max<int64_t>(0, base.peak_bytes(*trainer(c))));
  DLTUNE_TRY_CTX(reduce_sum(v), std::string("gathering the ranks' memory"));
  size_t worst = 0;
  for (size_t r = 1; r < n; ++r)
    if (v[2 * r] > v[2 * worst]) worst = r;
  Family& f = families_[c.family];
  f.memory_estimate = v[2 * worst] > 0 ? static_cast<int64_t>(v[2 * worst]) : -1;
  f.memory_peak = v[2 * worst + 1] > 0 ? static_cast<int64_t>(v[2 * worst + 1]) : -1;
  DLTUNE_LOG(kInfo, "tuner") << "candidate " << c.label << ": memory estimate " << f.memory_estimate
                             << " B, measured peak " << f.memory_peak << " B (rank " << worst
                             << ")";
  return ok_status();
}

Steps Search::step(Cand& c) {
  Family& f = families_[c.family];
  ++steps_run_;
  const Result<double> r = [&]() -> Result<double> {
    if (fault_step_ == steps_run_) {
      return internal_error("injected step failure (" + std::string(env::kFaultTrialStep.name) +
                            ")");
    }
    try {
      return f.trainer->step(false);
    } catch (const std::bad_alloc&) {
      return internal_error("out of memory in a training step (batch too large?)");
    }
  }();
  if (!r) return {r.error().message(), true, false};
  if (timing_) {
    c.split_compute_s += f.trainer->last().compute_s;
    c.split_comm_s += f.trainer->last().comm_s;
    ++c.split_steps;
  }
  if (std::isfinite(*r)) return {"", false, false, *r, 1};
  return {diverged_why(c, "the loss is not finite"), false, true};
}

std::string Search::diverged_why(const Cand& c, const std::string& what) {
  return "diverged: " + what + " after " + std::to_string(trainer(c)->steps_done()) +
         " steps at global batch " + std::to_string(c.global_batch) +
         " (its learning rate is too high)";
}

void Search::drop_idle_trainers(const std::vector<size_t>& alive) {
  std::vector<bool> used(families_.size(), false);
  for (size_t i : alive) used[cands_[i].family] = true;
  for (size_t f = 0; f < families_.size(); ++f) {
    if (!used[f]) families_[f].trainer.reset();
  }
}

void Search::fail(Cand& c, const std::string& why, bool family_diverged) {
  c.failed = true;
  c.reason = why;
  failed_now_.push_back(static_cast<size_t>(&c - cands_.data()));
  if (halving_) halving_->fail(static_cast<size_t>(&c - cands_.data()), why);
  families_[c.family].trainer.reset();  // a sibling that runs again builds a fresh one
  DLTUNE_LOG(kInfo, "tuner") << "candidate " << c.label << " failed: " << why;
  // Divergence belongs to the optimisation (batch and learning-rate schedule), not to the
  // bucket or overlap setting: the whole family fails with it, eliminated members included,
  // so the search spends no more steps on it.
  if (!family_diverged) return;
  for (Cand& s : cands_) {
    if (!s.failed && s.family == c.family) {
      fail(s, "diverged, as " + c.label + " (same batch and learning rate) did");
    }
  }
}

Steps Search::run_steps(Cand& c, int n, std::vector<double>* times) {
  Steps out;
  for (int i = 0; i < n; ++i) {
    const auto t = Clock::now();
    const Steps one = step(c);
    const double s = std::chrono::duration<double>(Clock::now() - t).count();
    slowest_step_s_ = std::max(slowest_step_s_, s);
    if (times) times->push_back(s);
    if (out.why.empty()) out.why = one.why;
    out.diverged = out.diverged || one.diverged;
    out.loss_sum += one.loss_sum;
    out.losses += one.losses;
    if (one.broken) {
      out.broken = true;
      break;
    }
  }
  return out;
}

Result<bool> Search::agree(Cand& c, const Steps& local, std::vector<double>* values) {
  std::vector<double>& v = *values;
  v.push_back(local.broken ? 1.0 : 0.0);
  v.push_back(local.diverged ? 1.0 : 0.0);
  std::chrono::milliseconds timeout{0};
  if (local.broken && world_) {
    timeout = std::min(
        world_->timeout(),
        std::chrono::duration_cast<std::chrono::milliseconds>(std::max(
            kBrokenWaitMin, kBrokenWaitSteps * std::chrono::duration<double>(slowest_step_s_))));
  }
  if (Status st = reduce_max(v, timeout); !st) {
    if (!local.broken) return st.error();
    return peer_failed("a training step of " + c.label + " failed on rank " +
                       std::to_string(rank()) + " (" + local.why +
                       ") but not on every rank, so the ranks no longer run the same "
                       "collectives; stopping the trial search (" +
                       st.error().message() + ")");
  }
  const bool broken = v[v.size() - 2] != 0;
  bool diverged = v.back() != 0;
  v.resize(v.size() - 2);
  std::string why = local.why;
  if (!broken && !diverged) {
    std::vector<double> loss = {local.loss_sum, static_cast<double>(local.losses)};
    DLTUNE_TRY(reduce_sum(loss));
    Family& f = families_[c.family];
    const double mean_loss = loss[1] > 0 ? loss[0] / loss[1] : 0;
    if (f.first_loss <= 0) {
      f.first_loss = mean_loss;
    } else if (mean_loss > kDivergedLossRise * f.first_loss) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "the loss rose from %.3g to %.3g", f.first_loss, mean_loss);
      why = diverged_why(c, buf);
      diverged = true;
    }
    if (!diverged) return true;
  }
  if (why.empty()) {
    why = diverged ? "diverged on another rank" : "a training step failed on another rank";
  }
  fail(c, why, diverged);
  return false;
}

Result<double> Search::chunk(Cand& c, int n) {
  std::vector<double> v;
  timing_ = true;
  const Steps local = run_steps(c, n, &v);
  timing_ = false;
  v.resize(static_cast<size_t>(n), 0.0);  // a broken step ends the loop early
  v.push_back(now());
  auto stands = agree(c, local, &v);
  if (!stands) return stands.error();
  if (*stands) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += v[static_cast<size_t>(i)];
    halving_->record(index(c), s, n);
    chunks_[{index(c), halving_->rounds()}].emplace_back(n, s);
    cost_.record_steps(c.family, c.global_batch, n, s);
    trial_s_ += s;
  }
  return v.back();
}

Status Search::measure_buckets(Cand& c) {
  c.buckets_measured = true;
  Trainer* tr = trainer(c);
  // A pipeline's stages hold different buckets, reduced among each stage's replicas only.
  if (!world_ || world_->size() < 2 || tr == nullptr || tr->on_gpu() || c.cfg.stages > 1)
    return ok_status();
  int64_t most = 1;
  for (const Bucket& b : tr->buckets()) most = std::max(most, b.end - b.begin);
  auto buf = world_->alloc_shared(static_cast<size_t>(most) * sizeof(float));
  if (!buf) return buf.error().wrap("measuring the buckets' allreduce");
  std::vector<double> times;
  for (const Bucket& b : tr->buckets()) {
    if (is_nccl(b.algorithm)) {  // NCCL's: not one this host communicator runs
      times.push_back(0);
      continue;
    }
    comm::AllreduceOptions o;
    o.algorithm = b.algorithm;
    if (b.segment_bytes > 0) o.segment_bytes = b.segment_bytes;
    const size_t count = static_cast<size_t>(b.end - b.begin);
    std::vector<double> one;
    for (int k = 0; k < 4; ++k) {
      const auto t = Clock::now();
      DLTUNE_TRY(comm::allreduce(*world_, buf->data(), buf->data(), count, comm::DataType::kF32,
                                 comm::ReduceOp::kSum, o));
      if (k > 0) one.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    }
    std::sort(one.begin(), one.end());
    times.push_back(one[one.size() / 2]);
  }
  DLTUNE_TRY(reduce_max(times));
  c.allreduce_s = std::move(times);
  return ok_status();
}

}  // namespace dltune::engine::trial_detail
