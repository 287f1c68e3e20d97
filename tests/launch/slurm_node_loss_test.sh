#!/usr/bin/env bash
# A job that loses a node under Slurm continues on the nodes left (issue 40): on the test
# cluster (tests/slurm/cluster.sh: munged, slurmctld and three slurmd on loopback), `dltune
# launch --backend slurm --nodes 3` outside an allocation obtains one (salloc --no-kill, as
# launch.restarts asks), trains one rank per node, and then node n3 is lost: its slurmd is
# killed and then its rank. The launch asks n3 to run a step, gets no answer, and continues from
# the last checkpoint on n1 and n2 (srun --exclude=n3), planned again with the global batch
# kept; the summary names the lost node (node_loss_completes=1). Before that, in the same
# launch, a rank killed on a node whose slurmd is fine: the same three nodes again. Then
# launch.min_nodes 0: the lost node stops the job, the checkpoint kept, with the --resume command.
# Exit 77 (skip) without Slurm / munge or root.
# Usage: slurm_node_loss_test.sh DLTUNE_BINARY SOURCE_DIR
set -u
dltune=$1
src=$2
tmp=$(mktemp -d)
cluster=$tmp/cluster
fail() { echo "FAIL: $*"; [ -d "$cluster/log" ] && tail -n 8 "$cluster"/log/*.log; exit 1; }
cleanup() { bash "$src/tests/slurm/cluster.sh" stop "$cluster" >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT

start_cluster() {
  bash "$src/tests/slurm/cluster.sh" start "$cluster" 3 2
  rc=$?
  [ $rc -eq 77 ] && exit 77
  [ $rc -eq 0 ] || fail "cluster.sh start exited $rc"
  # shellcheck disable=SC1091
  source "$cluster/env.sh"
}
start_cluster
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1 DLTUNE_SITE_DB=
# A hung collective after the loss ends within 20 s (the ranks' communication timeout).
export DLTUNE_COMM_TIMEOUT_MS=20000
recipe=$src/tests/launch/data/tiny.yaml
common=(--backend slurm --nodes 3 -n 3 --no-tune --set launch.ranks=3 --set launch.ranks_per_node=1
  --set training.steps=200 --set training.checkpoint_every=10 --set launch.restarts=2
  --set launch.baseline=off)

# rank_on NODE: the pid of the newest run's `dltune-worker train` running on NODE.
rank_on() {
  local r p
  r=$(newest)
  [ -n "$r" ] || return 0
  for p in $(pgrep -f "dltune-worker train --run-dir $r"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURMD_NODENAME=$1"; then
      echo "$p"
      return
    fi
  done
}
newest() { ls -dt "$DLTUNE_RUNS_DIR"/*/ 2>/dev/null | head -1 | sed 's|/$||'; }
# when_trained PREVIOUS STEPS: waits up to 120 s for a run directory newer than PREVIOUS (the
# newest before the launch) to log STEPS steps with a checkpoint.
when_trained() {
  local r
  for _ in $(seq 1 1200); do
    r=$(newest)
    if [ -n "$r" ] && [ "$r" != "$1" ] && [ -s "$r/checkpoints/checkpoint.bin" ] &&
       [ "$(grep -c '"event":"step"' "$r/metrics.jsonl" 2>/dev/null)" -ge "$2" ]; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# 1. One launch, two failures: a rank killed on n2, whose slurmd is fine (the same three nodes
# again), then node n3 lost: its slurmd killed, then its rank (the job goes on on n1 and n2).
previous=$(newest)
timeout 400 "$dltune" launch "$recipe" "${common[@]}" --set launch.min_nodes=2 \
  >"$tmp/out1" 2>&1 &
pid=$!
when_trained "$previous" 30 || { kill $pid; fail "the 3-node run never trained 30 steps: $(cat "$tmp/out1")"; }
victim=$(rank_on n2)
old_n3=$(rank_on n3)
[ -n "$victim" ] && [ -n "$old_n3" ] || { kill $pid; fail "no rank on n2 or n3: $(cat "$tmp/out1")"; }
kill -9 "$victim"
# The second attempt: a new rank on n3 that has trained (30 more steps logged).
run=$(newest)
for _ in $(seq 1 1200); do
  victim=$(rank_on n3)
  [ -n "$victim" ] && [ "$victim" != "$old_n3" ] &&
    [ "$(grep -c '"event":"step"' "$run/metrics.jsonl")" -ge 60 ] && break
  victim=
  sleep 0.1
done
[ -n "$victim" ] || { kill $pid; fail "the restarted attempt never trained on n3: $(cat "$tmp/out1")"; }
kill -9 "$(cat "$cluster/slurmd-n3.pid")"
kill -9 "$victim"
wait $pid || fail "the launch that lost n3 exited $?: $(cat "$tmp/out1")"
python3 - "$run/summary.json" "$run/launch.json" <<'PY' || fail "summary after the lost node: $(cat "$tmp/out1")"
import json, sys
s, l = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert s["backend"] == "slurm" and s["steps"] == 200, s
r = s["restarts"]
assert len(r) == 2, r
# n2 answered: the same nodes.
assert not r[0]["fewer"] and "lost_node" not in r[0] and r[0]["ranks"] == 3 and "n2" in r[0]["why"], r
# n3 did not: on the two nodes left, planned again, the global batch kept.
assert r[1]["lost_node"] == "n3" and r[1]["nodes"] == 2 and r[1]["ranks"] == 2, r
assert r[1]["fewer"] and r[1]["from_step"] >= r[0]["from_step"] + 10 and "n3" in r[1]["why"], r
assert r[1]["lost_s"] is not None and r[1]["lost_s"] > 0, r
assert s["nodes"] == 2 and s["ranks"] == 2, (s["nodes"], s["ranks"])
assert s["reshaped"]["from"] == {"nodes": 3, "ranks": 3}, s["reshaped"]
assert s["reshaped"]["to"] == {"nodes": 2, "ranks": 2}, s["reshaped"]
assert s["reshaped"]["global_batch"] == 96, s["reshaped"]
assert l["nodes"] == 2, l
print("node_loss_completes=1")
PY
grep -q "node n2 still answers: the same nodes again" "$tmp/out1" ||
  fail "the launch did not say n2 still answers: $(cat "$tmp/out1")"
grep -q "node n3 does not answer: continuing without it" "$tmp/out1" ||
  fail "the launch did not say it left n3 out: $(cat "$tmp/out1")"
grep -q "without node n3 (it no longer answered), on 2 ranks on 2 nodes" "$tmp/out1" ||
  fail "the summary's restart row: $(cat "$tmp/out1")"

bash "$src/tests/slurm/cluster.sh" stop "$cluster" >/dev/null 2>&1
start_cluster
# 2. launch.min_nodes 0 (the default): a lost node stops the job, its checkpoint kept.
previous=$(newest)
timeout 400 "$dltune" launch "$recipe" "${common[@]}" >"$tmp/out3" 2>&1 &
pid=$!
when_trained "$previous" 30 || { kill $pid; fail "the third run never trained 30 steps: $(cat "$tmp/out3")"; }
victim=$(rank_on n3)
[ -n "$victim" ] || { kill $pid; fail "no rank runs on n3: $(cat "$tmp/out3")"; }
kill -9 "$(cat "$cluster/slurmd-n3.pid")"
kill -9 "$victim"
wait $pid
rc=$?
[ $rc -ne 0 ] || fail "the launch continued without n3 although launch.min_nodes is 0"
grep -q "cannot continue: node n3 does not answer.*launch.min_nodes 0 does not allow continuing on 2 nodes" \
  "$tmp/out3" || fail "the refusal: $(cat "$tmp/out3")"
grep -q "continue with: dltune launch --resume" "$tmp/out3" || fail "no --resume hint: $(cat "$tmp/out3")"

cat "$tmp/out1"
echo "slurm node loss: all checks passed"
