// bench-data-loader: one measurement of dltune's imagefolder loader, printed as one JSON line.
//
//   bench-data-loader throughput DIR THREADS SIZE BATCH BATCHES
//       images per second the BatchLoader reads, decodes and augments (random resized crop to
//       SIZE x SIZE, flip, normalisation) from the image folder DIR (train/ and val/), THREADS
//       loader threads, batches of BATCH consumed as fast as they come; the first 2 batches
//       (warm-up) are not timed.
//   bench-data-loader train DIR THREADS SIZE BATCH STEPS BLAS_THREADS
//       resnet18 training steps on DIR's crops: the share of the step time the trainer waited
//       for its batch (the loader's stall fraction), the step time, and the step time of the
//       same training on data in memory (synthetic, same shape), so the loader threads' cost on
//       the computation shows too. The first 2 steps of each are not timed.
// Driven by bench_data.py, which interleaves it with torchvision's DataLoader.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/blas_kernels.h"
#include "engine/core/tensor.h"
#include "engine/data/loader.h"
#include "engine/data/real_data.h"
#include "engine/train/train_data.h"
#include "engine/train/trainer.h"

using namespace dltune;
using namespace dltune::engine;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int fail(const std::string& what) {
  std::fprintf(stderr, "bench-data-loader: %s\n", what.c_str());
  return 1;
}

int throughput(const std::string& dir, int threads, int size, int batch, int batches) {
  auto d = load_imagefolder(dir, true, {3, size, size}, 0.0, 1);
  if (!d) return fail(d.error().message());
  auto sampler = Sampler::create(d->size, batch, 1, 0, 1);
  if (!sampler) return fail(sampler.error().message());
  LoaderOptions o;
  o.threads = threads;
  o.depth = 2;
  BatchLoader loader(*d, *sampler, o);
  std::vector<float> x(static_cast<size_t>(batch * d->sample_numel()));
  std::vector<int32_t> y(static_cast<size_t>(batch));
  Clock::time_point t0;
  for (int s = 0; s < batches + 2; ++s) {
    if (s == 2) t0 = Clock::now();
    if (Status st = loader.next(s, x.data(), y.data()); !st) return fail(st.error().message());
  }
  const double secs = since(t0);
  std::printf("%s\n",
              nlohmann::json{
                  {"images_per_s", batches * batch / secs}, {"images", d->size}, {"seconds", secs}}
                  .dump()
                  .c_str());
  return 0;
}

// Mean step time and data wait of `steps` resnet18 steps (after 2 untimed ones) on `data`.
Result<std::pair<double, double>> train_steps(const TrainConfig& c, const Dataset& data) {
  auto t = Trainer::create(c, nullptr, data, nullptr);
  if (!t) return t.error();
  double step_s = 0, data_s = 0;
  for (int64_t s = 0; s < c.steps; ++s) {
    auto loss = (*t)->step(false);
    if (!loss) return loss.error();
    if (s < 2) continue;
    step_s += (*t)->last().step_s;
    data_s += (*t)->last().data_s;
  }
  const auto n = static_cast<double>(c.steps - 2);
  return std::pair{step_s / n, data_s / n};
}

int train(const std::string& dir, int threads, int size, int batch, int steps, int blas) {
  setenv("DLTUNE_LOADER_THREADS", std::to_string(threads).c_str(), 1);
  set_blas_threads(blas);
  TrainConfig c;
  c.model = "resnet18";
  c.data = "imagefolder:" + dir;
  c.input = {3, size, size};
  c.heldout_split = 0.0;
  c.global_batch = batch;
  c.steps = steps + 2;
  c.threads = blas;
  c.lr = 0.01;
  auto classes = recipes::imagefolder_classes(recipes::imagefolder_train_root(dir));
  if (!classes) return fail(classes.error().message());
  c.classes = static_cast<int>(classes->size());
  Dataset folder;
  if (Status st = load_train_data(c, &folder, nullptr); !st) return fail(st.error().message());
  auto with_loader = train_steps(c, folder);
  if (!with_loader) return fail(with_loader.error().message());
  c.data = "synthetic-imagenet";
  c.train_size = 2 * batch;
  Dataset memory;
  if (Status st = load_train_data(c, &memory, nullptr); !st) return fail(st.error().message());
  auto in_memory = train_steps(c, memory);
  if (!in_memory) return fail(in_memory.error().message());
  std::printf("%s\n", nlohmann::json{{"stall_fraction", with_loader->second / with_loader->first},
                                     {"step_s", with_loader->first},
                                     {"data_s", with_loader->second},
                                     {"step_s_in_memory", in_memory->first}}
                          .dump()
                          .c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  use_native_blas_kernels(argv);
  const std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 6 && a[0] == "throughput")
    return throughput(a[1], std::atoi(a[2].c_str()), std::atoi(a[3].c_str()),
                      std::atoi(a[4].c_str()), std::atoi(a[5].c_str()));
  if (a.size() == 7 && a[0] == "train")
    return train(a[1], std::atoi(a[2].c_str()), std::atoi(a[3].c_str()), std::atoi(a[4].c_str()),
                 std::atoi(a[5].c_str()), std::atoi(a[6].c_str()));
  std::fprintf(stderr,
               "usage: bench-data-loader throughput DIR THREADS SIZE BATCH BATCHES\n"
               "       bench-data-loader train DIR THREADS SIZE BATCH STEPS BLAS_THREADS\n");
  return 2;
}
