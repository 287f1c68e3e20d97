// The machines of a job without Slurm, as mpirun users name them (issue 39): `-H a:2,b:2` and
// `--hostfile FILE`, and how a job's ranks are laid over them.
//
//   auto hosts = parse_host_option("n1:2,n2:2");     // or parse_hostfile("hosts.txt")
//   auto nodes = map_by_slot(*hosts, 4);             // n1: ranks 0-1, n2: ranks 2-3
//
// Ranks fill each host's slots in the order the hosts were named, as mpirun's default
// (`--map-by slot`) does; a host named twice has the slots of both mentions (Open MPI's rule).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dltune::launcher {

struct HostSlots {
  std::string name;
  int slots = 1;
};

// The hosts of a job and the ranks each runs, in rank order.
struct NodeRanks {
  std::string host;
  int first_rank = 0;
  int count = 0;
};

// mpirun's -H value: "a:2,b,c:4" (a host without ":N" has one slot). Failure: kInvalidInput
// naming the entry for an empty host name, a name with a character no host name has (blanks,
// '=', '/', brackets), or slots that are not a number from 1 to 4096.
Result<std::vector<HostSlots>> parse_host_option(std::string_view text);

// An Open MPI hostfile: one host per line, optionally followed by "slots=N" (default 1) and
// "max_slots=M" (read, checked, not used: dltune does not oversubscribe hosts); '#' starts a
// comment; blank lines are skipped. Failure: kNotFound / kIo for a file that cannot be read;
// kInvalidInput naming the file and line for anything else (an unknown key, a bad number, no
// host at all).
Result<std::vector<HostSlots>> parse_hostfile(const std::string& path);
// The same rules over a hostfile's text; `origin` names it in errors.
Result<std::vector<HostSlots>> parse_hostfile_text(std::string_view text,
                                                   const std::string& origin);

// The hosts of `-H TEXT` or `--hostfile FILE` (the one given; "" for not given): none when
// neither was given. Failure: both given, or what parse_host_option / parse_hostfile say.
Result<std::vector<HostSlots>> hosts_from_options(const std::string& option,
                                                  const std::string& hostfile);

// Lays `nranks` ranks over the hosts by slot: each host in turn takes ranks up to its slots
// (hosts named twice merged first, in the order of their first mention). nranks < 0: as many
// ranks as slots. Hosts left without a rank are not part of the job. Failure: kInvalidInput
// when the ranks outnumber the slots ("6 ranks but the hosts have 4 slots ...", as mpirun
// refuses without --oversubscribe), for nranks == 0, or for no hosts.
Result<std::vector<NodeRanks>> map_by_slot(const std::vector<HostSlots>& hosts, int nranks);

// A job's nodes from the hosts the user named: one per distinct host (merged as map_by_slot
// merges them, in the order of first mention, slots summed), the first `nodes` of them when
// nodes > 0. Failure: kInvalidInput for no hosts or nodes beyond the hosts named.
Result<std::vector<HostSlots>> job_hosts(const std::vector<HostSlots>& hosts, int nodes);

// `dltune run -H`'s value for `per_host` ranks on each of `hosts`: "n1:2,n2:2".
std::string host_option(const std::vector<std::string>& hosts, int per_host);

// True when `name` is this machine: "localhost", a 127.x.y.z address, or this host's name
// (gethostname, with or without its domain). The launcher starts such a host's ranks itself,
// without ssh.
bool is_this_host(const std::string& name);

}  // namespace dltune::launcher
