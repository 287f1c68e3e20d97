// dltune-bench-p2p: point-to-point latency and bandwidth of dltune's MPI communicator against
// MPI_Send / MPI_Recv called directly, in one run, interleaved in time (rounds, rotating the
// order of the candidates; the medians over rounds are compared). Run with 2 ranks:
//
//   mpirun --mca pml ob1 -np 2 build/bin/dltune-bench-p2p [--rounds N] [--max-bytes B]
//
// Candidates, per message size:
//   latency (ping-pong, half the round trip):
//     mpi        MPI_Send / MPI_Recv on a duplicate of MPI_COMM_WORLD
//     blocking   Communicator::send / recv with a user tag
//     isend      Communicator::isend / irecv, each followed by Request::wait
//   bandwidth (16 messages in flight, then a 1-byte acknowledgement):
//     mpi        16 MPI_Isend / MPI_Irecv and MPI_Waitall
//     isend      16 isend / irecv and wait_all (the receiver: wait_any, as a pipeline would)
// Both run in one process initialised with MPI_THREAD_MULTIPLE (dltune needs it), so the raw
// figures include whatever that level costs Open MPI. Rank 0 prints a table and a line
// "summary: ..." with the ratios dltune / mpi (latency: > 1 is slower; bandwidth: < 1 is
// slower). Exit code 0, 1 on failure, 2 on bad arguments.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <mpi.h>

#include "comm/mpi_communicator.h"
#include "common/strings.h"

namespace dltune::comm {
namespace {

constexpr int kWindow = 16;
constexpr int kTag = 1;

struct Args {
  int rounds = 9;
  size_t max_bytes = size_t{16} << 20;
};

double now_s() { return MPI_Wtime(); }

// Iterations per measurement: ~2-20 ms of traffic at this size.
int iterations(size_t bytes, bool window) {
  const size_t per = std::max<size_t>(bytes * (window ? kWindow : 1), 256);
  return static_cast<int>(std::clamp<size_t>((size_t{32} << 20) / per, 4, 2000));
}

// One measurement: seconds per iteration on rank 0 (both ranks run it).
using Candidate = Result<double> (*)(Communicator&, MPI_Comm, std::vector<uint8_t>&, size_t, int);

Result<double> lat_mpi(Communicator& c, MPI_Comm raw, std::vector<uint8_t>& buf, size_t bytes,
                       int iters) {
  const int n = static_cast<int>(bytes);
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i) {
    if (c.rank() == 0) {
      MPI_Send(buf.data(), n, MPI_BYTE, 1, kTag, raw);
      MPI_Recv(buf.data(), n, MPI_BYTE, 1, kTag, raw, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf.data(), n, MPI_BYTE, 0, kTag, raw, MPI_STATUS_IGNORE);
      MPI_Send(buf.data(), n, MPI_BYTE, 0, kTag, raw);
    }
  }
  return (now_s() - t0) / iters / 2;
}

Result<double> lat_blocking(Communicator& c, MPI_Comm, std::vector<uint8_t>& buf, size_t bytes,
                            int iters) {
  const int peer = 1 - c.rank();
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i) {
    if (c.rank() == 0) {
      DLTUNE_TRY(c.send(peer, kTag, buf.data(), bytes, c.deadline_from_now()));
      DLTUNE_TRY(c.recv(peer, kTag, buf.data(), bytes, c.deadline_from_now()));
    } else {
      DLTUNE_TRY(c.recv(peer, kTag, buf.data(), bytes, c.deadline_from_now()));
      DLTUNE_TRY(c.send(peer, kTag, buf.data(), bytes, c.deadline_from_now()));
    }
  }
  return (now_s() - t0) / iters / 2;
}

Result<double> lat_isend(Communicator& c, MPI_Comm, std::vector<uint8_t>& buf, size_t bytes,
                         int iters) {
  const int peer = 1 - c.rank();
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i) {
    if (c.rank() == 0) {
      DLTUNE_TRY(c.isend(peer, kTag, buf.data(), bytes).wait());
      DLTUNE_TRY(c.irecv(peer, kTag, buf.data(), bytes).wait());
    } else {
      DLTUNE_TRY(c.irecv(peer, kTag, buf.data(), bytes).wait());
      DLTUNE_TRY(c.isend(peer, kTag, buf.data(), bytes).wait());
    }
  }
  return (now_s() - t0) / iters / 2;
}

Result<double> bw_mpi(Communicator& c, MPI_Comm raw, std::vector<uint8_t>& buf, size_t bytes,
                      int iters) {
  const int n = static_cast<int>(bytes);
  MPI_Request reqs[kWindow];
  char ack = 0;
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i) {
    for (int k = 0; k < kWindow; ++k) {
      uint8_t* p = buf.data() + static_cast<size_t>(k) * bytes;
      if (c.rank() == 0) {
        MPI_Isend(p, n, MPI_BYTE, 1, kTag + k, raw, &reqs[k]);
      } else {
        MPI_Irecv(p, n, MPI_BYTE, 0, kTag + k, raw, &reqs[k]);
      }
    }
    MPI_Waitall(kWindow, reqs, MPI_STATUSES_IGNORE);
    if (c.rank() == 0) {
      MPI_Recv(&ack, 1, MPI_BYTE, 1, 0, raw, MPI_STATUS_IGNORE);
    } else {
      MPI_Send(&ack, 1, MPI_BYTE, 0, 0, raw);
    }
  }
  return (now_s() - t0) / iters;
}

