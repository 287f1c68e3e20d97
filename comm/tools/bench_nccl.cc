#include "comm/tools/bench_nccl.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/bootstrap/bootstrap.h"
#include "common/stats.h"
#include "common/strings.h"

#include "dltune/config.h"

#if DLTUNE_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace dltune::comm {

Result<std::vector<NcclOptions>> parse_nccl_choice_list(const std::string& list) {
  if (list == "all") return default_nccl_choices();
  std::vector<NcclOptions> out;
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, comma - start);
    if (item.empty()) return invalid_input("empty item in the choice list '" + list + "'");
    auto c = parse_nccl_choice(item);
    if (!c) return c.error();
    if (!seen.insert(nccl_choice_name(*c)).second) {
      return invalid_input("'" + item + "' is listed twice");
    }
    out.push_back(*c);
    start = comma + 1;
  }
  return out;
}

Status check_nccl_device() {
  if (!nccl_available()) {
    return unsupported("--backend nccl needs a dltune built with NCCL (-DDLTUNE_WITH_NCCL=ON)");
  }
  auto n = cuda_device_count();
  if (!n) return std::move(n).error().wrap("--backend nccl needs a CUDA device");
  return ok_status();
}

#if DLTUNE_HAVE_NCCL

namespace {

double micros_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Point {
  size_t bytes = 0;
  std::string choice;
  double median_us = 0, p10_us = 0, p90_us = 0, busbw_gbs = 0;
};

class Sweep {
 public:
  Sweep(std::vector<std::unique_ptr<NcclCommunicator>> comms, const NcclBenchOptions& o)
      : comms_(std::move(comms)), o_(o) {}
  ~Sweep() {
    if (buf_ != nullptr) cudaFree(buf_);
    if (agree_ != nullptr) cudaFree(agree_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Sweep(const Sweep&) = delete;
  Sweep& operator=(const Sweep&) = delete;

  Status init() {
    const size_t agree_n = static_cast<size_t>(std::max(3, o_.rounds)) * comms_.size();
    if (cudaMalloc(&buf_, o_.max_bytes) != cudaSuccess ||
        cudaMalloc(reinterpret_cast<void**>(&agree_), agree_n * sizeof(double)) != cudaSuccess) {
      return internal_error("cudaMalloc of " + strings::format_bytes(o_.max_bytes) + " failed");
    }
    // Zeros: repeated in-place sums stay 0.
    if (cudaMemset(buf_, 0, o_.max_bytes) != cudaSuccess ||
        cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) {
      return internal_error("preparing the device buffer failed");
    }
    return ok_status();
  }

  Status run(std::vector<Point>* out) {
    const double p = comms_[0]->size();
    for (size_t bytes = o_.min_bytes / 4 * 4; bytes <= o_.max_bytes; bytes *= 2) {
      std::vector<std::vector<double>> samples;
      DLTUNE_TRY_CTX(measure_size(bytes, &samples), "measuring " + strings::format_bytes(bytes));
      for (size_t i = 0; i < comms_.size(); ++i) {
        Point pt;
        pt.bytes = bytes, pt.choice = nccl_choice_name(comms_[i]->options());
        const stats::Summary st = stats::summarize(samples[i]);
        pt.median_us = st.median;
        pt.p10_us = st.p10;
        pt.p90_us = st.p90;
        pt.busbw_gbs =
            p > 1 ? static_cast<double>(bytes) / pt.median_us / 1e3 * 2 * (p - 1) / p : 0;
        out->push_back(pt);
      }
      if (bytes > o_.max_bytes / 2) break;
    }
    return ok_status();
  }

 private:
  // `iters` allreduces of `bytes` on choice i, then the stream's completion.
  Status calls(size_t i, size_t bytes, int iters) {
    for (int k = 0; k < iters; ++k) {
      DLTUNE_TRY(comms_[i]->allreduce_device(buf_, buf_, bytes / 4, DataType::kF32, ReduceOp::kSum,
                                             stream_));
    }
    return comms_[i]->synchronize(stream_);
  }
  Status barrier() {
    return comms_[0]->native_allreduce(agree_, agree_, 1, DataType::kF64, ReduceOp::kMax);
  }
  // The slowest rank's value of each element.
  Status max_over_ranks(std::vector<double>& v) {
    if (cudaMemcpy(agree_, v.data(), v.size() * 8, cudaMemcpyHostToDevice) != cudaSuccess) {
      return internal_error("cudaMemcpy to the device failed");
    }
    DLTUNE_TRY(
        comms_[0]->native_allreduce(agree_, agree_, v.size(), DataType::kF64, ReduceOp::kMax));
    if (cudaMemcpy(v.data(), agree_, v.size() * 8, cudaMemcpyDeviceToHost) != cudaSuccess) {
      return internal_error("cudaMemcpy from the device failed");
    }
    return ok_status();
  }

  Status measure_size(size_t bytes, std::vector<std::vector<double>>* out) {
    const size_t n = comms_.size();
    std::vector<double> once(n);
    for (size_t i = 0; i < n; ++i) {
      DLTUNE_TRY(calls(i, bytes, 2));  // warm-up
      DLTUNE_TRY(barrier());
      const auto t0 = Clock::now();
      DLTUNE_TRY(calls(i, bytes, 1));
      once[i] = micros_since(t0);
    }
    DLTUNE_TRY(max_over_ranks(once));
    std::vector<int> iters(n);
    for (size_t i = 0; i < n; ++i) {
      iters[i] =
          static_cast<int>(std::clamp(o_.round_ms * 1000 / std::max(once[i], 0.01), 1.0, 20000.0));
    }
    const size_t rounds = static_cast<size_t>(std::max(3, o_.rounds));
    std::vector<double> flat(n * rounds);
    for (size_t r = 0; r < rounds; ++r) {
      for (size_t j = 0; j < n; ++j) {
        const size_t i = (j + r) % n;  // rotate the order every round
        DLTUNE_TRY(barrier());
        const auto t0 = Clock::now();
        DLTUNE_TRY(calls(i, bytes, iters[i]));
        flat[i * rounds + r] = micros_since(t0) / iters[i];
      }
    }
    DLTUNE_TRY(max_over_ranks(flat));
    out->assign(n, {});
    for (size_t i = 0; i < n; ++i) {
      (*out)[i].assign(flat.begin() + static_cast<long>(i * rounds),
                       flat.begin() + static_cast<long>((i + 1) * rounds));
    }
    return ok_status();
  }

  std::vector<std::unique_ptr<NcclCommunicator>> comms_;
  const NcclBenchOptions& o_;
  void* buf_ = nullptr;
  double* agree_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

std::string format_table(const std::vector<Point>& pts, int ranks, int nodes,
                         const std::string& version) {
  std::ostringstream os;
  os << std::fixed << "allreduce f32 sum, in place on GPU memory, NCCL " << version << ", " << ranks
     << " ranks on " << nodes << " node(s)\n";
  size_t last = SIZE_MAX;
  for (const auto& pt : pts) {
    if (pt.bytes != last) {
      last = pt.bytes;
      const Point* best = &pt;
      for (const auto& q : pts) {
        if (q.bytes == pt.bytes && q.median_us < best->median_us) best = &q;
      }
      os << "\n"
         << std::setw(10) << strings::format_bytes(pt.bytes) << "  best: " << best->choice << "\n"
         << "    choice              median_us    p10_us    p90_us  algbw_GB/s  busbw_GB/s\n";
    }
    os << "    " << std::left << std::setw(18) << pt.choice << std::right << std::setprecision(2)
       << std::setw(11) << pt.median_us << std::setw(10) << pt.p10_us << std::setw(10) << pt.p90_us
       << std::setprecision(3) << std::setw(12)
       << static_cast<double>(pt.bytes) / pt.median_us / 1e3 << std::setw(12) << pt.busbw_gbs
       << "\n";
  }
  return os.str();
}

std::string format_json(const std::vector<Point>& pts, int ranks, int nodes) {
  nlohmann::json j;
  j["ranks"] = ranks;
  j["nodes"] = nodes;
  j["results"] = nlohmann::json::array();
  for (const auto& pt : pts) {
    j["results"].push_back({{"bytes", pt.bytes},
                            {"algo", pt.choice},
                            {"median_us", pt.median_us},
                            {"p10_us", pt.p10_us},
                            {"p90_us", pt.p90_us},
                            {"busbw_gbs", pt.busbw_gbs}});
  }
  j["bounds"] = nlohmann::json::array();  // no GPU bounds measured (yet)
  return j.dump(1) + "\n";
}

Result<std::string> sweep(const NcclBenchOptions& o, int* rank) {
  DLTUNE_TRY(check_nccl_device());
  auto boot = Bootstrap::init();
  if (!boot) return std::move(boot).error();
  *rank = boot->rank();
  auto devices = cuda_device_count();
  if (!devices) return std::move(devices).error();
  const int device = boot->local_rank() % *devices;
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
  for (const auto& c : o.choices) {
    auto nc = NcclCommunicator::create(*boot, device, c);
    if (!nc) return std::move(nc).error();
    comms.push_back(std::move(*nc));
  }
  const int ranks = boot->size(), nodes = boot->num_nodes();
  Sweep s(std::move(comms), o);
  DLTUNE_TRY(s.init());
  std::vector<Point> pts;
  DLTUNE_TRY(s.run(&pts));
  return o.json ? format_json(pts, ranks, nodes)
                : format_table(pts, ranks, nodes, nccl_version_string());
}

}  // namespace

int run_nccl_bench(const NcclBenchOptions& o) {
  int rank = 0;
  auto text = sweep(o, &rank);
  if (!text) {
    std::fprintf(stderr, "dltune bench: rank %d: %s\n", rank, text.error().message().c_str());
    return text.error().exit_code();
  }
  if (rank == 0) {
    std::fputs(text->c_str(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

#else

int run_nccl_bench(const NcclBenchOptions&) {
  Status s = check_nccl_device();
  std::fprintf(stderr, "dltune bench: %s\n", s.error().message().c_str());
  return s.error().exit_code();
}

#endif

}  // namespace dltune::comm
