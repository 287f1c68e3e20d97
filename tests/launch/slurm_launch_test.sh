#!/usr/bin/env bash
# `dltune launch` inside a Slurm allocation of the test cluster (tests/slurm/cluster.sh: real
# munged, slurmctld and two slurmd on loopback): the slurm backend is the default, the job spans
# both nodes (one rank each), and it trains to the end with a run directory. Exit 77 (skip)
# without Slurm / munge or root.
# A pipeline stage killed under srun stops the launch, naming the rank and its stage.
# Usage: slurm_launch_test.sh DLTUNE_BINARY SOURCE_DIR
set -u
dltune=$1
src=$2
tmp=$(mktemp -d)
cluster=$tmp/cluster
fail() { echo "FAIL: $*"; [ -d "$cluster/log" ] && tail -n 5 "$cluster"/log/*.log; exit 1; }
cleanup() { bash "$src/tests/slurm/cluster.sh" stop "$cluster" >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
bash "$src/tests/slurm/cluster.sh" start "$cluster" 2 2
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || fail "cluster.sh start exited $rc"
# shellcheck disable=SC1091
source "$cluster/env.sh"
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1 DLTUNE_SITE_DB=

# A quick tuning budget across the nodes, then training; the allocation gives the shape.
timeout 300 salloc --quiet -N 2 -n 2 "$dltune" launch "$src/tests/launch/data/tiny.yaml" \
  >"$tmp/out" 2>&1 || fail "launch under salloc exited $?: $(cat "$tmp/out")"
run=$(ls -dt "$DLTUNE_RUNS_DIR"/*/ | head -1)
python3 - "$run/summary.json" <<'PY' || fail "summary: $(cat "$tmp/out")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["backend"] == "slurm" and s["nodes"] == 2 and s["ranks"] == 2, s
assert s["steps"] == 80 and s["heldout_accuracy"] > 0.9, s
job = dict(s["plan"]["job"])
assert job.pop("threads_per_rank") >= 1 and job == {"nodes": 2, "ranks_per_node": 1}, s["plan"]["job"]
PY
python3 -c "
import json,sys; t=json.load(open('$run/trace.json'))
assert {e['pid'] for e in t['traceEvents'] if e.get('ph')=='X'} == {0, 1}" || fail "trace.json lacks a rank"
# The recipe tuning ran across both nodes: its plan for the 2x1 shape is stored with every trial
# (each with the slowest rank's throughput), and the plan names the winner among them.
"$dltune" db show --json >"$tmp/db.json" || fail "dltune db show exited $?"
python3 - "$tmp/db.json" <<'PY' || fail "the 2-node recipe tuning left no trials: $(cat "$tmp/db.json")"
import json, sys
d = json.load(open(sys.argv[1]))
rows = [p for p in d["plans"] if p["key"]["recipe"] and p["key"]["nodes"] == 2
        and p["key"]["ranks_per_node"] == 1]
assert len(rows) == 1, rows
trials = rows[0]["recipe_trials"]
assert len(trials) >= 2, trials
assert all(t["failed"] or (t["steps"] > 0 and t["samples_per_s"] > 0) for t in trials), trials
assert {t["round"] for t in trials} >= {0}, trials
why = rows[0]["plan"]["provenance"]["reason"]
assert any(t["label"] in why for t in trials if not t["failed"]), why
PY

# More nodes than the allocation has: refused (exit 2) with what to do, nothing started.
salloc --quiet -N 1 -n 2 "$dltune" launch "$src/tests/launch/data/tiny.yaml" --nodes 2 \
  --no-tune >"$tmp/out4" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--nodes 2 in a 1-node allocation exited $rc, not 2: $(cat "$tmp/out4")"
grep -q "^dltune launch: --nodes 2: this allocation has 1 node(s)" "$tmp/out4" ||
  fail "--nodes 2 in a 1-node allocation: $(cat "$tmp/out4")"
# Outside an allocation, --backend slurm --nodes 2 obtains one of 2 nodes (salloc): the run
# directory says 2 nodes and tasks ran on the second node too.
on_n2() { grep -c "launch task" "$cluster/log/slurmd-n2.log"; }
before=$(on_n2)
timeout 300 "$dltune" launch "$src/tests/launch/data/tiny.yaml" --backend slurm --nodes 2 -n 2 \
  --no-tune >"$tmp/out5" 2>&1 || fail "launch --backend slurm --nodes 2 exited $?: $(cat "$tmp/out5")"
run=$(ls -dt "$DLTUNE_RUNS_DIR"/*/ | head -1)
python3 - "$run/summary.json" "$run/launch.json" <<'PY' || fail "2-node summary: $(cat "$tmp/out5")"
import json, sys
s, l = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert s["backend"] == "slurm" and s["nodes"] == 2 and s["ranks"] == 2, s
assert l["nodes"] == 2, l
PY
[ "$(on_n2)" -gt "$before" ] || fail "no task of the --nodes 2 launch ran on n2"

# A pipeline stage killed mid-run under srun: the launch stops, naming the rank and its stage.
sed -e 's/  parallel: auto/  parallel: {mode: pipeline, stages: 2, microbatches: 4}/' \
  -e 's/memory_per_rank: 150MiB/memory_per_rank: auto/' -e 's/steps: 24/steps: 400/' \
  "$src/tests/launch/data/deep-mlp.yaml" >"$tmp/pipe.yaml"
salloc --quiet -N 2 -n 2 "$dltune" launch "$tmp/pipe.yaml" --no-tune >"$tmp/out6" 2>&1 &
launcher_pid=$!
victim=
for _ in $(seq 1 600); do
  run_p=$(ls -dt "$DLTUNE_RUNS_DIR"/deep-mlp-*/ 2>/dev/null | head -1)
  if [ -n "$run_p" ] && [ "$(grep -c '"event": *"step"' "$run_p/metrics.jsonl" 2>/dev/null)" -ge 6 ] 2>/dev/null; then
    for p in $(pgrep -f "dltune-worker train"); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_PROCID=1"; then victim=$p; fi
    done
    [ -n "$victim" ] && break
  fi
  sleep 0.2
done
[ -n "$victim" ] || { kill $launcher_pid; fail "the pipeline never reached step 6 with rank 1 running: $(cat "$tmp/out6")"; }
kill -9 "$victim"
wait $launcher_pid
rc=$?
[ $rc != 0 ] || fail "the slurm launch survived a killed stage"
grep -q "rank 1 (stage 1 of replica 0) on n" "$tmp/out6" ||
  fail "the slurm failure does not name the rank and its stage: $(cat "$tmp/out6")"

cat "$tmp/out" "$tmp/out5" "$tmp/out6"
echo "slurm launch: all checks passed"