Result<double> bw_isend(Communicator& c, MPI_Comm, std::vector<uint8_t>& buf, size_t bytes,
                        int iters) {
  const int peer = 1 - c.rank();
  std::vector<Request> reqs(kWindow);
  char ack = 0;
  const double t0 = now_s();
  for (int i = 0; i < iters; ++i) {
    for (int k = 0; k < kWindow; ++k) {
      uint8_t* p = buf.data() + static_cast<size_t>(k) * bytes;
      reqs[static_cast<size_t>(k)] =
          c.rank() == 0 ? c.isend(peer, kTag + k, p, bytes) : c.irecv(peer, kTag + k, p, bytes);
    }
    if (c.rank() == 0) {
      DLTUNE_TRY(wait_all(reqs));
      DLTUNE_TRY(c.recv(peer, 0, &ack, 1, c.deadline_from_now()));
    } else {
      for (int k = 0; k < kWindow; ++k) {
        auto got = wait_any(reqs, c.deadline_from_now());
        if (!got) return got.error();
      }
      DLTUNE_TRY(c.send(peer, 0, &ack, 1, c.deadline_from_now()));
    }
  }
  return (now_s() - t0) / iters;
}

struct Series {
  const char* kind;  // "lat" or "bw"
  const char* name;
  Candidate fn;
};
const Series kSeries[] = {{"lat", "mpi", lat_mpi},
                          {"lat", "blocking", lat_blocking},
                          {"lat", "isend", lat_isend},
                          {"bw", "mpi", bw_mpi},
                          {"bw", "isend", bw_isend}};
constexpr size_t kNumSeries = sizeof kSeries / sizeof kSeries[0];

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Status run(Communicator& c, const Args& a) {
  if (c.size() != 2)
    return invalid_input("run with exactly 2 ranks (got " + std::to_string(c.size()) + ")");
  MPI_Comm raw = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw);
  std::vector<size_t> sizes;
  for (size_t b = 8; b <= a.max_bytes; b *= 8) sizes.push_back(b);
  std::vector<uint8_t> buf(a.max_bytes * kWindow, 1);  // touched: no page faults measured
  // times[size][series] over rounds
  std::vector<std::vector<std::vector<double>>> times(sizes.size(),
                                                      std::vector<std::vector<double>>(kNumSeries));
  for (int round = -1; round < a.rounds; ++round) {  // round -1 warms up, unrecorded
    for (size_t si = 0; si < sizes.size(); ++si) {
      for (size_t k = 0; k < kNumSeries; ++k) {
        const Series& s = kSeries[(k + static_cast<size_t>(round + 1)) % kNumSeries];
        const int iters = iterations(sizes[si], std::string(s.kind) == "bw");
        MPI_Barrier(raw);
        auto t = s.fn(c, raw, buf, sizes[si], iters);
        if (!t) return t.error().wrap(std::string(s.kind) + " " + s.name);
        if (round >= 0) times[si][static_cast<size_t>(&s - kSeries)].push_back(*t);
      }
    }
  }
  MPI_Comm_free(&raw);
  if (c.rank() != 0) return ok_status();
  std::printf("%10s %12s %12s %12s %8s %8s | %12s %12s %8s\n", "bytes", "lat mpi us", "blocking us",
              "isend us", "blk/mpi", "isnd/mpi", "bw mpi GB/s", "isend GB/s", "isnd/mpi");
  std::string summary = "summary:";
  for (size_t si = 0; si < sizes.size(); ++si) {
    double m[kNumSeries];
    for (size_t k = 0; k < kNumSeries; ++k) m[k] = median(times[si][k]);
    const double bytes = static_cast<double>(sizes[si]);
    const double bw_mpi_gbs = bytes * kWindow / m[3] / 1e9,
                 bw_isend_gbs = bytes * kWindow / m[4] / 1e9;
    std::printf("%10zu %12.2f %12.2f %12.2f %8.2f %8.2f | %12.3f %12.3f %8.2f\n", sizes[si],
                m[0] * 1e6, m[1] * 1e6, m[2] * 1e6, m[1] / m[0], m[2] / m[0], bw_mpi_gbs,
                bw_isend_gbs, bw_isend_gbs / bw_mpi_gbs);
    const std::string b = std::to_string(sizes[si]);
    summary += " lat_isend_over_mpi_" + b + "B=" + fixed2(m[2] / m[0]) + " bw_isend_over_mpi_" + b +
               "B=" + fixed2(bw_isend_gbs / bw_mpi_gbs);
  }
  std::printf("%s\n", summary.c_str());
  return ok_status();
}

Result<Args> parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--rounds" || arg == "--max-bytes") && i + 1 < argc) {
      auto v = strings::parse_int(argv[++i]);
      if (!v || *v <= 0) return invalid_input(arg + " needs a positive integer");
      if (arg == "--rounds")
        a.rounds = static_cast<int>(*v);
      else
        a.max_bytes = static_cast<size_t>(*v);
    } else {
      return invalid_input("unknown argument '" + arg +
                           "'; usage: dltune-bench-p2p [--rounds N] [--max-bytes B]");
    }
  }
  return a;
}

}  // namespace
}  // namespace dltune::comm

int main(int argc, char** argv) {
  using namespace dltune::comm;
  auto args = parse(argc, argv);
  if (!args) {
    std::fprintf(stderr, "dltune-bench-p2p: %s\n", args.error().message().c_str());
    return 2;
  }
  int code = 0;
  {
    auto world = create_mpi_world();
    if (!world) {
      std::fprintf(stderr, "dltune-bench-p2p: %s\n", world.error().message().c_str());
      return 1;
    }
    dltune::Status s = run(**world, *args);
    if (!s) {
      std::fprintf(stderr, "dltune-bench-p2p: rank %d: %s\n", (*world)->rank(),
                   s.error().message().c_str());
      code = s.error().kind() == dltune::ErrorKind::kInvalidInput ? 2 : 1;
    }
  }
  mpi_finalize();
  return code;
}
