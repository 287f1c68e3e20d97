#!/usr/bin/env bash
# A private Slurm cluster of K simulated nodes that really talk over a network: each node is a
# Linux network namespace (and UTS namespace: its own hostname n1..nK) joined to a bridge by a
# veth pair whose two ends are shaped with tc to a chosen rate (and latency, where the kernel has
# netem). One slurmd runs inside each node's namespaces; munged and slurmctld run in a hub
# namespace that owns the bridge. So `salloc -N K` (run in the hub, see `exec`) places ranks on
# nodes whose traffic crosses the shaped links: Open MPI between nodes uses TCP over them,
# shared memory within a node. Needs root.
#
# Every address (10.213.0.0/24: node I is 10.213.0.I, the hub 10.213.0.254) exists only on the
# bridge and veths inside the namespaces this script creates; no namespace has a route out, and
# nothing is added to the host's own network stack. Namespaces are named dlt<PID>-hub and
# dlt<PID>-n<I> (PID: the starting shell's), so two clusters (two tests) never share one.
#
#   netns_cluster.sh start DIR [NODES [CPUS]] [--rate RATE] [--delay US]
#        NODES 1-8 (default 2) advertising CPUS CPUs each (default 4). RATE: tc's rate syntax
#        per direction of each node's link (default 10gbit; also tried 1gbit, 25gbit). US: the
#        one-way node-to-node latency to add, in microseconds (default 20), split over the two
#        veth ends of a path (US/2 each, with netem). When the kernel has no netem (CONFIG_NET_SCH_NETEM
#        unset, as on the 2-core VMs this was written on) the rate is shaped with tbf alone and
#        no delay is added: link.json then says "delay_applied": false and the path keeps its
#        natural latency (the sweep's ping-pong measures it).
#   netns_cluster.sh shape DIR RATE [US]     reshape every link (between jobs).
#   netns_cluster.sh exec DIR CMD [ARGS...]  runs CMD in the hub namespace with SLURM_CONF set:
#        salloc / srun / dltune launch --backend slurm go here. Exits as CMD does.
#   netns_cluster.sh node DIR I CMD [ARGS...]  runs CMD in node I's namespaces.
#   netns_cluster.sh sshd DIR                starts an sshd on every node (root, key login);
#        DIR/ssh/config is the ssh client's configuration for reaching nodes n1..nK.
#   netns_cluster.sh stop DIR                stops every daemon and step, deletes the
#        namespaces (their veths and bridge go with them) and DIR. Safe to call twice, and on a
#        half-started cluster.
#   DIR/env.sh     exports SLURM_CONF (source it before calling `exec`'s commands by hand)
#   DIR/link.json  {"nodes", "rate", "delay_us", "delay_applied", "qdisc", "subnet", "hub"}
#   DIR/cpu_group  the cpu cgroup the nodes' daemons and ranks run in (below); absent when this
#        host offers none, and the ranks then share the cores as the kernel's autogroups say.
#   DIR/log/       daemon logs.
# Exit status: 0 done; 77 a missing package (slurm, munge, iproute2) or not root (tests skip);
# 1 failure (start cleans up after itself and prints the log tails); 2 bad arguments.
set -euo pipefail

die() { echo "netns_cluster.sh: $*" >&2; exit 1; }
usage() {
  echo "usage: netns_cluster.sh start DIR [NODES [CPUS]] [--rate R] [--delay US] |" \
    "shape DIR RATE [US] | exec DIR CMD... | node DIR I CMD... | sshd DIR | stop DIR" >&2
  exit 2
}

readonly SUBNET=10.213.0
readonly HUB_ADDR=$SUBNET.254

need_packages() {
  local missing=()
  for p in munged mungekey slurmctld slurmd srun scontrol sinfo ip tc nsenter unshare; do
    command -v "$p" >/dev/null 2>&1 || [ -x "/usr/sbin/$p" ] || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "netns_cluster.sh: missing ${missing[*]} (install slurmctld slurmd slurm-client munge" \
      "iproute2 util-linux)" >&2
    exit 77
  fi
  [ "$(id -u)" -eq 0 ] || { echo "netns_cluster.sh: must run as root (namespaces, slurmd)" >&2; exit 77; }
}

# The namespace names recorded at start (DIR/namespaces): the hub first.
ns_list() { [ -s "$1/namespaces" ] && cat "$1/namespaces"; }
hub_ns() { head -n 1 "$1/namespaces"; }
node_ns() { sed -n "$(( $2 + 1 ))p" "$1/namespaces"; }
in_ns() { local ns=$1; shift; nsenter --net="/run/netns/$ns" "$@"; }

