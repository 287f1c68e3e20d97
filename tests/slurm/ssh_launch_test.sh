#!/usr/bin/env bash
# `dltune run -H` / `--hostfile` over ssh (issue 39), on two simulated nodes
# (netns_cluster.sh: network and UTS namespaces on a bridge) each running sshd, the launcher in
# the hub namespace as on a login node. Checks that
#  - ranks fill each host's slots in turn, with the job's RANK / LOCAL_RANK / GROUP_RANK and
#    MASTER_ADDR on rank 0's node (its address on the bridge), run on the named node; standard
#    input reaches rank 0, --plan every rank (its warning said once);
#  - dltune's PMIx ranks fence across the nodes (every rank reads every peer's endpoint), and an
#    Open MPI program (mpi4py) allreduces across them, from a hostfile;
#  - a PyTorch DDP script (gloo) trains across them, as under torchrun on each node;
#  - `dltune launch -H` trains a model recipe on both nodes (finding them one machine by boot
#    id) and remembers the hosts, and plans with the first host's own topology (asked over
#    ssh); `dltune tune -H` tunes a program recipe (the mpi4py example)
#    there and `dltune launch -H` runs it with that plan;
#    the program recipe also tunes and runs under Slurm on the same nodes (salloc, srun);
#  - a failed rank on n2 ends the job with its exit code and names it and its node, and the
#    ranks on n1 are stopped; so does a signal to the launcher (130);
#  - a host ssh cannot reach ends the job with ssh's code, naming the host; more ranks than
#    slots is refused before anything starts (exit 2);
#  - a node whose link goes down while its ranks run ends the job with 255 naming it, within
#    ssh's keep-alive time;
#  - nothing is left running on the nodes.
# Exit 77 (skip) without root, Slurm, munge, iproute2 or openssh-server.
# Usage: ssh_launch_test.sh DLTUNE_BINARY PMIX_PROBE SOURCE_DIR
set -u
dltune=$1
probe=$2
src=$3
tmp=$(mktemp -d)
cluster=$tmp/cluster
script=$src/tests/slurm/netns_cluster.sh
fail() { echo "FAIL: $*"; exit 1; }
cleanup() { bash "$script" stop "$cluster" >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
bash "$script" start "$cluster" 2 2 >"$tmp/start.log" 2>&1
rc=$?
[ $rc -eq 77 ] && { cat "$tmp/start.log"; exit 77; }
[ $rc -eq 0 ] || fail "netns_cluster.sh start exited $rc: $(cat "$tmp/start.log")"
bash "$script" sshd "$cluster"
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || fail "netns_cluster.sh sshd exited $rc"
export DLTUNE_SSH="ssh -F $cluster/ssh/config"
run() { timeout 120 bash "$script" exec "$cluster" "$dltune" run "$@"; }
# Every process in a node's network namespace but its sshd and slurmd.
on_node() {
  local ns pid
  ns=$(sed -n "$(( $1 + 1 ))p" "$cluster/namespaces")
  for pid in $(ip netns pids "$ns"); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -v '^sshd\|/usr/sbin/sshd\|slurmd' && echo " (pid $pid)"
  done
}

# 1. Placement and the rank variables; the job's token never in ssh's command line (every
# user of a machine may read a command line): it goes as the first line of ssh's input.
printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>%s\nexec ssh "$@"\n' "$tmp/ssh-argv" >"$tmp/ssh-log"
chmod +x "$tmp/ssh-log"
out=$(DLTUNE_SSH="$tmp/ssh-log -F $cluster/ssh/config" run -H n1:2,n2:2 --tag-output -- sh -c \
  'echo "$RANK $LOCAL_RANK $GROUP_RANK $WORLD_SIZE $(hostname) $MASTER_ADDR"' 2>&1) ||
  fail "4 ranks on n1:2,n2:2 exited $?: $out"
grep -q -- "--node-of" "$tmp/ssh-argv" || fail "the ssh wrapper saw no daemon: $(cat "$tmp/ssh-argv")"
! grep -q "DLTUNE_NODE_TOKEN=" "$tmp/ssh-argv" || fail "the token in ssh's arguments: $(cat "$tmp/ssh-argv")"
for want in "[0] 0 0 0 4 n1 10.213.0.1" "[1] 1 1 0 4 n1 10.213.0.1" "[2] 2 0 1 4 n2 10.213.0.1" \
  "[3] 3 1 1 4 n2 10.213.0.1"; do
  grep -qxF "$want" <<<"$out" || fail "no line '$want' in: $out"
done

# Standard input reaches rank 0 (on n1) only; --plan reaches every node's ranks, and its
# warning (a plan for another shape) is said once, not once per node.
DLTUNE_DB=$tmp/db.sqlite "$dltune" launch "$src/recipes/quickstart.yaml" --dry-run --json 2>/dev/null |
  tail -n 1 | /usr/bin/python3 -c 'import json, sys; json.dump(json.load(sys.stdin)["plan"], sys.stdout)' \
    >"$tmp/plan.json" || fail "no plan from the quickstart's dry run"
out=$(echo "to-rank-0" | run -H n1:1,n2:1 --plan "$tmp/plan.json" --tag-output -- sh -c \
  'read -r x; echo "got [$x] $(test -s "$DLTUNE_PLAN" && echo plan)"' 2>&1) ||
  fail "stdin and --plan over ssh exited $?: $out"
grep -qxF "[0] got [to-rank-0] plan" <<<"$out" || fail "rank 0's input or plan: $out"
grep -qxF "[1] got [] plan" <<<"$out" || fail "rank 1's input or plan: $out"
[ "$(grep -c "its placement is not used" <<<"$out")" -eq 1 ] || fail "the plan's warning: $out"

# 2. PMIx across the nodes: dltune's bootstrap, then Open MPI from a hostfile.
out=$(run -H n1:2,n2:2 -- "$probe" 2>&1) || fail "pmix_probe over ssh exited $?: $out"
[ "$(grep -c 'peers=ok' <<<"$out")" -eq 4 ] || fail "not every rank read its peers: $out"
grep -q "rank=3 size=4 local_rank=1 local_size=2 node=1/2 host=n2" <<<"$out" ||
  fail "rank 3's PMIx identity: $out"
printf 'n1 slots=2  # first\n\nn2 slots=2 max_slots=4\n' >"$tmp/hosts"
if /usr/bin/python3 -c 'import mpi4py, numpy' 2>/dev/null; then
  out=$(run --hostfile "$tmp/hosts" -x OMPI_MCA_btl_tcp_if_include=eth0 -- /usr/bin/python3 -c '
from mpi4py import MPI
import numpy as np
c = MPI.COMM_WORLD
a = np.full(1 << 20, c.rank + 1.0)
b = np.empty_like(a)
c.Allreduce(a, b)
print("mpi", c.rank, c.size, MPI.Get_processor_name(), b[0], b[-1])' 2>&1) ||
    fail "mpi4py over ssh exited $?: $out"
  for r in 0 1; do grep -qxF "mpi $r 4 n1 10.0 10.0" <<<"$out" || fail "mpi rank $r: $out"; done
  for r in 2 3; do grep -qxF "mpi $r 4 n2 10.0 10.0" <<<"$out" || fail "mpi rank $r: $out"; done
else
  echo "note: mpi4py or numpy missing: the Open MPI part is skipped"
fi

# 3. PyTorch DDP (gloo) across the nodes. The nodes' names resolve nowhere, so gloo is told its
# interface, as on a cluster without name service for its compute nodes.
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  out=$(cd "$src/examples/pytorch-ddp" && run -H n1:1,n2:1 -x GLOO_SOCKET_IFNAME=eth0 \
    --tag-output -- /usr/bin/python3 train.py --steps 3 --batch-size 8 2>&1) ||
    fail "the DDP example over ssh exited $?: $out"
  grep -q '^\[0\] samples/s: [0-9.]*$' <<<"$out" || fail "no throughput from rank 0: $out"
else
  echo "note: PyTorch missing: the DDP part is skipped"
fi

# dltune launch over the hosts: the engine's ranks, one per host, trained and reported as a job
# of 2 nodes; the run directory remembers the hosts (a --resume runs there again).
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1
out=$(timeout 300 bash "$script" exec "$cluster" "$dltune" launch "$src/recipes/quickstart.yaml" \
  -H n1,n2 --set training.steps=20 --set tune.budget=8 2>&1) || fail "launch -H n1,n2 exited $?: $out"
grep -q "summary: quickstart on 2 rank(s), 2 node(s)" <<<"$out" || fail "launch's summary: $out"
grep -q "machines         the job's 2 nodes are 1 machine (same boot_id)" <<<"$out" ||
  fail "the prediction does not know the hosts are one machine: $out"
grep -q '"n1",' "$tmp"/runs/quickstart-*/launch.json || fail "launch.json has no hosts"
# The job is planned with the first host's own topology, asked over ssh, not the launching
# machine's (a login node's): n1 answers with what its dltune sees, here a 36-core export that
# -x gives it as it would give the ranks. The shape follows (one rank per host, 36 threads).
quartz=$src/../shared/fixtures/topologies/mpibind_cts1-quartz-smt1.xml
out=$(timeout 120 bash "$script" exec "$cluster" "$dltune" launch "$src/recipes/quickstart.yaml" \
  -H n1,n2 -x "DLTUNE_TOPO_XML=$quartz" --dry-run --json 2>"$tmp/err") ||
  fail "launch -H --dry-run exited $?: $(cat "$tmp/err")"
python3 - <(printf '%s' "$out") <<'PY' || fail "the hosts' topology: $out $(cat "$tmp/err")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ranks"] == 2 and j["threads_per_rank"] == 36, {k: j.get(k) for k in ("ranks", "threads_per_rank")}
notes = " ".join(j.get("notes", []))
assert "planned with n1's own topology (asked over ssh: 36 cores)" in notes, notes
PY
run_dir=$(ls -d "$tmp"/runs/quickstart-* | head -n 1)
out=$("$dltune" launch --resume "$run_dir" --dry-run 2>&1) || fail "--resume --dry-run exited $?: $out"
grep -q "^ranks:   dltune run -n 2 -H n1:1,n2:1 " <<<"$out" ||
  fail "a --resume does not run on the run's hosts again: $out"
sed -i 's/"n1",/1,/' "$run_dir/launch.json"
out=$("$dltune" launch --resume "$run_dir" --dry-run 2>&1)
rc=$?
[ $rc -eq 2 ] && grep -q "'hosts' must be a list of host names" <<<"$out" ||
  fail "a launch.json with a bad host: $rc $out"
# A program recipe over the hosts: the mpi4py example's program tuned with trials on both
# nodes (one rank each), stored, and found again by the next launch.
if /usr/bin/python3 -c 'import mpi4py, numpy' 2>/dev/null; then
  cat >"$tmp/program.yaml" <<RECIPE
name: mpi4py-hosts
program:
  command: [/usr/bin/python3, $src/examples/mpi4py/train.py, --batch-size, "{batch}",
            --steps, "{steps}", --bucket-mb, "{bucket_mb}"]
  env: {OMPI_MCA_btl_tcp_if_include: eth0}
  throughput: {metrics: samples_per_s}
  steps: 30
  trial_steps: 10
tune:
  budget: 20
  search:
    batch: [64, 128]
    bucket_mb: [1, 4]
RECIPE
  out=$(timeout 300 bash "$script" exec "$cluster" "$dltune" tune "$tmp/program.yaml" -H n1,n2 \
    -x DLTUNE_TEST_MARK=1 2>&1) ||
    fail "tuning a program recipe over hosts exited $?: $out"
  grep -q "^halving over 4 candidates" <<<"$out" && grep -q "^plan for mpi4py-hosts (tuned" <<<"$out" ||
    fail "the program's tuning: $out"
  out=$(timeout 300 bash "$script" exec "$cluster" "$dltune" launch "$tmp/program.yaml" -H n1,n2 2>&1) ||
    fail "the program's launch over hosts exited $?: $out"
  grep -q "^plan: .* 2 ranks x .*(cache)" <<<"$out" || fail "the launch did not find the plan: $out"
  # The same program recipe under Slurm on the cluster's two nodes: launched outside an
  # allocation, it runs itself again under salloc, and (--retune) tunes with srun's ranks.
  out=$(timeout 300 bash "$script" exec "$cluster" "$dltune" launch "$tmp/program.yaml" \
    --backend slurm --nodes 2 --retune 2>&1) || fail "a program recipe under Slurm exited $?: $out"
  grep -q "won halving over 4 candidates" <<<"$out" || fail "the program's tuning under Slurm: $out"
  grep -q "^plan: .* 2 ranks x .*(tuned)" <<<"$out" || fail "the plan under Slurm: $out"
fi

# 4. Failures: a rank on n2 exits 3 while the others wait in a fence.
out=$(run -H n1:2,n2:2 -- "$probe" --fault exit3 --fault-rank 3 2>&1)
rc=$?
[ $rc -eq 3 ] || fail "a rank's exit 3 ended the job with $rc: $out"
grep -q "rank 3 on n2 exited with code 3" <<<"$out" || fail "the failure is not named: $out"
# A signal to the launcher stops the ranks on every node.
bash "$script" exec "$cluster" "$dltune" run -H n1:1,n2:1 -- sleep 60 >"$tmp/sig.out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  bash "$script" node "$cluster" 2 pgrep -x sleep >/dev/null && break
  sleep 0.1
done
kill -INT "$(pgrep -P "$pid" -f "run -H n1:1,n2:1" || echo "$pid")" 2>/dev/null
wait "$pid"
rc=$?
[ $rc -eq 130 ] || fail "SIGINT ended the job with $rc: $(cat "$tmp/sig.out")"
# A host ssh cannot reach.
out=$(run -H n1:1,n9:1 -- sleep 60 2>&1)
rc=$?
[ $rc -eq 255 ] || fail "an unreachable host ended the job with $rc: $out"
grep -q "the node daemon on n9 exited with code 255" <<<"$out" || fail "n9 is not named: $out"
out=$(run -n 5 -H n1:2,n2:2 -- true 2>&1)
rc=$?
[ $rc -eq 2 ] || fail "5 ranks on 4 slots exited $rc: $out"
grep -q "5 ranks but the hosts have 4 slots" <<<"$out" || fail "the refusal: $out"

# 5. A lost node: n2's link goes down while the ranks run. ssh's keep-alives notice (here 1 s
# apart, 2 missed; dltune's own are 5 s x 3), the job ends with ssh's 255 naming n2, n1's rank
# is stopped, and n2's daemon stops its own once the link is back (the launcher is gone). The
# shared connections the runs above left (ControlPersist) keep dltune's keep-alives: a
# Control option of the user's own turns them off, so this job's ssh uses its own.
ns2=$(sed -n 3p "$cluster/namespaces")
DLTUNE_SSH="ssh -F $cluster/ssh/config -o ControlMaster=no -o ServerAliveInterval=1 -o ServerAliveCountMax=2" \
  bash "$script" exec "$cluster" "$dltune" run -H n1:1,n2:1 -- sleep 60 >"$tmp/lost.out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do on_node 2 | grep -q "^sleep 60" && break; sleep 0.1; done
start=$(date +%s)
ip -n "$ns2" link set eth0 down
wait "$pid"
rc=$?
took=$(( $(date +%s) - start ))
ip -n "$ns2" link set eth0 up
[ $rc -eq 255 ] || fail "a lost node ended the job with $rc: $(cat "$tmp/lost.out")"
grep -q "the node daemon on n2 exited with code 255" "$tmp/lost.out" ||
  fail "the lost node is not named: $(cat "$tmp/lost.out")"
[ "$took" -le 20 ] || fail "the lost node took $took s to notice"

# 6. Nothing left behind on the nodes (the daemons stop their ranks within the grace period;
# n2's after its link came back).
for i in 1 2; do
  for _ in $(seq 1 300); do [ -z "$(on_node "$i")" ] && break; sleep 0.1; done
  left=$(on_node "$i")
  [ -z "$left" ] || fail "left running on n$i: $left"
done
echo "PASS"
