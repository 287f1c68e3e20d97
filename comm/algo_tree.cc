// Binomial trees: a reduce to rank 0 (at step k, ranks with bit k set send their partial to the
// rank 2^k below and drop out; the others receive and reduce), a binomial broadcast (the mirror
// image, from any root), and a pipelined chain broadcast (root -> root+1 -> ... in segments, so
// that for large messages every link is busy at once).
#include <algorithm>
#include <cstring>

#include "comm/algorithms.h"
#include "comm/reduce.h"

namespace dltune::comm::detail {

Status tree_reduce(const Call& c) {
  const int p = c.comm.size();
  const int r = c.comm.rank();
  const size_t bytes = c.count * c.esize;
  const void* cur = c.send;
  void* tmp = c.comm.scratch(1, bytes);
  for (int mask = 1; mask < p; mask <<= 1) {
    if (r & mask) return c.comm.send(r - mask, kTagTree, cur, bytes, c.deadline);
    if (r + mask < p) {
      DLTUNE_TRY(c.comm.recv(r + mask, kTagTree, tmp, bytes, c.deadline));
      reduce(c.type, c.op, c.recv, cur, tmp, c.count);
      cur = c.recv;
    }
  }
  if (cur != c.recv) std::memcpy(c.recv, cur, bytes);
  return ok_status();
}

Status tree(const Call& c) {
  DLTUNE_TRY(tree_reduce(c));
  return binomial_broadcast(c.comm, c.recv, c.count * c.esize, 0, kTagBcast, c.deadline);
}

Status binomial_broadcast(Communicator& comm, void* data, size_t bytes, int root, int tag,
                          Deadline deadline) {
  const int p = comm.size();
  const int vr = (comm.rank() - root + p) % p;  // rank relative to the root
  int mask = 1;
  for (; mask < p; mask <<= 1) {
    if (vr & mask) {
      DLTUNE_TRY(comm.recv((vr - mask + root) % p, tag, data, bytes, deadline));
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < p) DLTUNE_TRY(comm.send((vr + mask + root) % p, tag, data, bytes, deadline));
  }
  return ok_status();
}

Status chain_broadcast(Communicator& comm, void* data, size_t bytes, int root, size_t segment_bytes,
                       int tag, Deadline deadline) {
  const int p = comm.size();
  const int vr = (comm.rank() - root + p) % p;
  const size_t seg = segment_bytes == 0 ? std::max<size_t>(bytes, 1) : segment_bytes;
  auto* base = static_cast<uint8_t*>(data);
  // At least one (possibly empty) message, so that a zero-byte broadcast still synchronises
  // like the others and size mismatches show.
  for (size_t off = 0; off == 0 || off < bytes; off += seg) {
    const size_t n = std::min(seg, bytes - off);
    if (vr > 0) DLTUNE_TRY(comm.recv((comm.rank() - 1 + p) % p, tag, base + off, n, deadline));
    if (vr < p - 1) DLTUNE_TRY(comm.send((comm.rank() + 1) % p, tag, base + off, n, deadline));
    if (bytes == 0) break;
  }
  return ok_status();
}

}  // namespace dltune::comm::detail
