#include "launcher/backend/rank_env.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/strings.h"

namespace dltune::launcher {
namespace {

Result<int> read_int(const std::function<const char*(const char*)>& get, const char* name,
                     const char* fallback = nullptr) {
  const char* v = get(name);
  const char* used = name;
  if ((v == nullptr || *v == '\0') && fallback != nullptr) {
    v = get(fallback);
    used = fallback;
  }
  if (v == nullptr || *v == '\0') return invalid_input(std::string(name) + " is not set");
  auto n = strings::parse_int(v);
  if (!n || *n < 0 || *n > (1 << 24)) {
    return invalid_input(std::string(used) + " is not a count: '" + std::string(v) + "'");
  }
  return static_cast<int>(*n);
}

}  // namespace

EnvList rank_identity_env(const RankIdentity& id) {
  const auto s = [](int v) { return std::to_string(v); };
  return {{"RANK", s(id.rank)},
          {"WORLD_SIZE", s(id.size)},
          {"LOCAL_RANK", s(id.local_rank)},
          {"LOCAL_WORLD_SIZE", s(id.local_size)},
          {"GROUP_RANK", s(id.node)},
          {"GROUP_WORLD_SIZE", s(id.nodes)},
          {"OMPI_COMM_WORLD_RANK", s(id.rank)},
          {"OMPI_COMM_WORLD_SIZE", s(id.size)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", s(id.local_rank)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", s(id.local_size)},
          {"OMPI_COMM_WORLD_NODE_RANK", s(id.local_rank)}};
}

EnvList rendezvous_env(const std::string& master_addr, int master_port) {
  return {{"MASTER_ADDR", master_addr}, {"MASTER_PORT", std::to_string(master_port)}};
}

EnvList thread_env(int bound_cpus, int usable_cpus, int local_size) {
  const int n = bound_cpus > 0 ? bound_cpus : std::max(1, usable_cpus) / std::max(1, local_size);
  const std::string threads = std::to_string(std::max(1, n));
  return {{"OMP_NUM_THREADS", threads},
          {"OPENBLAS_NUM_THREADS", threads},
          {"MKL_NUM_THREADS", threads}};
}

Result<std::vector<int>> parse_tasks_per_node(std::string_view text) {
  std::vector<int> out;
  const auto bad = [&] {
    return invalid_input("expected a task count list such as '2(x3),1', got '" +
                         std::string(text.substr(0, 64)) + "'");
  };
  if (text.empty()) return bad();
  for (const std::string& item : strings::split(text, ',')) {
    std::string_view it = item;
    const size_t paren = it.find('(');
    auto count = strings::parse_int(it.substr(0, paren));
    if (!count || *count < 1 || *count > (1 << 20)) return bad();
    int64_t repeat = 1;
    if (paren != std::string_view::npos) {
      std::string_view r = it.substr(paren);
      if (r.size() < 4 || r.substr(0, 2) != "(x" || r.back() != ')') return bad();
      auto n = strings::parse_int(r.substr(2, r.size() - 3));
      if (!n || *n < 1 || *n > (1 << 20)) return bad();
      repeat = *n;
    }
    if (out.size() + static_cast<size_t>(repeat) > (1u << 20)) return bad();
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(*count));
  }
  return out;
}

Result<RankIdentity> identity_from_slurm(const std::function<const char*(const char*)>& get) {
  RankIdentity id;
  auto rank = read_int(get, "SLURM_PROCID");
  if (!rank) return std::move(rank).error();
  auto size = read_int(get, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS");
  if (!size) return std::move(size).error();
  auto local = read_int(get, "SLURM_LOCALID");
  if (!local) return std::move(local).error();
  auto node = read_int(get, "SLURM_NODEID");
  if (!node) return std::move(node).error();
  auto nodes = read_int(get, "SLURM_STEP_NUM_NODES", "SLURM_NNODES");
  if (!nodes) return std::move(nodes).error();
  const char* tpn_name = "SLURM_STEP_TASKS_PER_NODE";
  const char* tpn = get(tpn_name);
  if (tpn == nullptr || *tpn == '\0') tpn = get(tpn_name = "SLURM_TASKS_PER_NODE");
  if (tpn == nullptr) return invalid_input("SLURM_STEP_TASKS_PER_NODE is not set");
  auto per_node = parse_tasks_per_node(tpn);
  if (!per_node) return std::move(per_node).error().wrap(tpn_name);
  id = {*rank, *size, *local, 0, *node, *nodes};
  if (id.node >= static_cast<int>(per_node->size())) {
    return invalid_input("SLURM_NODEID " + std::to_string(id.node) + " is beyond the " +
                         std::to_string(per_node->size()) + " node(s) of " + tpn_name);
  }
  id.local_size = (*per_node)[static_cast<size_t>(id.node)];
  if (id.rank >= id.size || id.local_rank >= id.local_size || id.node >= id.nodes) {
    return invalid_input("Slurm's task ids do not fit together: task " + std::to_string(id.rank) +
                         " of " + std::to_string(id.size) + ", local " +
                         std::to_string(id.local_rank) + " of " + std::to_string(id.local_size) +
                         ", node " + std::to_string(id.node) + " of " + std::to_string(id.nodes));
  }
  return id;
}

Result<std::string> first_host(std::string_view list) {
  const auto bad = [&] {
    return invalid_input("not a Slurm host list: '" + std::string(list.substr(0, 64)) + "'");
  };
  const size_t stop = list.find_first_of(",[");
  if (stop == 0 || list.empty()) return bad();
  if (stop == std::string_view::npos || list[stop] == ',') {
    return std::string(list.substr(0, stop));
  }
  // prefix[a-b,c]suffix: the first number of the range keeps its zero padding.
  size_t i = stop + 1, j = i;
  while (j < list.size() && std::isdigit(static_cast<unsigned char>(list[j]))) ++j;
  const size_t close = list.find(']', stop);
  if (j == i || close == std::string_view::npos) return bad();
  size_t end = close + 1;
  while (end < list.size() && list[end] != ',' && list[end] != '[') ++end;
  return std::string(list.substr(0, stop)) + std::string(list.substr(i, j - i)) +
         std::string(list.substr(close + 1, end - close - 1));
}

Result<int> free_tcp_port(const std::string& address) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    len = sizeof *v4;
  } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    family = AF_INET6;
    len = sizeof *v6;
  } else {
    return invalid_input("'" + address + "' is not an IP address");
  }
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_error("socket");
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    const int e = errno;
    close(fd);
    errno = e;
    return errno_error("binding a TCP port on " + address);
  }
  sockaddr_storage got{};
  socklen_t got_len = sizeof got;
  const int rc = getsockname(fd, reinterpret_cast<sockaddr*>(&got), &got_len);
  close(fd);
  if (rc != 0) return errno_error("getsockname");
  const int port = family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&got)->sin_port)
                                     : ntohs(reinterpret_cast<sockaddr_in6*>(&got)->sin6_port);
  return port;
}

}  // namespace dltune::launcher
