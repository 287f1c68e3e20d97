#!/usr/bin/env bash
# A private Slurm test cluster on this machine: munged + slurmctld + N slurmd (default 2),
# all on 127.0.0.1, each slurmd a simulated node (n1, n2, ...; Debian's slurmd is built with
# MULTIPLE_SLURMD), with its own config, sockets, state and logs under DIR. Nothing outside
# DIR is touched; nothing listens beyond loopback. Needs root (munged's key, slurmd).
#
# Interface (later tests - the SPANK plugin, `dltune launch` under Slurm - reuse it):
#   cluster.sh start DIR [NODES [CPUS]]  create DIR, write the config, start the daemons,
#                                        wait until every node is idle (about 1 s).
#                                        NODES nodes (1-8) advertising CPUS CPUs each
#                                        (default 4, so `srun -n 8` fits on two nodes).
#   cluster.sh stop DIR                  stop the daemons (by their pid files), remove DIR.
#   DIR/env.sh                           `source` it to use the cluster: exports SLURM_CONF
#                                        (srun, salloc, sbatch, scontrol then talk to it).
#   DIR/slurm.conf, DIR/plugstack.conf   the config (PlugStackConfig points at the latter,
#                                        empty at start: append SPANK plugin lines to it).
#   DIR/log/                             daemon logs, for debugging a failed test.
# Nodes are named n1..nN, partition "test" (default), MpiDefault=none (pass --mpi=pmix).
# Exit status: 0 done; 77 the Slurm or munge packages are missing (tests skip); 1 failure
# (start cleans up after itself; the reason and the log tails are printed on stderr).
set -euo pipefail

die() { echo "cluster.sh: $*" >&2; exit 1; }

need_packages() {
  local missing=()
  for p in munged mungekey slurmctld slurmd srun scontrol sinfo; do
    command -v "$p" >/dev/null 2>&1 || [ -x "/usr/sbin/$p" ] || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "cluster.sh: missing ${missing[*]} (install slurmctld slurmd slurm-client munge)" >&2
    exit 77
  fi
  [ "$(id -u)" -eq 0 ] || { echo "cluster.sh: must run as root (munged key, slurmd)" >&2; exit 77; }
}

# A TCP port no socket uses (listening, connected or in TIME_WAIT: any of them makes a daemon's
# bind fail with "Address already in use"), below the kernel's ephemeral range so that no
# outgoing connection takes it meanwhile, from a random start, and not one this script already
# handed out (the daemons bind their ports only later). Sets FREE_PORT (a command substitution
# would lose the record of ports taken).
taken_ports=" "
free_port() {
  local lo span p
  lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null) || lo=32768
  span=$(( lo - 10000 ))
  [ "$span" -ge 1000 ] || span=1000
  p=$(( 10000 + RANDOM % span ))
  while [[ "$taken_ports" == *" $p "* ]] || ss -tanH "( sport = :$p )" 2>/dev/null | grep -q .; do
    p=$(( p + 1 ))
  done
  taken_ports+="$p "
  FREE_PORT=$p
}

write_config() {
  local dir=$1 nodes=$2 cpus=$3 host
  host=$(hostname -s)
  free_port
  local ctld_port=$FREE_PORT
  mkdir -p "$dir"/{state,spool,log,tmp,munge}
  chmod 0755 "$dir/munge"
  : > "$dir/plugstack.conf"
  cat > "$dir/cgroup.conf" <<CONF
CgroupPlugin=cgroup/v1
CONF
  {
    echo "ClusterName=dltunetest"
    echo "SlurmctldHost=$host(127.0.0.1)"
    echo "SlurmctldPort=$ctld_port"
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
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "SlurmdParameters=config_overrides"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "SlurmctldTimeout=30"
    echo "SlurmdTimeout=30"
    echo "MessageTimeout=10"
    echo "KillWait=2"
    echo "InactiveLimit=0"
    local names=()
    for i in $(seq 1 "$nodes"); do
      mkdir -p "$dir/spool/n$i" "$dir/tmp/n$i"
      free_port
      echo "NodeName=n$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$FREE_PORT CPUs=$cpus RealMemory=1000 State=UNKNOWN"
      names+=("n$i")
    done
    echo "PartitionName=test Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
  } > "$dir/slurm.conf"
  echo "export SLURM_CONF=$dir/slurm.conf" > "$dir/env.sh"
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
  states=$(sinfo -h -o '%T' 2>/dev/null) || return 1
  [ -n "$states" ] && ! grep -qv '^idle$' <<<"$states"
}

start() {
  local dir=$1 nodes=${2:-2} cpus=${3:-4}
  [[ "$nodes" =~ ^[1-8]$ ]] || die "NODES must be 1 to 8, got '$nodes'"
  [[ "$cpus" =~ ^[0-9]+$ ]] || die "CPUS must be a number, got '$cpus'"
  need_packages
  [ ! -e "$dir/slurm.conf" ] || die "'$dir' already holds a cluster; stop it first"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  write_config "$dir" "$nodes" "$cpus"
  export SLURM_CONF=$dir/slurm.conf
  trap 'echo "cluster.sh: start failed; logs:" >&2; tail -n 5 "$dir"/log/* >&2 || true; stop "$dir"' ERR
  mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null 2>&1
  chmod 0400 "$dir/munge/munge.key"
  munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" --force
  /usr/sbin/slurmctld -f "$SLURM_CONF"
  wait_for 20 scontrol ping
  scontrol ping | grep -q UP
  for i in $(seq 1 "$nodes"); do /usr/sbin/slurmd -f "$SLURM_CONF" -N "n$i"; done
  wait_for 30 all_idle
  trap - ERR
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
  local dir=$1
  [ -d "$dir" ] || return 0
  for f in "$dir"/slurmd-*.pid; do [ -e "$f" ] && kill_pidfile "$f"; done
  kill_pidfile "$dir/slurmctld.pid"
  kill_pidfile "$dir/munge/munged.pid"
  # Step daemons of jobs still running usually end with their slurmd, but one can outlive it
  # (seen: the stepd of a step whose rank was SIGKILLed in a PMIx fence, left running for an
  # hour): end every slurmstepd of this cluster, found by the SLURM_CONF in its environment.
  sleep 0.1
  local pid
  for pid in $(pgrep -x slurmstepd 2>/dev/null); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$dir/slurm.conf"; then
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$dir"
}

case "${1:-}" in
  start) [ $# -ge 2 ] || die "usage: cluster.sh start DIR [NODES [CPUS]]"; start "$2" "${3:-2}" "${4:-4}" ;;
  stop) [ $# -eq 2 ] || die "usage: cluster.sh stop DIR"; stop "$2" ;;
  *) echo "usage: cluster.sh start DIR [NODES [CPUS]] | stop DIR" >&2; exit 2 ;;
esac
