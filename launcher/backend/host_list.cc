#include "launcher/backend/host_list.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include <unistd.h>

#include "common/paths.h"
#include "common/strings.h"

namespace dltune::launcher {
namespace {

constexpr int kMaxSlots = 4096;  // validate_spec's most ranks

// Ok for a name a host can have: letters, digits, '.', '-', '_' and ':' (an IPv6 literal is
// not accepted: ':' separates the slots).
Status check_host_name(const std::string& name, const std::string& where) {
  if (name.empty()) return invalid_input(where + ": no host name");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    if (!ok) {
      return invalid_input(where + ": '" + strings::printable(name, "") +
                           "' is not a host name (letters, digits, '.', '-' and '_')");
    }
  }
  return ok_status();
}

Result<int> parse_slots(std::string_view text, const std::string& where) {
  auto n = strings::parse_int(text);
  if (!n || *n < 1 || *n > kMaxSlots) {
    return invalid_input(where + ": slots must be a number from 1 to " + std::to_string(kMaxSlots) +
                         ", got '" + strings::printable(text, "") + "'");
  }
  return static_cast<int>(*n);
}

}  // namespace

Result<std::vector<HostSlots>> parse_host_option(std::string_view text) {
  std::vector<HostSlots> hosts;
  for (const std::string& item : strings::split(text, ',')) {
    const std::string where = "-H " + strings::printable(text, "");
    const size_t colon = item.find(':');
    HostSlots h{item.substr(0, colon), 1};
    DLTUNE_TRY(check_host_name(h.name, where));
    if (colon != std::string::npos) {
      auto slots = parse_slots(std::string_view(item).substr(colon + 1), where);
      if (!slots) return slots.error();
      h.slots = *slots;
    }
    hosts.push_back(std::move(h));
  }
  return hosts;
}

Result<std::vector<HostSlots>> parse_hostfile_text(std::string_view text,
                                                   const std::string& origin) {
  std::vector<HostSlots> hosts;
  int line_no = 0;
  for (std::string line : strings::split(text, '\n')) {
    ++line_no;
    const std::string where = origin + ":" + std::to_string(line_no);
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::vector<std::string> words;
    for (const std::string& w : strings::split(strings::trim(line), ' ')) {
      const std::string t = strings::trim(w);
      if (!t.empty()) words.push_back(t);
    }
    if (words.empty()) continue;
    HostSlots h{words[0], 1};
    DLTUNE_TRY(check_host_name(h.name, where));
    for (size_t i = 1; i < words.size(); ++i) {
      const size_t eq = words[i].find('=');
      const std::string key = words[i].substr(0, eq);
      if (eq == std::string::npos || (key != "slots" && key != "max_slots")) {
        return invalid_input(where + ": expected 'HOST [slots=N] [max_slots=M]', got '" +
                             strings::printable(words[i], "") + "'");
      }
      auto n = parse_slots(std::string_view(words[i]).substr(eq + 1), where + " " + key);
      if (!n) return n.error();
      if (key == "slots") h.slots = *n;
    }
    hosts.push_back(std::move(h));
  }
  if (hosts.empty()) return invalid_input(origin + ": names no host");
  return hosts;
}

Result<std::vector<HostSlots>> parse_hostfile(const std::string& path) {
  auto text = paths::read_file(path);
  if (!text) return std::move(text).error().wrap("--hostfile");
  return parse_hostfile_text(*text, path);
}

Result<std::vector<HostSlots>> hosts_from_options(const std::string& option,
                                                  const std::string& hostfile) {
  if (option.empty() && hostfile.empty()) return std::vector<HostSlots>{};
  if (!option.empty() && !hostfile.empty()) return invalid_input("give -H or --hostfile, not both");
  return option.empty() ? parse_hostfile(hostfile) : parse_host_option(option);
}

Result<std::vector<NodeRanks>> map_by_slot(const std::vector<HostSlots>& hosts, int nranks) {
  if (hosts.empty()) return invalid_input("no hosts given");
  std::vector<HostSlots> merged;
  for (const HostSlots& h : hosts) {
    auto it = std::find_if(merged.begin(), merged.end(),
                           [&](const HostSlots& m) { return m.name == h.name; });
    if (it == merged.end()) {
      merged.push_back(h);
    } else {
      it->slots = std::min(kMaxSlots, it->slots + h.slots);
    }
  }
  int64_t slots = 0;
  for (const HostSlots& h : merged) slots += h.slots;
  if (nranks < 0) nranks = static_cast<int>(std::min<int64_t>(slots, kMaxSlots));
  if (nranks == 0) return invalid_input("0 ranks: nothing to start on the hosts");
  if (nranks > slots) {
    return invalid_input(std::to_string(nranks) + " ranks but the hosts have " +
                         std::to_string(slots) + " slot" + (slots == 1 ? "" : "s") +
                         " (-H HOST:SLOTS or slots=N in the hostfile gives a host more; mpirun "
                         "refuses this too without --oversubscribe)");
  }
  std::vector<NodeRanks> out;
  int next = 0;
  for (const HostSlots& h : merged) {
    if (next == nranks) break;
    const int take = std::min(h.slots, nranks - next);
    out.push_back({h.name, next, take});
    next += take;
  }
  return out;
}

Result<std::vector<HostSlots>> job_hosts(const std::vector<HostSlots>& hosts, int nodes) {
  auto all = map_by_slot(hosts, -1);
  if (!all) return std::move(all).error();
  std::vector<HostSlots> out;
  for (const NodeRanks& n : *all) out.push_back({n.host, n.count});
  if (nodes > static_cast<int>(out.size())) {
    return invalid_input("--nodes " + std::to_string(nodes) + ": the hosts are " +
                         std::to_string(out.size()));
  }
  if (nodes > 0) out.resize(static_cast<size_t>(nodes));
  return out;
}

std::string host_option(const std::vector<std::string>& hosts, int per_host) {
  std::string s;
  for (const std::string& h : hosts)
    s += (s.empty() ? "" : ",") + h + ":" + std::to_string(per_host);
  return s;
}

bool is_this_host(const std::string& name) {
  if (name == "localhost" || strings::starts_with(name, "127.")) return true;
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return false;
  const std::string self = buf;
  auto short_name = [](const std::string& s) { return s.substr(0, s.find('.')); };
  return name == self || name == short_name(self) || short_name(name) == self;
}

}  // namespace dltune::launcher
