// dltune-nccl-probe: one rank of an NCCL smoke test under `dltune run` (or srun --mpi=pmix):
// bootstraps over PMIx, creates the NCCL communicator on this rank's GPU, and checks an
// allreduce (sum and max) and a broadcast on device buffers against their known results.
//
//   dltune-nccl-probe [--choice nccl|nccl:ALGO/PROTO] [--count N] [--check-device]
//
// Output (stdout, one line per rank):
//   nccl probe rank=R size=S device=D choice=C version=V: ok (DESCRIPTION)
// Exit: 0 success; 1 an NCCL or check failure; 2 bad arguments; 77 no usable CUDA device or
// no NCCL in this build (the reason on stderr, starting "SKIP:"). --check-device only answers
// that question (0 or 77), without bootstrapping.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.h"
#include "comm/nccl_communicator.h"
#include "common/strings.h"

#include "dltune/config.h"

#if DLTUNE_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace dltune::comm {
namespace {

constexpr int kSkip = 77;

struct Args {
  NcclOptions choice;
  size_t count = 1 << 20;
  bool check_device = false;
};

Result<Args> parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--check-device") {
      a.check_device = true;
    } else if ((arg == "--choice" || arg == "--count") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (arg == "--choice") {
        auto c = parse_nccl_choice(v);
        if (!c) return c.error().wrap("--choice");
        a.choice = *c;
      } else {
        auto n = strings::parse_int(v);
        if (!n || *n < 1 || *n > (int64_t{1} << 28)) {
          return invalid_input("--count expects an integer from 1 to 2^28, got '" + v + "'");
        }
        a.count = static_cast<size_t>(*n);
      }
    } else {
      return invalid_input("unknown argument '" + arg + "' (or a missing value)");
    }
  }
  return a;
}

#if DLTUNE_HAVE_NCCL

// Rank r contributes r + 1 + (i % 7) at element i.
float value(int rank, size_t i) { return static_cast<float>(rank + 1 + static_cast<int>(i % 7)); }

Status check(NcclCommunicator& nccl, size_t n) {
  const int p = nccl.size(), r = nccl.rank();
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = value(r, i);
  void* dev = nullptr;
  if (cudaMalloc(&dev, n * sizeof(float)) != cudaSuccess) {
    return internal_error("cudaMalloc of " + std::to_string(n * 4) + " bytes failed");
  }
  auto fail = [&](const std::string& what, size_t i, float got, float want) {
    cudaFree(dev);
    return internal_error(what + ": element " + std::to_string(i) + " is " + std::to_string(got) +
                          ", expected " + std::to_string(want));
  };
  auto run = [&](ReduceOp op) -> Status {
    if (cudaMemcpy(dev, host.data(), n * 4, cudaMemcpyHostToDevice) != cudaSuccess) {
      return internal_error("cudaMemcpy to the device failed");
    }
    DLTUNE_TRY(nccl.native_allreduce(dev, dev, n, DataType::kF32, op));
    return ok_status();
  };
  std::vector<float> out(n);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    Status s = run(op);
    if (!s) {
      cudaFree(dev);
      return s;
    }
    cudaMemcpy(out.data(), dev, n * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i) {
      // sum over ranks of (q + 1 + i % 7); max is rank p-1's value.
      const float want = op == ReduceOp::kSum
                             ? static_cast<float>(p * (p + 1) / 2 + p * static_cast<int>(i % 7))
                             : value(p - 1, i);
      if (out[i] != want)
        return fail(std::string("allreduce ") + std::string(op_name(op)), i, out[i], want);
    }
  }
  cudaMemcpy(dev, host.data(), n * 4, cudaMemcpyHostToDevice);
  Status s = nccl.broadcast_device(dev, n * 4, 0, nullptr);
  if (s) s = nccl.synchronize(nullptr);
  if (!s) {
    cudaFree(dev);
    return s;
  }
  cudaMemcpy(out.data(), dev, n * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < n; ++i) {
    if (out[i] != value(0, i)) return fail("broadcast from rank 0", i, out[i], value(0, i));
  }
  cudaFree(dev);
  return ok_status();
}

int run(const Args& a) {
  auto boot = Bootstrap::init();
  if (!boot) {
    std::fprintf(stderr, "nccl probe: %s\n", boot.error().message().c_str());
    return 1;
  }
  auto devices = cuda_device_count();
  // One GPU per rank: the launcher's placement leaves one visible (device 0); with several
  // visible, the local rank picks.
  const int device = devices ? boot->local_rank() % *devices : 0;
  auto nccl = NcclCommunicator::create(*boot, device, a.choice);
  if (!nccl) {
    std::fprintf(stderr, "nccl probe: rank %d: %s\n", boot->rank(), nccl.error().message().c_str());
    return nccl.error().kind() == ErrorKind::kUnsupported ? kSkip : 1;
  }
  Status s = check(**nccl, a.count);
  if (!s) {
    std::fprintf(stderr, "nccl probe: rank %d: %s\n", boot->rank(), s.error().message().c_str());
    return 1;
  }
  std::printf("nccl probe rank=%d size=%d device=%d choice=%s version=%s: ok (%s)\n", boot->rank(),
              boot->size(), device, nccl_choice_name(a.choice).c_str(),
              nccl_version_string().c_str(), (*nccl)->describe().c_str());
  std::fflush(stdout);
  return 0;
}

#else

int run(const Args&) { return kSkip; }

#endif

}  // namespace
}  // namespace dltune::comm

int main(int argc, char** argv) {
  using namespace dltune::comm;
  auto args = parse_args(argc, argv);
  if (!args) {
    std::fprintf(stderr, "nccl probe: %s\n", args.error().message().c_str());
    return 2;
  }
  auto devices = cuda_device_count();
  if (!devices) {
    std::fprintf(stderr, "SKIP: %s\n", devices.error().message().c_str());
    return kSkip;
  }
  if (args->check_device) return 0;
  return run(*args);
}