has_netem() {  # a throwaway namespace: does this kernel have the netem qdisc?
  local probe=dlt$$-probe ok=1
  ip netns add "$probe" 2>/dev/null || return 1
  ip -n "$probe" link add p0 type dummy 2>/dev/null &&
    tc -n "$probe" qdisc add dev p0 root netem delay 1us 2>/dev/null && ok=0
  ip netns del "$probe" 2>/dev/null || true
  return $ok
}

# shape_dev NS DEV RATE US NETEM: RATE (and US/2 of delay with netem) on DEV's egress.
shape_dev() {
  local ns=$1 dev=$2 rate=$3 us=$4 netem=$5
  tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
  if [ "$netem" = 1 ]; then
    # netem's own rate limiter; a limit of packets large enough for a 25 Gbit/s burst.
    tc -n "$ns" qdisc add dev "$dev" root netem delay "$(awk "BEGIN{print $us/2}")us" \
      rate "$rate" limit 100000
  else
    # Token bucket: a burst of 1 ms at the rate (at least 64 KiB, a TSO segment), and a queue
    # of 200 ms before drops. With 10 ms, 8 ranks' bursts into one link lost packets (33 and 44
    # drops on two nodes' links in one 4-node sweep at 1 Gbit/s), and a lost tail segment costs
    # TCP a retransmission timeout of 200 ms or more, doubling when it repeats: single
    # collectives took 20-50 s, and one sweep's collective outlasted the communicator's timeout.
    # A queue keeps the rate and only adds delay while the link is oversubscribed.
    local bits bytes
    bits=$(tc_rate_bits "$rate")
    bytes=$(( bits / 8 / 1000 ))
    [ "$bytes" -ge 65536 ] || bytes=65536
    tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst "$bytes" latency 200ms
  fi
}

# tc_rate_bits RATE: "10gbit" -> 10000000000 (bit, kbit, mbit, gbit; tc's decimal units).
tc_rate_bits() {
  local r=${1,,} n unit
  n=${r%%[a-z]*}
  unit=${r#"$n"}
  [[ "$n" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "rate '$1' is not a number with a unit (10gbit)"
  case "$unit" in
    bit) awk "BEGIN{printf \"%d\", $n}" ;;
    kbit) awk "BEGIN{printf \"%d\", $n * 1e3}" ;;
    mbit) awk "BEGIN{printf \"%d\", $n * 1e6}" ;;
    gbit) awk "BEGIN{printf \"%d\", $n * 1e9}" ;;
    *) die "rate '$1': use bit, kbit, mbit or gbit" ;;
  esac
}

