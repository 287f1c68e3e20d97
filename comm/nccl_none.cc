// The NCCL communicator in a build without NCCL: every entry point says how to get one.
#include "comm/nccl_communicator.h"

namespace dltune::comm {
namespace {
const char* const kNoNccl =
    "this dltune was built without NCCL (configure with -DDLTUNE_WITH_NCCL=ON on a machine with "
    "the CUDA toolkit and NCCL)";
}  // namespace

struct NcclCommunicator::Impl {};

bool nccl_available() { return false; }
std::string nccl_version_string() { return ""; }
Result<int> cuda_device_count() {
  return unsupported("no CUDA device: this dltune was built without NCCL and its CUDA runtime");
}

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create(Bootstrap&, int,
                                                                   const NcclOptions& opts) {
  DLTUNE_TRY(parse_nccl_choice(nccl_choice_name(opts)));
  return unsupported(kNoNccl);
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclCommunicator::~NcclCommunicator() { stop_comm_thread(); }
int NcclCommunicator::rank() const { return 0; }
int NcclCommunicator::size() const { return 1; }
std::string NcclCommunicator::describe() const { return "NCCL (not built)"; }
int NcclCommunicator::device() const { return -1; }
const NcclOptions& NcclCommunicator::options() const {
  static const NcclOptions none;
  return none;
}
Status NcclCommunicator::allreduce_device(const void*, void*, size_t, DataType, ReduceOp, void*) {
  return unsupported(kNoNccl);
}
Status NcclCommunicator::broadcast_device(void*, size_t, int, void*) {
  return unsupported(kNoNccl);
}
Status NcclCommunicator::synchronize(void*, Deadline) { return unsupported(kNoNccl); }
Status NcclCommunicator::send(int, int, const void*, size_t, Deadline) {
  return unsupported(kNoNccl);
}
Status NcclCommunicator::recv(int, int, void*, size_t, Deadline) { return unsupported(kNoNccl); }
Status NcclCommunicator::sendrecv(int, int, const void*, size_t, int, int, void*, size_t,
                                  Deadline) {
  return unsupported(kNoNccl);
}
Communicator& NcclCommunicator::local() { return *this; }
Communicator* NcclCommunicator::leaders() { return this; }
int NcclCommunicator::node_count() { return 1; }
Status NcclCommunicator::native_allreduce(const void*, void*, size_t, DataType, ReduceOp) {
  return unsupported(kNoNccl);
}
std::vector<Request> NcclCommunicator::start_batch_on(std::span<const P2pOp> ops, void*) {
  return std::vector<Request>(ops.size(), Request::finished(unsupported(kNoNccl)));
}
std::vector<Request> NcclCommunicator::start_batch_on(std::span<const P2pOp> ops, void*, Deadline) {
  return std::vector<Request>(ops.size(), Request::finished(unsupported(kNoNccl)));
}
Request NcclCommunicator::isend_on(int, int, const void*, size_t, void*) {
  return Request::finished(unsupported(kNoNccl));
}
Request NcclCommunicator::irecv_on(int, int, void*, size_t, void*) {
  return Request::finished(unsupported(kNoNccl));
}
Request NcclCommunicator::start_send(int, int, const void*, size_t, Deadline) {
  return Request::finished(unsupported(kNoNccl));
}
Request NcclCommunicator::start_recv(int, int, void*, size_t, Deadline) {
  return Request::finished(unsupported(kNoNccl));
}
std::vector<Request> NcclCommunicator::start_batch_now(std::span<const P2pOp> ops, Deadline) {
  return std::vector<Request>(ops.size(), Request::finished(unsupported(kNoNccl)));
}
Result<std::unique_ptr<Communicator>> NcclCommunicator::split_now(int, int) {
  return unsupported(kNoNccl);
}

}  // namespace dltune::comm
