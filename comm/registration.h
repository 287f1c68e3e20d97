// Registered memory: a rank's own (private, malloc'd) buffer shared with the other ranks of
// its node, so that the 'cma' allreduce reads and writes it directly, as the 'shm' allreduce
// does the engine's node-shared buffers, instead of through cross-memory attach's system calls
// (which pin and copy page by page in the kernel: at 32-64 MiB on 2 ranks, 2.4x the time of the
// same traffic in shared memory). NCCL's ncclCommRegister and RDMA's memory registration are
// the same idea: register a buffer once, reuse it every step.
//
// How: Communicator::register_memory(p, bytes) is collective over the node-local group. Each
// rank copies the whole pages of [p, p + bytes) into a fresh memfd and moves that mapping over
// them (mremap), so the buffer keeps its address and contents but its pages are now shared;
// each rank maps every peer's memfd (opened through /proc/PID/fd, which needs the same ptrace
// permission as cross-memory attach). The partial pages at either end of the buffer (malloc's
// blocks are not page-aligned) stay private; the allreduce reaches them with cross-memory
// attach. Destroying the Registration gives the buffer private pages again with the same
// contents (one copy) and unmaps the peers' memory.
//
// What changes for the program while a buffer is registered (say so to users):
//  - the buffer's whole pages are MADV_DONTFORK, as RDMA registrations are: a fork()ed child
//    (a PyTorch DataLoader worker) has no mapping there rather than silently sharing it;
//  - the buffer must stay allocated, and not be remapped, until the Registration is destroyed
//    (as with ncclCommDeregister); destroying the Registration after a free() finds the pages
//    gone, says so in the log and leaves the address range alone.
// Where the kernel refuses cross-memory attach (comm/cma.h's probe), registration is a no-op
// that says why (active() false, reason()); the allreduce then stages as 'shm' does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace dltune::comm {

// One registration as this rank holds it (shared by the Registration handle and the
// communicator's list, which only observes it).
struct RegistrationState {
  // The same on every local rank: the group's count of register_memory() calls so far.
  uint64_t id = 0;
  uint8_t* user = nullptr;  // [user, user + user_bytes): what the caller registered
  size_t user_bytes = 0;
  // Every local rank's whole pages as they are at that rank (its address, its length; 0 when
  // its buffer spans no whole page) and as mapped in this process (this rank's own: base
  // itself).
  struct Span {
    uint64_t base = 0;
    size_t bytes = 0;
    uint8_t* mapped = nullptr;
  };
  std::vector<Span> spans;
  int local_rank = 0;
  std::string name;  // the memfd's name, as /proc/self/maps shows it ("/memfd:NAME")

  ~RegistrationState();  // unmaps the peers, gives this rank's pages back (see the header)
};

// The handle register_memory() returns. Move-only; destroying it deregisters (local: no
// communication; every rank should do it outside collectives, as it registered).
class Registration {
 public:
  Registration() = default;
  // Whether the node's ranks registered (false where the kernel refused cross-memory attach).
  // A buffer that spans no whole page is registered with nothing shared (shared_bytes() 0).
  bool active() const { return state_ != nullptr; }
  // Why it is not active ("" when it is).
  const std::string& reason() const { return reason_; }
  // The shared part of this rank's buffer: whole pages, [shared_begin, shared_begin +
  // shared_bytes).
  void* shared_begin() const;
  size_t shared_bytes() const;
  // Deregisters now (the destructor's work).
  void reset() { state_.reset(); }

  Registration(std::shared_ptr<RegistrationState> state, std::string reason)
      : state_(std::move(state)), reason_(std::move(reason)) {}

 private:
  std::shared_ptr<RegistrationState> state_;
  std::string reason_;
};

}  // namespace dltune::comm
