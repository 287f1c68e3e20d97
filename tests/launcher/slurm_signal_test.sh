#!/usr/bin/env bash
# The slurm backend under signals and aborts, on the test cluster (tests/slurm/cluster.sh):
# SIGINT to `dltune run` inside an allocation stops every task on both nodes and exits 130;
# an Open MPI rank calling MPI_Abort, and a rank killed while its peers wait in a PMIx fence,
# each fail the job instead of hanging, naming the rank, with mpirun's exit status (MPI_Abort's
# error code, 128 + the signal). Exit 77 (skip) without Slurm / munge or root.
# Usage: slurm_signal_test.sh DLTUNE_BINARY MPI_PROBE PMIX_PROBE
set -u
dltune=$1
probe=$2
pmix_probe=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
cluster=$tmp/cluster
fail() { echo "FAIL: $*"; exit 1; }
task="sleep 61.$$"  # the tasks' command line, distinct from the launchers' (which hold it after -c)
cleanup() { pkill -f "^$task" 2>/dev/null; bash "$src/tests/slurm/cluster.sh" stop "$cluster" >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
bash "$src/tests/slurm/cluster.sh" start "$cluster" 2 2
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || fail "cluster.sh start exited $rc"
# shellcheck disable=SC1091
source "$cluster/env.sh"

# 1. SIGINT: every task (2 nodes) stops, the launcher exits 130 within seconds.
salloc --quiet -N 2 -n 2 "$dltune" run --backend slurm -- /bin/sh -c "exec $task" \
  >"$tmp/out1" 2>&1 &
launcher=$!
for i in $(seq 1 100); do
  [ "$(pgrep -fc "^$task")" -ge 2 ] && break
  sleep 0.1
done
[ "$(pgrep -fc "^$task")" -ge 2 ] || fail "the two tasks did not start: $(cat "$tmp/out1")"
dl=$(pgrep -f "^$dltune run --backend slurm" | head -1)
[ -n "$dl" ] || fail "no dltune run process"
start=$(date +%s)
kill -INT "$dl"
wait $launcher
rc=$?
[ $rc -eq 130 ] || fail "dltune run under salloc exited $rc after SIGINT, not 130: $(cat "$tmp/out1")"
[ $(( $(date +%s) - start )) -le 15 ] || fail "SIGINT took more than 15 s to stop the job"
sleep 1
[ "$(pgrep -fc "^$task")" -eq 0 ] || fail "tasks are left after SIGINT"

# 2. MPI_Abort(7) in one rank: the job fails with exit 7 and names the rank; nothing hangs.
if [ -x "$probe" ]; then
  timeout 120 salloc --quiet -N 2 -n 2 "$dltune" run --backend slurm -- "$probe" 2 abort \
    >"$tmp/out2" 2>&1
  rc=$?
  [ $rc -ne 124 ] || fail "MPI_Abort under Slurm hung"
  [ $rc -ne 0 ] || fail "MPI_Abort under Slurm exited 0: $(cat "$tmp/out2")"
  [ $rc -eq 7 ] || fail "MPI_Abort under Slurm exited $rc, not 7: $(cat "$tmp/out2")"
  grep -q "dltune run: rank 1 \(on n2 \)\?called MPI_Abort (error code 7)" "$tmp/out2" ||
    fail "MPI_Abort: the aborting rank is not named: $(cat "$tmp/out2")"
fi
# 3. A rank killed (SIGKILL) while the others wait in a PMIx fence: the job fails, no hang.
timeout 120 salloc --quiet -N 2 -n 2 "$dltune" run --backend slurm -- "$pmix_probe" \
  --fault kill-in-fence --fault-rank 1 >"$tmp/out3" 2>&1
rc=$?
[ $rc -ne 124 ] || fail "a rank killed in a fence hung the Slurm job"
[ $rc -eq 137 ] || fail "kill-in-fence under Slurm exited $rc, not 137 (128 + SIGKILL): $(cat "$tmp/out3")"
grep -q "rank 1" "$tmp/out3" || fail "kill-in-fence: rank 1 not named: $(cat "$tmp/out3")"
cat "$tmp/out2" "$tmp/out3"
echo "slurm signals: all checks passed"
