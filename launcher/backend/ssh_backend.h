// Jobs over several machines without Slurm (issue 39): `dltune run -H n1:2,n2:2` or
// `--hostfile FILE`, the ranks started over ssh as mpirun and DeepSpeed start them.
//
// How it works. The head (run_hosts) lays the ranks over the hosts by slot (host_list.h) and
// starts, for every host that gets ranks, a node daemon: `dltune run --node-of ...`, the same
// dltune binary at the same path, through `ssh -T -o BatchMode=yes HOST` (DLTUNE_SSH replaces
// "ssh": "ssh -F my_config", say), or directly for this machine. Each daemon connects back to
// the head (node_link.h), gets its job and runs its node's ranks as the local backend runs a
// job, under its own PMIx server, with the job's global ranks, the rendezvous variables of rank
// 0's node and fences that cross nodes through the head (node_hub.h). The head supervises the
// ssh processes (their output is the ranks' output, tagged and timestamped by the daemons as
// asked), and when a node reports a failed rank, or an ssh process fails, it tells every
// daemon to stop and ends as mpirun does: the first failed rank's exit code and a sentence
// naming the rank and its host. Standard input goes to rank 0's node.
//
// What a host needs: sshd reachable without a password (BatchMode), dltune at the path the
// head runs it from (a shared file system or the same installation), the program, and a route
// back to a TCP port the head listens on. Ranks get their node's login environment plus what
// dltune sets and `-x` names, as under mpirun.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/backend/host_list.h"
#include "launcher/backend/launch_spec.h"
#include "topology/topology.h"

namespace dltune::launcher {

// Runs spec.nranks ranks (or, when nranks < 0, one per slot) of spec.argv over `hosts`.
// Success: the outcome, as run_local's. Failure (nothing left running): kInvalidInput for
// more ranks than slots or a bad spec, kIo when the head cannot listen or fork.
Result<LaunchOutcome> run_hosts(LaunchSpec spec, const std::vector<HostSlots>& hosts);

// How many distinct machines `hosts` are: one rank on each (`dltune run -H h1:1,h2:1,... --
// cat /proc/sys/kernel/random/boot_id`), its boot ids counted as count_node_machines() counts
// Slurm's (slurm_backend.h). 1, running nothing, for one host. Errors: capture_output's (a
// timeout after `timeout_ms`, a host that cannot be reached) and count_boot_ids'.
Result<int> count_host_machines(const std::vector<std::string>& hosts, int timeout_ms);

// The topology of `host` as its own dltune describes it: `dltune run -H HOST:1 --bind none
// [-x VAR=VALUE ...] -- dltune topo --export` (`exports`: the -x pairs of a launch's run
// options, so that the ask sees what its ranks will), parsed here with Topology::source
// "host HOST (over ssh)" (is_host_topology()). Errors: capture_output's (a host ssh cannot
// reach, past `timeout_ms`) and the export's (kInvalidInput: not an hwloc export).
Result<topology::Topology> host_topology(const std::string& host,
                                         const std::vector<std::string>& exports, int timeout_ms);
// Whether `topo` came from host_topology(): a machine the job's ranks run on, though not this.
bool is_host_topology(const topology::Topology& topo);

// The topology a job over `hosts` (-H / --hostfile, their names) plans with, when that is not this
// machine's: the first host's own (host_topology(), answered within `timeout_ms`), taking the
// other hosts to be alike, where none of the hosts is this machine and DLTUNE_TOPO_XML is not
// set here (it wins). nullopt where this machine's stands; also when the host does not answer,
// *warning then saying why.
std::optional<topology::Topology> hosts_own_topology(const std::vector<std::string>& hosts,
                                                     const std::vector<std::string>& run_options,
                                                     int timeout_ms, std::string* warning);
// How long the first host has to answer (ssh, dltune's start, hwloc's discovery of a large
// machine without a cached one).
inline constexpr int kHostTopologyTimeoutMs = 20000;

// Where a node daemon finds its head: `--node-of ADDR:PORT` (ADDR "ssh": SSH_CONNECTION's
// first field, the address the ssh session came from), `--node-index K`, and the job's token,
// read from DLTUNE_NODE_TOKEN.
struct NodeOf {
  std::string head;  // an address, or "ssh"
  int port = 0;
  int node = 0;
  std::string token;
};
// Parses "ADDR:PORT" (the last ':' separates the port). Failure: kInvalidInput.
Result<NodeOf> parse_node_of(const std::string& text, int node);

// The node daemon: connects to the head, runs this node's ranks of the job it is given, and
// reports how they ended. Returns the process's exit code (the node's outcome; 1 when the head
// cannot be reached, with one line on stderr saying why).
int run_node_daemon(const NodeOf& of);

}  // namespace dltune::launcher
