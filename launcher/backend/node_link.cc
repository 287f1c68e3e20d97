#include "launcher/backend/node_link.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dltune::launcher {
namespace {

void put_u32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Reads exactly n bytes. false (errno or EOF) when the connection ended first.
bool read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

Status send_frame(int fd, NodeFrame type, std::string_view payload) {
  if (payload.size() + 1 > kMaxFrameBytes) {
    return invalid_input("a node link frame of " + std::to_string(payload.size()) + " bytes");
  }
  std::string head;
  put_u32(head, static_cast<uint32_t>(payload.size() + 1));
  head.push_back(static_cast<char>(type));
  for (std::string_view part : {std::string_view(head), payload}) {
    while (!part.empty()) {
      const ssize_t put = send(fd, part.data(), part.size(), MSG_NOSIGNAL);
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) return peer_failed(std::string("the node link broke: ") + std::strerror(errno));
      part.remove_prefix(static_cast<size_t>(put));
    }
  }
  return ok_status();
}

Result<Frame> recv_frame(int fd) {
  char len[4];
  if (!read_all(fd, len, sizeof len)) return peer_failed("the node link closed");
  const uint32_t n = get_u32(len);
  if (n < 1 || n > kMaxFrameBytes) {
    return invalid_input("a node link frame claims " + std::to_string(n) + " bytes");
  }
  std::string body(n, '\0');
  if (!read_all(fd, body.data(), n)) return peer_failed("the node link closed inside a frame");
  const auto type = static_cast<uint8_t>(body[0]);
  if (type < static_cast<uint8_t>(NodeFrame::kHello) ||
      type > static_cast<uint8_t>(NodeFrame::kStop)) {
    return invalid_input("a node link frame of unknown type " + std::to_string(type));
  }
  return Frame{static_cast<NodeFrame>(type), body.substr(1)};
}

std::string fence_payload(std::string_view key, std::string_view data) {
  std::string s;
  put_u32(s, static_cast<uint32_t>(key.size()));
  s.append(key);
  s.append(data);
  return s;
}

Status split_fence_payload(std::string_view payload, std::string* key, std::string* data) {
  if (payload.size() < 4) return invalid_input("a fence frame without its key");
  const uint32_t k = get_u32(payload.data());
  if (k > payload.size() - 4) return invalid_input("a fence frame's key runs past its end");
  *key = std::string(payload.substr(4, k));
  *data = std::string(payload.substr(4 + k));
  return ok_status();
}

Result<int> connect_tcp(const std::string& host, int port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return peer_failed("cannot resolve " + host + ": " + gai_strerror(rc));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string last = "no address";
  for (;;) {
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        keep_alive(fd);
        freeaddrinfo(found);
        return fd;
      }
      last = std::strerror(errno);
      close(fd);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  freeaddrinfo(found);
  return peer_failed("cannot connect to " + host + ":" + service + ": " + last);
}

void keep_alive(int fd) {
  const int on = 1, idle = 5, interval = 5, count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

Result<int> listen_tcp(int* port) {
  const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool v6 = fd >= 0;
  const int sock = v6 ? fd : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return errno_error("socket");
  const int off = 0;
  if (v6) setsockopt(sock, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);  // IPv4 too
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    len = sizeof *a;
  }
  if (bind(sock, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(sock, 64) != 0 ||
      getsockname(sock, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    Error e = errno_error("listening for the node daemons");
    close(sock);
    return e;
  }
  *port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                   : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return sock;
}

Result<std::string> random_token() {
  unsigned char bytes[16];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    return errno_error("getrandom");
  }
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  for (unsigned char b : bytes) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

}  // namespace dltune::launcher