shape_all() {
  local dir=$1 rate=$2 us=$3 netem=0 nodes i hub
  tc_rate_bits "$rate" >/dev/null
  [[ "$us" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "delay '$us' is not a number of microseconds"
  has_netem && netem=1
  nodes=$(( $(wc -l <"$dir/namespaces") - 1 ))
  hub=$(hub_ns "$dir")
  for i in $(seq 1 "$nodes"); do
    shape_dev "$(node_ns "$dir" "$i")" eth0 "$rate" "$us" "$netem"
    shape_dev "$hub" "h$i" "$rate" "$us" "$netem"
  done
  local applied=false qdisc=tbf
  [ "$netem" = 1 ] && applied=true && qdisc=netem
  [ "$netem" = 1 ] || echo "netns_cluster.sh: this kernel has no netem qdisc: links shaped to" \
    "$rate with tbf, no delay added (natural latency)" >&2
  printf '{"nodes": %d, "rate": "%s", "delay_us": %s, "delay_applied": %s, "qdisc": "%s", "subnet": "%s.0/24", "hub": "%s"}\n' \
    "$nodes" "$rate" "$us" "$applied" "$qdisc" "$SUBNET" "$HUB_ADDR" >"$dir/link.json"
}

# The nodes' CPU share. The simulated nodes share this host's cores. Left in the root cpu
# group, every session is an autogroup of its own (kernel.sched_autogroup_enabled) and the kernel
# shares the cores between sessions, not ranks: with 2 nodes x 2 ranks on 2 cores, one rank's
# session held it alone and got a core while the other three shared the second, so it reached
# each allreduce about 90 ms of a 240 ms step before them, and a core idled at every step's end.
# Real nodes of one size give their ranks equal shares. So the slurmds (and so their steps and
# ranks) move into one cpu cgroup of their own, dlt<PID>-nodes, where every task gets the same
# share (autogroups apply to the root group only). cgroup v1's cpu hierarchy or v2 with the cpu
# controller; none writable: the cluster runs as before (no DIR/cpu_group).
cpu_group_root() {
  if [ -w /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cgroup.procs ]; then
    echo /sys/fs/cgroup/cpu
  elif [ -f /sys/fs/cgroup/cgroup.subtree_control ] &&
      grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    echo /sys/fs/cgroup
  fi
}

cpu_group_join() {  # cpu_group_join DIR: the slurmds of DIR's cluster into their own cpu group
  local dir=$1 root group f
  root=$(cpu_group_root)
  [ -n "$root" ] || return 0
  group=$root/dlt$$-nodes
  mkdir "$group" 2>/dev/null || return 0
  echo "$group" >"$dir/cpu_group"
  for f in "$dir"/slurmd-*.pid; do
    [ -s "$f" ] || continue
    if ! echo "$(cat "$f")" 2>/dev/null >"$group/cgroup.procs"; then
      echo "netns_cluster.sh: could not move slurmd $(cat "$f") into $group; its ranks share" \
        "the cores as the kernel's autogroups say" >&2
    fi
  done
}

cpu_group_remove() {  # cpu_group_remove GROUP: once its processes are gone (they were killed)
  local group=$1
  [ -d "$group" ] || return 0
  for _ in $(seq 1 40); do rmdir "$group" 2>/dev/null && return 0; sleep 0.05; done
  echo "netns_cluster.sh: could not remove the cpu group $group (processes left in it)" >&2
}

# A cluster whose starting shell was killed (SIGKILL, a CI timeout) could not run its trap:
# delete the namespaces of such clusters, those named dlt<PID>-... whose PID is gone and that
# hold no process.
remove_stale() {
  local ns pid
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^dlt[0-9]+-(hub|n[0-9]+|probe)$'); do
    pid=${ns#dlt}
    pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null && continue
    [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] || continue
    echo "netns_cluster.sh: removing $ns, left by a cluster whose shell ($pid) is gone" >&2
    ip netns del "$ns" 2>/dev/null || true
  done
  local root group
  root=$(cpu_group_root)
  [ -n "$root" ] || return 0
  for group in "$root"/dlt*-nodes; do
    [ -d "$group" ] || continue
    pid=${group##*/dlt}
    pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null && continue
    [ -z "$(cat "$group/cgroup.procs" 2>/dev/null)" ] || continue
    rmdir "$group" 2>/dev/null || true
  done
}

make_network() {
  local dir=$1 nodes=$2 hub=dlt$$-hub i ns
  echo "$hub" >"$dir/namespaces"
  ip netns add "$hub"
  ip -n "$hub" link set lo up
  ip -n "$hub" link add br0 type bridge
  ip -n "$hub" addr add "$HUB_ADDR/24" dev br0
  ip -n "$hub" link set br0 up
  for i in $(seq 1 "$nodes"); do
    ns=dlt$$-n$i
    echo "$ns" >>"$dir/namespaces"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Both ends are created inside the namespaces: no interface ever appears in the host's.
    ip -n "$ns" link add eth0 type veth peer name "h$i" netns "$hub"
    ip -n "$ns" addr add "$SUBNET.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$hub" link set "h$i" master br0
    ip -n "$hub" link set "h$i" up
  done
}

write_config() {
  local dir=$1 nodes=$2 cpus=$3 host
  host=$(hostname -s)
  mkdir -p "$dir"/{state,spool,log,tmp,munge}
  chmod 0755 "$dir/munge"
  : >"$dir/plugstack.conf"
  echo "CgroupPlugin=cgroup/v1" >"$dir/cgroup.conf"
  # Every namespace has its own ports: Slurm's defaults never collide with another cluster.
  {
    echo "ClusterName=dltunenetns"
    echo "SlurmctldHost=$host($HUB_ADDR)"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$dir/munge/munge.socket"
    echo "CredType=cred/munge"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool/%n"
    echo "SlurmctldPidFile=$dir/slurmctld.pid"
    echo "SlurmdPidFile=$dir/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "TmpFS=$dir/tmp/%n"
    echo "PlugStackConfig=$dir/plugstack.conf"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "SchedulerType=sched/builtin"
    # A job may grow its allocation (salloc --dependency=expand:JOBID; dltune launch --nodes
    # MIN-MAX takes a lost node's replacement so).
    echo "SchedulerParameters=permit_job_expansion"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "SlurmdParameters=config_overrides"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "SlurmctldTimeout=30"
    # The daemons' messages share the shaped links with the jobs' traffic: an allreduce sweep
    # across 4 nodes at 1 Gbit/s delayed slurmctld's pings past 30 s, and Slurm declared the
    # node down and killed the job ("Node failure on n1").
    echo "SlurmdTimeout=600"
    echo "MessageTimeout=60"
    echo "KillWait=2"
    echo "InactiveLimit=0"
    local names=()
    for i in $(seq 1 "$nodes"); do
      mkdir -p "$dir/spool/n$i" "$dir/tmp/n$i"
      echo "NodeName=n$i NodeHostname=n$i NodeAddr=$SUBNET.$i CPUs=$cpus RealMemory=1000 State=UNKNOWN"
      names+=("n$i")
    done
    echo "PartitionName=test Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
  } >"$dir/slurm.conf"
  {
    echo "export SLURM_CONF=$dir/slurm.conf"
    # Open MPI between the nodes: TCP over the node's link only (shared memory within a node).
    echo "export OMPI_MCA_btl_tcp_if_include=eth0"
    # The simulated nodes share this host's cores: 8 ranks of 4 nodes on 2 cores are
    # oversubscribed though each node's slurmd reports enough CPUs, so Open MPI must yield the
    # core while it waits, as the local launcher makes it do past the host's CPU count. Spinning,
    # its own allreduce took 42 s for one 8 KiB call and ours 5-12 ms.
    echo "export OMPI_MCA_mpi_yield_when_idle=1"
  } >"$dir/env.sh"
}

wait_for() {  # wait_for SECONDS CMD...: retry CMD every 50 ms
  local deadline=$(( $(date +%s%N) + $1 * 1000000000 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s%N)" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

all_idle() {
  local states
  states=$(in_ns "$(hub_ns "$DIR")" sinfo -h -o '%T' 2>/dev/null) || return 1
  [ -n "$states" ] && ! grep -qv '^idle$' <<<"$states"
}

start() {
  local dir=$1 nodes=$2 cpus=$3 rate=$4 us=$5
  [[ "$nodes" =~ ^[1-8]$ ]] || { echo "netns_cluster.sh: NODES must be 1 to 8, got '$nodes'" >&2; exit 2; }
  [[ "$cpus" =~ ^[0-9]+$ ]] || { echo "netns_cluster.sh: CPUS must be a number, got '$cpus'" >&2; exit 2; }
  need_packages
  [ ! -e "$dir/slurm.conf" ] || die "'$dir' already holds a cluster; stop it first"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  DIR=$dir
  trap 'echo "netns_cluster.sh: start failed; logs:" >&2; tail -n 5 "$dir"/log/* >&2 || true; stop "$dir"' ERR
  remove_stale
  make_network "$dir" "$nodes"
  shape_all "$dir" "$rate" "$us"
  write_config "$dir" "$nodes" "$cpus"
  export SLURM_CONF=$dir/slurm.conf
  local hub
  hub=$(hub_ns "$dir")
  mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null 2>&1
  chmod 0400 "$dir/munge/munge.key"
  munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" --force
  in_ns "$hub" /usr/sbin/slurmctld -f "$SLURM_CONF"
  wait_for 20 in_ns "$hub" scontrol ping
  in_ns "$hub" scontrol ping | grep -q UP
  # The literal path Slurm's pmix plugin names a peer's step daemon by (it does not expand %n
  # of SlurmdSpoolDir when it forwards a message through that node's slurmd, which it does
  # when its direct connection fails: a restarted step's fence after a hung rank).
  mkdir -p "$dir/spool/%n"
  for i in $(seq 1 "$nodes"); do
    # Its own hostname (UTS namespace): Open MPI and PMIx tell nodes apart by it. Its own mount
    # namespace, where the literal spool/%n is its own spool/nI, as on a real node.
    mkdir -p "$dir/spool/n$i"
    in_ns "$(node_ns "$dir" "$i")" unshare --uts --mount --propagation private /bin/sh -c \
      "hostname n$i && mount --bind '$dir/spool/n$i' '$dir/spool/%n' &&
       exec /usr/sbin/slurmd -f '$SLURM_CONF' -N n$i"
  done
  wait_for 30 all_idle
  cpu_group_join "$dir"
  trap - ERR
}

# An sshd on every node (its address, port 22; root logs in with a key made here, nothing
# else), for launches over ssh (`dltune run -H`). DIR/ssh/config is the client's
# configuration: Host nI -> 10.213.0.I with that key, no host key checks (the host keys are
# made here too). Exit 77 without openssh-server.
start_sshd() {
  local dir=$1 nodes i
  [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1 || {
    echo "netns_cluster.sh: missing sshd or ssh (install openssh-server openssh-client)" >&2
    exit 77
  }
  nodes=$(( $(wc -l <"$dir/namespaces") - 1 ))
  mkdir -p "$dir/ssh" /run/sshd
  chmod 0700 "$dir/ssh"
  rm -f "$dir/ssh/host_key" "$dir/ssh/id"
  ssh-keygen -q -t ed25519 -N '' -f "$dir/ssh/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$dir/ssh/id"
  cp "$dir/ssh/id.pub" "$dir/ssh/authorized_keys"
  {
    for i in $(seq 1 "$nodes"); do printf 'Host n%d\n  HostName %s.%d\n' "$i" "$SUBNET" "$i"; done
    printf 'Host *\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n' "$dir/ssh/id"
    printf '  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n'
  } >"$dir/ssh/config"
  for i in $(seq 1 "$nodes"); do
    in_ns "$(node_ns "$dir" "$i")" unshare --uts /bin/sh -c \
      "hostname n$i && exec /usr/sbin/sshd -f /dev/null -h '$dir/ssh/host_key' \
        -o ListenAddress=$SUBNET.$i -o PidFile='$dir/ssh/sshd-$i.pid' \
        -o AuthorizedKeysFile='$dir/ssh/authorized_keys' -o StrictModes=no \
        -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no \
        -o KbdInteractiveAuthentication=no -o UsePAM=no -E '$dir/log/sshd-$i.log'"
  done
  for i in $(seq 1 "$nodes"); do
    wait_for 10 test -s "$dir/ssh/sshd-$i.pid" || die "sshd on n$i did not start: $(tail -n 3 "$dir/log/sshd-$i.log")"
  done
}

kill_pidfile() {  # kill_pidfile FILE: SIGTERM the daemon named there, SIGKILL after 3 s
  local f=$1 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  local dir=$1 ns pid
  [ -d "$dir" ] || return 0
  for f in "$dir"/slurmd-*.pid "$dir"/ssh/sshd-*.pid; do [ -e "$f" ] && kill_pidfile "$f"; done
  kill_pidfile "$dir/slurmctld.pid"
  kill_pidfile "$dir/munge/munged.pid"
  sleep 0.1
  # Step daemons (and ranks) that outlived their slurmd: everything still in our namespaces.
  for ns in $(ns_list "$dir"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  done
  for pid in $(pgrep -x slurmstepd 2>/dev/null); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$dir/slurm.conf"; then
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  for ns in $(ns_list "$dir"); do ip netns del "$ns" 2>/dev/null || true; done
  [ -s "$dir/cpu_group" ] && cpu_group_remove "$(cat "$dir/cpu_group")"
  rm -rf "$dir"
}

cmd=${1:-}
[ $# -ge 2 ] || usage
DIR=$2
case "$cmd" in
  start)
    shift 2
    pos=() rate=10gbit us=20
    while [ $# -gt 0 ]; do
      case "$1" in
        --rate) [ $# -ge 2 ] || usage; rate=$2; shift 2 ;;
        --delay) [ $# -ge 2 ] || usage; us=$2; shift 2 ;;
        -*) usage ;;
        *) pos+=("$1"); shift ;;
      esac
    done
    start "$DIR" "${pos[0]:-2}" "${pos[1]:-4}" "$rate" "$us"
    ;;
  shape) [ $# -ge 3 ] || usage; shape_all "$(cd "$DIR" && pwd)" "$3" "${4:-20}" ;;
  exec)
    [ $# -ge 3 ] || usage
    shift 2
    # shellcheck disable=SC1091
    source "$DIR/env.sh"
    exec nsenter --net="/run/netns/$(hub_ns "$DIR")" "$@"
    ;;
  node)
    [ $# -ge 4 ] || usage
    ns=$(node_ns "$DIR" "$3")
    [ -n "$ns" ] || die "no node $3 in '$DIR'"
    shift 3
    exec nsenter --net="/run/netns/$ns" "$@"
    ;;
  sshd) [ $# -eq 2 ] || usage; start_sshd "$(cd "$DIR" && pwd)" ;;
  stop) [ $# -eq 2 ] || usage; stop "$DIR" ;;
  *) usage ;;
esac
