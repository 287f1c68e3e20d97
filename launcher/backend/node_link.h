// The link between `dltune run -H/--hostfile` (the head) and the node daemon it starts on each
// host (`dltune run --node-of`, over ssh): one TCP connection per node, opened by the daemon.
//
// How a job runs over it. The head listens on a port of its own and starts every daemon with
// the port, its node index and a random token; the daemon connects back to the address ssh
// came from (SSH_CONNECTION's first field: the head as that node reaches it) and says hello
// with the token, and node 0's daemon adds a port free on its node (MASTER_PORT). Once every
// node has said hello, the head sends each its job (the program, the ranks of every node, the
// rendezvous address, the options and the plan, as JSON), and the daemons start their ranks
// under their own PMIx servers. A PMIx fence becomes one `fence` frame from each node that
// takes part (the node's collected data); the head answers each with a `release` holding all
// of them, concatenated in node order, which is what libpmix expects back. A daemon whose
// rank fails says so at once (`failed`: the verdict, the exit code); the head then tells every
// daemon to stop (`stop`) and ends the job with the first failure it heard of. A daemon ends
// with `done` (its node's outcome). A closed connection is a lost peer: a daemon that loses the
// head stops its ranks.
//
// Frames: a 4-byte big-endian length (of what follows), a type byte, the payload. Hello, job,
// failed and done carry JSON; fence and release a key (4-byte length, then the bytes) and the
// data; stop a sentence.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace dltune::launcher {

enum class NodeFrame : uint8_t {
  kHello = 1,    // daemon -> head: {"node", "token", "master_port"}
  kJob = 2,      // head -> daemon: the job (node_job.h)
  kFence = 3,    // daemon -> head: key, this node's data
  kRelease = 4,  // head -> daemon: key, every node's data
  kFailed = 5,   // daemon -> head: {"why", "exit_code", "host"}
  kDone = 6,     // daemon -> head: outcome_to_json()
  kStop = 7,     // head -> daemon: why
};

struct Frame {
  NodeFrame type = NodeFrame::kHello;
  std::string payload;
};

inline constexpr size_t kMaxFrameBytes = size_t{1} << 30;

// Writes one frame, all of it (retrying short writes and EINTR). Failure: kPeerFailed when the
// connection is gone, kInvalidInput for a payload over kMaxFrameBytes.
Status send_frame(int fd, NodeFrame type, std::string_view payload);
// Reads one whole frame. Failure: kPeerFailed when the connection closed or broke (at a frame
// boundary or inside one), kInvalidInput for an unknown type or a length over kMaxFrameBytes.
Result<Frame> recv_frame(int fd);

// A fence or release payload: the key (which fence: its participants) and the data.
std::string fence_payload(std::string_view key, std::string_view data);
// Splits fence_payload()'s text. Failure: kInvalidInput when it is not one.
Status split_fence_payload(std::string_view payload, std::string* key, std::string* data);

// Connects to host:port (an IPv4 or IPv6 literal or a name), retrying refused connections for
// up to `timeout_ms`, with TCP keep-alives (keep_alive()). Failure: kPeerFailed naming the
// address and the last error.
Result<int> connect_tcp(const std::string& host, int port, int timeout_ms);
// Makes a node link notice a peer whose machine or network died (no FIN ever comes): TCP
// keep-alive probes after 5 s of silence, 5 s apart, 3 unanswered ending the connection
// (reads fail within about 20 s).
void keep_alive(int fd);

// A listening TCP socket on every address, on a port the kernel chooses. Failure: kIo.
Result<int> listen_tcp(int* port);

// 32 random hex digits (getrandom). Failure: kIo.
Result<std::string> random_token();

}  // namespace dltune::launcher
