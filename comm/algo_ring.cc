// The ring allreduce (Baidu's, as in gloo's allreduce_ring_chunked): the vector is cut into
// `size` chunks; in a reduce-scatter of size-1 steps each rank passes a chunk to its right
// neighbour and reduces the chunk coming from its left one, so that after the last step rank r
// holds the fully reduced chunk r+1; an allgather of size-1 steps then circulates the reduced
// chunks. Each rank sends and receives 2(p-1)/p of the vector: bandwidth-optimal.
//
// Each chunk travels in segments of at most options.segment_bytes, received into a persistent
// scratch block and reduced at once while it is still in cache. Every rank uses the same number
// of segments per step (the last ones may be empty), so sends and receives always pair up.
//
// The first reduce-scatter step sends straight from the send buffer and every reduction reads
// the send buffer, so an out-of-place call needs no initial copy.
#include <algorithm>
#include <cstring>

#include "comm/algorithms.h"
#include "comm/reduce.h"

namespace dltune::comm::detail {

Status ring(const Call& c) {
  Communicator& comm = c.comm;
  const int p = comm.size();
  const int r = comm.rank();
  if (p == 1) {
    copy_if_needed(c);
    return ok_status();
  }
  const size_t parts = static_cast<size_t>(p);
  const size_t max_chunk = (c.count + parts - 1) / parts;
  size_t seg = c.options.segment_bytes == 0 ? max_chunk : c.options.segment_bytes / c.esize;
  seg = std::clamp<size_t>(seg, 1, std::max<size_t>(max_chunk, 1));
  const size_t nseg = (max_chunk + seg - 1) / seg;
  auto* tmp = static_cast<uint8_t*>(comm.scratch(0, seg * c.esize));
  const int right = (r + 1) % p;
  const int left = (r - 1 + p) % p;

  // The [begin, end) elements of segment k of chunk `chunk`.
  auto segment = [&](int chunk, size_t k, size_t* b, size_t* e) {
    const size_t cb = block_begin(c.count, parts, static_cast<size_t>(chunk));
    const size_t ce = block_begin(c.count, parts, static_cast<size_t>(chunk) + 1);
    *b = std::min(cb + k * seg, ce);
    *e = std::min(cb + (k + 1) * seg, ce);
  };

  for (int s = 0; s < p - 1; ++s) {  // reduce-scatter
    const int sc = (r - s + p) % p;
    const int rc = (r - s - 1 + 2 * p) % p;
    for (size_t k = 0; k < nseg; ++k) {
      size_t sb, se, rb, re;
      segment(sc, k, &sb, &se);
      segment(rc, k, &rb, &re);
      const uint8_t* src = s == 0 ? c.send_at(sb) : c.recv_at(sb);
      DLTUNE_TRY(comm.sendrecv(right, kTagRing, src, (se - sb) * c.esize, left, kTagRing, tmp,
                               (re - rb) * c.esize, c.deadline));
      reduce(c.type, c.op, c.recv_at(rb), c.send_at(rb), tmp, re - rb);
    }
  }
  for (int s = 0; s < p - 1; ++s) {  // allgather
    const int sc = (r + 1 - s + p) % p;
    const int rc = (r - s + p) % p;
    for (size_t k = 0; k < nseg; ++k) {
      size_t sb, se, rb, re;
      segment(sc, k, &sb, &se);
      segment(rc, k, &rb, &re);
      DLTUNE_TRY(comm.sendrecv(right, kTagRing, c.recv_at(sb), (se - sb) * c.esize, left, kTagRing,
                               c.recv_at(rb), (re - rb) * c.esize, c.deadline));
    }
  }
  return ok_status();
}

}  // namespace dltune::comm::detail
