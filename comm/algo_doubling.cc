// Recursive doubling and Rabenseifner, with the standard folding for non-powers of two
// (Thakur, Rabenseifner & Gropp 2005): of p ranks, let p2 be the largest power of two <= p
// and rem = p - p2. Among the first 2*rem ranks each even rank sends its whole vector to the
// odd rank above it and sits out; the odd ones (and every rank >= 2*rem) form a power-of-two
// group, renumbered 0..p2-1, that runs the algorithm; finally each odd rank sends the result
// back to its even partner.
//
// Recursive doubling: log2(p2) steps; at step k ranks exchange whole vectors with the rank at
// distance 2^k and reduce. Latency-optimal (small messages).
//
// Rabenseifner: a recursive-halving reduce-scatter (log2(p2) steps; each exchanges half of the
// remaining range with the partner at distance p2/2, p2/4, ... and keeps reducing its own half)
// followed by the mirror-image recursive-doubling allgather. Bandwidth-optimal like the ring but
// with log2(p) steps instead of 2(p-1).
#include <cstring>
#include <vector>

#include "comm/algorithms.h"
#include "comm/reduce.h"

namespace dltune::comm::detail {
namespace {

struct Fold {
  int p2 = 1;
  int rem = 0;
  int newrank = -1;  // -1: this rank sits out
  int actual(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
};

Fold make_fold(int p, int r) {
  Fold f;
  while (f.p2 * 2 <= p) f.p2 *= 2;
  f.rem = p - f.p2;
  if (r < 2 * f.rem) {
    f.newrank = r % 2 == 1 ? r / 2 : -1;
  } else {
    f.newrank = r - f.rem;
  }
  return f;
}

// Folds the extra ranks in; on return *cur is where this rank's partial vector lives.
Status fold_in(const Call& c, const Fold& f, const void** cur, void* tmp) {
  const int r = c.comm.rank();
  *cur = c.send;
  if (r >= 2 * f.rem) return ok_status();
  const size_t bytes = c.count * c.esize;
  if (f.newrank < 0) return c.comm.send(r + 1, kTagFold, c.send, bytes, c.deadline);
  DLTUNE_TRY(c.comm.recv(r - 1, kTagFold, tmp, bytes, c.deadline));
  // Keep the lower rank's contribution first (the order a serial sum would use).
  reduce(c.type, c.op, c.recv, tmp, c.send, c.count);
  *cur = c.recv;
  return ok_status();
}

Status fold_out(const Call& c, const Fold& f) {
  const int r = c.comm.rank();
  if (r >= 2 * f.rem) return ok_status();
  const size_t bytes = c.count * c.esize;
  if (f.newrank < 0) return c.comm.recv(r + 1, kTagFold, c.recv, bytes, c.deadline);
  return c.comm.send(r - 1, kTagFold, c.recv, bytes, c.deadline);
}

}  // namespace

Status recursive_doubling(const Call& c) {
  const Fold f = make_fold(c.comm.size(), c.comm.rank());
  const size_t bytes = c.count * c.esize;
  void* tmp = c.comm.scratch(1, bytes);
  const void* cur = nullptr;
  DLTUNE_TRY(fold_in(c, f, &cur, tmp));
  if (f.newrank >= 0) {
    for (int mask = 1; mask < f.p2; mask <<= 1) {
      const int partner = f.actual(f.newrank ^ mask);
      DLTUNE_TRY(
          c.comm.sendrecv(partner, kTagRd, cur, bytes, partner, kTagRd, tmp, bytes, c.deadline));
      // Both partners compute lower-rank-first, so they hold bitwise equal results.
      if (partner < c.comm.rank()) {
        reduce(c.type, c.op, c.recv, tmp, cur, c.count);
      } else {
        reduce(c.type, c.op, c.recv, cur, tmp, c.count);
      }
      cur = c.recv;
    }
    if (cur != c.recv) std::memcpy(c.recv, cur, bytes);
  }
  return fold_out(c, f);
}

Status rabenseifner(const Call& c) {
  const Fold f = make_fold(c.comm.size(), c.comm.rank());
  const size_t p2 = static_cast<size_t>(f.p2);
  void* tmp = c.comm.scratch(1, c.count * c.esize);
  const void* cur = nullptr;
  DLTUNE_TRY(fold_in(c, f, &cur, tmp));
  if (f.newrank >= 0) {
    const auto nr = static_cast<size_t>(f.newrank);
    auto at = [&](const void* base, size_t block) {
      return static_cast<const uint8_t*>(base) + block_begin(c.count, p2, block) * c.esize;
    };
    auto elems = [&](size_t lo, size_t hi) {
      return block_begin(c.count, p2, hi) - block_begin(c.count, p2, lo);
    };
    size_t lo = 0, hi = p2;
    std::vector<std::pair<size_t, size_t>> parents;  // at most log2(p) entries: tiny
    for (size_t d = p2 / 2; d >= 1; d /= 2) {        // recursive-halving reduce-scatter
      const int partner = f.actual(static_cast<int>(nr ^ d));
      const size_t mid = lo + (hi - lo) / 2;
      const bool upper = (nr & d) != 0;
      const size_t klo = upper ? mid : lo, khi = upper ? hi : mid;
      const size_t glo = upper ? lo : mid, ghi = upper ? mid : hi;
      DLTUNE_TRY(c.comm.sendrecv(partner, kTagRab, at(cur, glo), elems(glo, ghi) * c.esize, partner,
                                 kTagRab, tmp, elems(klo, khi) * c.esize, c.deadline));
      auto* dst = const_cast<uint8_t*>(at(c.recv, klo));
      if (upper) {  // lower rank's contribution first, as in recursive doubling
        reduce(c.type, c.op, dst, tmp, at(cur, klo), elems(klo, khi));
      } else {
        reduce(c.type, c.op, dst, at(cur, klo), tmp, elems(klo, khi));
      }
      parents.emplace_back(lo, hi);
      lo = klo, hi = khi;
      cur = c.recv;
    }
    if (cur != c.recv) std::memcpy(c.recv, cur, c.count * c.esize);
    for (size_t d = 1; d < p2; d *= 2) {  // recursive-doubling allgather
      const auto [plo, phi] = parents.back();
      parents.pop_back();
      const int partner = f.actual(static_cast<int>(nr ^ d));
      const size_t olo = lo == plo ? hi : plo, ohi = lo == plo ? phi : lo;
      DLTUNE_TRY(c.comm.sendrecv(partner, kTagRab, at(c.recv, lo), elems(lo, hi) * c.esize, partner,
                                 kTagRab, const_cast<uint8_t*>(at(c.recv, olo)),
                                 elems(olo, ohi) * c.esize, c.deadline));
      lo = plo, hi = phi;
    }
  }
  return fold_out(c, f);
}

}  // namespace dltune::comm::detail
