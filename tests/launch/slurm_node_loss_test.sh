#!/usr/bin/env bash
# A job that loses a rank or a node under Slurm continues on a spare node, on a node its
# allocation grows by, or on the nodes left (issue 40), on five simulated nodes that talk over a
# network (tests/slurm/netns_cluster.sh: each node a network namespace with its own slurmd).
# `dltune launch --backend slurm --nodes 2-3` with launch.spare_nodes 1, run outside an
# allocation, obtains 3 to 4 nodes (salloc --nodes=3-4 --no-kill; Slurm gives the four) and
# trains one rank on each of the first three. First rank 0 (n1) is killed while it writes a
# checkpoint: the launch asks the job's nodes to run a step, all answer, and it restarts on the
# same three from the checkpoint before. Then node n3 is
# lost whole: every process in its namespace killed (slurmd, the step daemon, the rank), so srun
# hears of it only through its peers' failures. The launch finds that n3 does not answer and
# continues from the last checkpoint with the spare n4 in its place (srun --exclude=n3; the same
# shape and plan; spare_node_completes=1). Then n4 is lost whole: no spare is left, and the
# allocation grows by the idle n5 (Slurm's job expansion), which takes its place
# (grown_node_completes=1). Then n5 is lost: no node is free, and the job continues on n1 and
# n2, the range's least, planned again with the global batch kept; the summary names the lost
# nodes (node_loss_completes=1). Then, with launch.min_nodes 0 (the default), a lost node stops
# the job, the checkpoint kept, with the --resume command, and --resume leaves the lost node out.
# Exit 77 (skip) without Slurm / munge / iproute2 or root.
# Usage: slurm_node_loss_test.sh DLTUNE_BINARY SOURCE_DIR
set -u
dltune=$1
src=$2
tmp=$(mktemp -d)
cluster=$tmp/cluster
script=$src/tests/slurm/netns_cluster.sh
fail() { echo "FAIL: $*"; [ -d "$cluster/log" ] && tail -n 40 "$cluster"/log/slurm*.log; exit 1; }
cleanup() { bash "$script" stop "$cluster" >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT

bash "$script" start "$cluster" 5 2
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || fail "netns_cluster.sh start exited $rc"
in_hub() { bash "$script" exec "$cluster" "$@"; }
# lose_node I: kills every process of node I's namespace (its slurmd, step daemons and ranks).
lose_node() {
  local ns p
  ns=$(sed -n "$(( $1 + 1 ))p" "$cluster/namespaces")
  for p in $(ip netns pids "$ns"); do kill -9 "$p" 2>/dev/null; done
}
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1 DLTUNE_SITE_DB=
# A hung collective after the loss ends within 10 s (the ranks' communication timeout).
export DLTUNE_COMM_TIMEOUT_MS=10000
# A node is given 4 s to run a one-task step (asked again for 8 s) before it counts as lost: the
# namespace nodes answer in well under a second, and the default 10 s (then 20 s) per lost node
# was 90 of this test's 180 s.
export DLTUNE_NODE_ANSWER_MS=4000
recipe=$src/tests/launch/data/tiny.yaml
common=(--backend slurm --no-tune --set launch.ranks_per_node=1 --set training.steps=200
  --set training.checkpoint_every=10 --set launch.restarts=2 --set launch.baseline=off)

# shellcheck source=tests/launch/kill_rank.sh
. "$src/tests/launch/kill_rank.sh"
newest() { newest_run_in "$DLTUNE_RUNS_DIR"; }
# rank_on NODE: the pid of the newest run's `dltune-worker train` running on NODE.
rank_on() { worker_pid "$(newest)" "SLURMD_NODENAME=$1"; }
# last_step RUN: the last step RUN's metrics logged (0 before any).
last_step() {
  grep '"event":"step"' "$1/metrics.jsonl" 2>/dev/null | tail -n 1 | grep -o '"step":[0-9]*' |
    cut -d: -f2 | grep . || echo 0
}
# when_trained PREVIOUS STEPS: wait_trained in this test's runs directory.
when_trained() { wait_trained "$DLTUNE_RUNS_DIR" "$1" "$2" >/dev/null; }

# A bad DLTUNE_NODE_ANSWER_MS is refused before a rank starts (not when a node is lost).
DLTUNE_NODE_ANSWER_MS=soon timeout 120 bash "$script" exec "$cluster" salloc --quiet -w n1 -N 1 \
  -n 1 "$dltune" launch "$recipe" "${common[@]}" --nodes 1 -n 1 --set launch.ranks=1 \
  >"$tmp/out_env" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "DLTUNE_NODE_ANSWER_MS must be a number of milliseconds from 100 to 600000, not 'soon'" \
  "$tmp/out_env" && ! grep -q '"event":"step"' "$(newest)/metrics.jsonl" 2>/dev/null ||
  fail "a bad DLTUNE_NODE_ANSWER_MS: exit $rc: $(cat "$tmp/out_env")"

# 0. A hung rank, then a failure during the restart (issue 40 item 6 under Slurm): on n1 and n2,
# the rank on n2 is stopped (SIGSTOP) after 25 steps; rank 0 gives up on it after the
# communication timeout (5 s here), the job stops, both nodes answer, and it restarts on them;
# the restarted rank on n2 is SIGKILLed as soon as it starts, and the launch restarts again and
# finishes. (The restarted step's PMIx fence goes through slurmd's forwarding: it needs each
# simulated node's own spool/%n, netns_cluster.sh's mount namespaces.)
previous=$(newest)
DLTUNE_COMM_TIMEOUT_MS=5000 timeout 300 bash "$script" exec "$cluster" salloc --quiet --no-kill \
  -w n1,n2 -N 2 -n 2 "$dltune" launch "$recipe" "${common[@]}" --nodes 2 -n 2 \
  --set launch.ranks=2 >"$tmp/out0" 2>&1 &
pid=$!
hung=$(kill_rank_when_trained "$DLTUNE_RUNS_DIR" "$previous" 1 25 STOP) ||
  { kill $pid; fail "the 2-node run never trained 25 steps with rank 1 running: $(cat "$tmp/out0")"; }
kill_rank_when_started "$(newest)" 1 "$hung" >/dev/null ||
  { kill $pid; fail "the restarted attempt never started rank 1: $(cat "$tmp/out0")"; }
wait $pid || fail "the launch that lost a hung rank exited $?: $(cat "$tmp/out0")"
python3 - "$(newest)/summary.json" <<'PY' || fail "summary after the hung rank: $(cat "$tmp/out0")"
import json, sys
s = json.load(open(sys.argv[1]))
r = s["restarts"]
assert s["steps"] == 200 and s["nodes"] == 2 and s["ranks"] == 2, s
assert len(r) == 2 and not any(x["fewer"] for x in r), r
assert r[0]["from_step"] >= 20 and r[1]["from_step"] >= r[0]["from_step"], r
assert "signal 9" in r[1]["why"] and "rank 1" in r[1]["why"], r
# The hung rank is named by its peer's timeout, whatever srun saw of its end.
assert "rank 0 had timed out: " in r[0]["why"] and "rank 1 did not answer in time" in r[0]["why"], r
PY
grep -q "still answers, as does every other node of the job: the same nodes again" "$tmp/out0" ||
  fail "after the hang the launch did not ask the nodes: $(cat "$tmp/out0")"
echo "slurm: a hung rank and a failure during the restart: restarted twice, finished"

# 1. One launch, four failures, on nodes n1-n3 of an allocation of n1-n4 (--nodes 2-3 and the
# spare node launch.spare_nodes 1 asks salloc for): rank 0 on n1 killed while it writes a
# checkpoint, its node fine (the same nodes again, from the checkpoint before); node n3 lost whole (the spare n4 takes its place: the same shape, no
# replanning); node n4 lost whole (the allocation grows by n5, which takes its place); node n5
# lost whole (no node is free: the job goes on on n1 and n2, planned again).
# wait_for_new_rank NODE OLD_PID AFTER_STEP: waits for a rank on NODE other than OLD_PID, and for
# a step 25 past AFTER_STEP (the last one logged before the previous failure), which only the
# restarted attempt reaches (it went back to a checkpoint at or before that step) having written
# a checkpoint at least 10 steps past the one it started from. Prints the rank's pid.
wait_for_new_rank() {
  local p
  for _ in $(seq 1 1200); do
    p=$(rank_on "$1")
    if [ -n "$p" ] && [ "$p" != "$2" ] && [ "$(last_step "$run")" -ge $(($3 + 25)) ]; then
      echo "$p"
      return 0
    fi
    sleep 0.1
  done
  return 1
}
# ckpt_step FILE: the step of the checkpoint FILE holds (its header's), 0 when unreadable.
ckpt_step() { python3 -c "import json,sys; print(json.loads(open(sys.argv[1],'rb').read(4096).split(b'\n')[1])['step'])" "$1" 2>/dev/null || echo 0; }
previous=$(newest)
# The first failure comes while a checkpoint is being written (issue 40 item 6 under Slurm):
# step 40's write stalls 4 s before its rename, and rank 0 (on n1), the writer, is SIGKILLed once
# training passed step 40 while the file still holds step 30. The write is lost whole and the
# restart continues from step 30's checkpoint.
DLTUNE_FAULT_CHECKPOINT_STALL_MS=40:4000 timeout 400 bash "$script" exec "$cluster" "$dltune" \
  launch "$recipe" "${common[@]}" --nodes 2-3 --set launch.spare_nodes=1 \
  --set launch.restarts=4 >"$tmp/out1" 2>&1 &
pid=$!
when_trained "$previous" 30 || { kill $pid; fail "the 3-node run never trained 30 steps: $(cat "$tmp/out1")"; }
run=$(newest)
old_n3=$(rank_on n3)
[ -n "$(rank_on n1)" ] && [ -n "$old_n3" ] || { kill $pid; fail "no rank on n1 or n3: $(cat "$tmp/out1")"; }
[ -z "$(rank_on n4)" ] || { kill $pid; fail "a rank runs on the spare node n4: $(cat "$tmp/out1")"; }
victim=
for _ in $(seq 1 600); do
  if [ "$(last_step "$run")" -ge 41 ] && [ "$(ckpt_step "$run/checkpoints/checkpoint.bin")" = 30 ]; then
    victim=$(rank_on n1) && [ -n "$victim" ] && kill -9 "$victim" && break
  fi
  sleep 0.05
done
[ -n "$victim" ] || { kill $pid; fail "never caught step 40's checkpoint in flight: $(cat "$tmp/out1")"; }
killed_at=$(last_step "$run")
wait_for_new_rank n3 "$old_n3" "$killed_at" >/dev/null ||
  { kill $pid; fail "the restarted attempt never trained on n3: $(cat "$tmp/out1")"; }
killed_at=$(last_step "$run")
lose_node 3
wait_for_new_rank n4 "" "$killed_at" >/dev/null ||
  { kill $pid; fail "the spare node n4 never trained in n3's place: $(cat "$tmp/out1")"; }
killed_at=$(last_step "$run")
lose_node 4
wait_for_new_rank n5 "" "$killed_at" >/dev/null ||
  { kill $pid; fail "node n5 never trained in n4's place: $(cat "$tmp/out1")"; }
lose_node 5
wait $pid || fail "the launch that lost n3, n4 and n5 exited $?: $(cat "$tmp/out1")"
python3 - "$run/summary.json" "$run/launch.json" <<'PY' || fail "summary after the lost nodes: $(cat "$tmp/out1")"
import json, sys
s, l = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert s["backend"] == "slurm" and s["steps"] == 200, s
r = s["restarts"]
assert len(r) == 4, r
# Every node answered: the same nodes, from the checkpoint before the write rank 0 died in.
assert not r[0]["fewer"] and "lost_node" not in r[0] and r[0]["ranks"] == 3, r
assert r[0]["from_step"] == 30, r
# n3 did not: the spare n4 in its place, the same shape.
assert r[1]["lost_node"] == "n3" and r[1]["spare_node"] == "n4" and "grown" not in r[1], r
assert not r[1]["fewer"] and r[1]["nodes"] == 3 and r[1]["ranks"] == 3, r
# n4 did not either, and no spare is left: the allocation grew by n5, the same shape.
assert r[2]["lost_node"] == "n4" and r[2]["spare_node"] == "n5" and r[2]["grown"], r
assert not r[2]["fewer"] and r[2]["nodes"] == 3 and r[2]["ranks"] == 3, r
# n5 did not either, and no node is free: on the two nodes left (--nodes 2-3's least).
assert r[3]["lost_node"] == "n5" and "spare_node" not in r[3], r
assert r[3]["nodes"] == 2 and r[3]["ranks"] == 2 and r[3]["fewer"], r
for a, b in zip(r, r[1:]):
    assert b["from_step"] >= a["from_step"] + 10, r
assert all(x["lost_s"] is not None and x["lost_s"] > 0 for x in r), r
assert s["nodes"] == 2 and s["ranks"] == 2, (s["nodes"], s["ranks"])
assert s["reshaped"]["from"] == {"nodes": 3, "ranks": 3}, s["reshaped"]
assert s["reshaped"]["to"] == {"nodes": 2, "ranks": 2}, s["reshaped"]
assert s["reshaped"]["global_batch"] == 96, s["reshaped"]
assert l["nodes"] == 2, l
print("node_loss_completes=1")
print("spare_node_completes=1")
print("grown_node_completes=1")
PY
grep -q "still answers, as does every other node of the job: the same nodes again" "$tmp/out1" ||
  fail "the launch did not say every node still answers: $(cat "$tmp/out1")"
grep -q "node n3 does not answer: continuing on spare node n4 in its place, the same 3 ranks on 3 nodes" \
  "$tmp/out1" || fail "the launch did not say n4 took n3's place: $(cat "$tmp/out1")"
grep -q "the allocation grew by node n5" "$tmp/out1" &&
  grep -q "node n4 does not answer: continuing on node n5, added to the allocation, in its place" \
    "$tmp/out1" || fail "the launch did not say n5 took n4's place: $(cat "$tmp/out1")"
grep -q "the allocation could not grow by a node: .*salloc" "$tmp/out1" &&
  grep -q "node n5 does not answer: continuing without it" "$tmp/out1" ||
  fail "the launch did not say it left n5 out: $(cat "$tmp/out1")"
grep -q "without node n5 (it no longer answered), on 2 ranks on 2 nodes" "$tmp/out1" ||
  fail "the summary's restart row: $(cat "$tmp/out1")"

# 2. launch.min_nodes 0 (the default): a lost node stops the job, its checkpoint kept. On n1 and
# n2 (n3, n4 and n5 are gone; Slurm counts them up until its SlurmdTimeout), n2 lost whole. Then, in
# the same allocation (as a batch script would go on), --resume: the stopped run remembers n2 as
# lost (launch.json "exclude") and leaves it out, refusing 2 nodes where 1 is left before a rank
# starts; with --nodes 1 it continues on n1 alone, planned again, to the end.
cat >"$tmp/stop_and_resume.sh" <<'SH'
#!/usr/bin/env bash
# stop_and_resume.sh DLTUNE OUT_PREFIX LAUNCH_ARGS...: inside the allocation.
dltune=$1 out=$2
shift 2
"$dltune" launch "$@" >"$out.2" 2>&1
echo $? >"$out.2.rc"
run=$(ls -dt "$DLTUNE_RUNS_DIR"/*/ | head -1)
"$dltune" launch --resume "${run%/}" >"$out.3a" 2>&1
echo $? >"$out.3a.rc"
"$dltune" launch --resume "${run%/}" --nodes 1 -n 1 >"$out.3b" 2>&1
echo $? >"$out.3b.rc"
SH
previous=$(newest)
timeout 500 bash "$script" exec "$cluster" salloc --quiet --no-kill -w n1,n2 -N 2 -n 2 \
  bash "$tmp/stop_and_resume.sh" "$dltune" "$tmp/out" "$recipe" "${common[@]}" --nodes 2 -n 2 \
  --set launch.ranks=2 >"$tmp/out2.salloc" 2>&1 &
pid=$!
when_trained "$previous" 30 || { kill $pid; fail "the 2-node run never trained 30 steps: $(cat "$tmp/out.2")"; }
[ -n "$(rank_on n2)" ] || { kill $pid; fail "no rank runs on n2: $(cat "$tmp/out.2")"; }
stopped=$(newest)
lose_node 2
wait $pid || fail "the allocation's script exited $?: $(cat "$tmp/out2.salloc")"
[ "$(cat "$tmp/out.2.rc")" -ne 0 ] || fail "the launch continued without n2 although launch.min_nodes is 0"
grep -q "cannot continue: node n2 does not answer.*launch.min_nodes 0 does not allow continuing on 1 node" \
  "$tmp/out.2" || fail "the refusal: $(cat "$tmp/out.2")"
grep -q "continue with: dltune launch --resume" "$tmp/out.2" || fail "no --resume hint: $(cat "$tmp/out.2")"
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['exclude'] == ['n2']" \
  "$stopped/launch.json" || fail "launch.json does not name the lost n2: $(cat "$stopped/launch.json")"
[ "$(cat "$tmp/out.3a.rc")" -eq 2 ] && grep -q "leaving out node(s) n2, lost during the run" "$tmp/out.3a" &&
  grep -q "this allocation has 1 node(s) besides the lost ones" "$tmp/out.3a" ||
  fail "--resume with 2 nodes, n2 lost: exit $(cat "$tmp/out.3a.rc"): $(cat "$tmp/out.3a")"
[ "$(cat "$tmp/out.3b.rc")" -eq 0 ] || fail "--resume on n1 alone exited $(cat "$tmp/out.3b.rc"): $(cat "$tmp/out.3b")"
python3 - "$stopped/summary.json" <<'PY' || fail "the resumed run's summary: $(cat "$tmp/out.3b")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["steps"] == 200 and s["nodes"] == 1 and s["ranks"] == 1, s
assert s["reshaped"]["from"] == {"nodes": 2, "ranks": 2}, s["reshaped"]
PY

cat "$tmp/out1"
echo "slurm node loss: all checks passed"
