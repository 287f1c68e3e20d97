#!/usr/bin/env bash
# Pipelines through `dltune launch`, ranks as processes over MPI (local backend):
# 1. `dltune model show --json` prints the memory model's terms; `recipe check` of a recipe that
#    fits nowhere exits 2 saying by how much and what would fit.
# 2. parallel: auto with a memory_per_rank only a 2-stage pipeline fits: the launch lays the
#    model out as a pipeline, trains, and says so (plan, summary); every rank's memory estimate
#    is within 15 % of its measured peak; the ranks got their plan from the PMIx job data.
#    Tuned, the trials measure the layout and the plan stores it (cached next time); each trial's
#    measured peak memory is stored beside its estimate (within 15 %); the trial program
#    refuses a candidate that does not fit, saying why.
# 3. The pipeline (2 stages, 4 micro-batches) trains as one rank with 4 micro-batches does: the
#    same loss at every step (within 1e-5 relative).
# 4. A stage killed mid-step on 2 replicas x 2 stages: the launch stops within seconds, naming
#    the rank and its stage; --resume finishes the run, each stage reading only its own tensors
#    of the checkpoint (its memory stays within 15 % of the model's estimate).
# Usage: pipeline_launch_test.sh DLTUNE_BINARY SOURCE_DIR
set -u
dltune=$1
src=$2
tmp=$(mktemp -d)
launcher_pid=
trap '[ -n "$launcher_pid" ] && kill -9 $launcher_pid 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1 DLTUNE_SITE_DB=
mlp=$src/tests/launch/data/deep-mlp.yaml
newest_run() { ls -dt "$DLTUNE_RUNS_DIR"/*/ | head -1 | sed 's|/$||'; }
recipe() {  # recipe NAME SED-EXPRESSION...: a copy of deep-mlp.yaml edited
  local out=$tmp/$1.yaml; shift
  cp "$mlp" "$out"
  for e in "$@"; do sed -i "$e" "$out"; done
  echo "$out"
}

# 1. The memory terms, and a recipe that fits nowhere.
"$dltune" model show resnet20 --batch 64 --ranks 2 --stages 2 --json >"$tmp/show.json" ||
  fail "model show exited $?"
python3 - "$tmp/show.json" <<'PY' || fail "model show --json memory terms"
import json, sys
j = json.load(open(sys.argv[1]))
m = j["memory"]
assert m["layout"]["stages"] == 2 and len(m["stages"]) == 2, m["layout"]
for s in m["stages"]:
    t = s["terms"]
    parts = ["parameters", "gradients", "optimizer", "state", "activations", "workspace",
             "communication", "checkpoint", "runtime"]
    assert t["total"] == sum(t[k] for k in parts) and all(t[k] >= 0 for k in parts), t
    assert t["runtime"] > 0, t  # the CPU engine's BLAS buffers
    assert t["optimizer"] == t["parameters"], t  # SGD's velocity
# The stages hold every parameter of the model, 4 bytes each (269,722 for resnet20, option A).
assert j["parameters"] == 269722, j["parameters"]
assert sum(s["terms"]["parameters"] for s in m["stages"]) == 4 * j["parameters"], m
PY
small=$(recipe small 's/memory_per_rank: 150MiB/memory_per_rank: 8MiB/')
"$dltune" recipe check "$small" >"$tmp/check.out" 2>"$tmp/check.err"
rc=$?
[ $rc = 2 ] || fail "recipe check of a recipe that fits nowhere exited $rc: $(cat "$tmp/check.out" "$tmp/check.err")"
grep -q "no layout of 2 ranks fits 8 MiB per rank" "$tmp/check.err" || fail "check message: $(cat "$tmp/check.err")"
grep -q "too much. What would fit: " "$tmp/check.err" || fail "no advice: $(cat "$tmp/check.err")"
"$dltune" launch "$small" --dry-run >"$tmp/dry.out" 2>"$tmp/dry.err"
[ $? = 2 ] && grep -q "no layout of 2 ranks fits" "$tmp/dry.err" ||
  fail "--dry-run of a recipe that fits nowhere: $(cat "$tmp/dry.out" "$tmp/dry.err")"
[ -z "$(ls -A "$DLTUNE_RUNS_DIR" 2>/dev/null)" ] || fail "a refused launch left a run directory"
"$dltune" recipe check "$mlp" >"$tmp/check2.out" 2>&1 || fail "check of deep-mlp: $(cat "$tmp/check2.out")"
grep -q "  layout: 1 replica x 2 stages" "$tmp/check2.out" || fail "check names no layout: $(cat "$tmp/check2.out")"
# The same recipe on the GPU engine, which runs no pipeline stages yet: data parallel with the
# optimizer state in host memory where that fits, else refused pointing at the CPU engine;
# never planned as a pipeline that the ranks would then refuse.
gpu=$(recipe gpu '$a comm:\n  backend: nccl')
"$dltune" recipe check "$gpu" >"$tmp/check3.out" 2>&1 || fail "GPU check: $(cat "$tmp/check3.out")"
grep -q "  layout: 2 replicas x 1 stage, optimizer state in host memory" "$tmp/check3.out" ||
  fail "GPU check's layout: $(cat "$tmp/check3.out")"
gpu=$(recipe gpu2 '$a comm:\n  backend: nccl' 's/memory_per_rank: 150MiB/memory_per_rank: 120MiB/')
"$dltune" recipe check "$gpu" >"$tmp/check4.out" 2>&1
rc=$?
[ $rc = 2 ] || fail "GPU check at 120 MiB exited $rc: $(cat "$tmp/check4.out")"
grep -q "no layout of 2 ranks fits 120 MiB per rank: the smallest, 2 replicas x 1 stage" "$tmp/check4.out" &&
  grep -q "or the CPU engine (comm.backend auto or mpi)" "$tmp/check4.out" ||
  fail "GPU check message: $(cat "$tmp/check4.out")"

# 1b. The layout search runs in the launcher; what it asks the worker for is each node's cost
# timed here (`dltune-worker profile --fit`, what a tuned launch asks for): plain data, one
# per-sample and one per-call cost per node of the model, from batches 4 and 32.
worker=$(dirname "$dltune")/dltune-worker
"$dltune" model show "$mlp" --json >"$tmp/mlp.json" || fail "model show deep-mlp exited $?"
"$worker" profile --fit --recipe "$mlp" --batch 32 --out "$tmp/costs.json" ||
  fail "dltune-worker profile --fit exited $?: $(cat "$tmp/costs.json" 2>/dev/null)"
python3 - "$tmp/mlp.json" "$tmp/costs.json" <<'PY' || fail "profile --fit's node costs"
import json, sys
model, costs = (json.load(open(p)) for p in sys.argv[1:])
n = len(model["nodes"])
assert len(costs["per_sample"]) == len(costs["per_call"]) == n, (n, costs)
assert (costs["small_batch"], costs["large_batch"]) == (4, 32), costs
assert all(c >= 0 for c in costs["per_sample"] + costs["per_call"]), costs
assert sum(costs["per_sample"]) > 0 and costs["optimizer_per_parameter"] >= 0, costs
PY
# A bad request is refused with its reason in the answer file, not on the terminal.
"$worker" profile --fit --model no-such-model --batch 8 --out "$tmp/bad.json" 2>"$tmp/bad.err"
[ $? = 2 ] && grep -q '"error": *"unknown model' "$tmp/bad.json" && [ ! -s "$tmp/bad.err" ] ||
  fail "profile --fit of an unknown model: $(cat "$tmp/bad.json" "$tmp/bad.err")"

# 2. parallel: auto picks the pipeline.
"$dltune" launch "$mlp" >"$tmp/out1" 2>"$tmp/err1" || fail "pipelined launch exited $?: $(cat "$tmp/err1" "$tmp/out1")"
run=$(newest_run)
grep -q "layout: 1 replica x 2 stages" "$tmp/out1" "$tmp/err1" || fail "the launch did not say its layout: $(cat "$tmp/out1")"
# A lone pipeline is timed too: its cuts come from this machine.
grep -q "layout: 1 replica x 2 stages.*balanced by the step-time model from its nodes timed here" "$tmp/out1" "$tmp/err1" ||
  fail "the lone pipeline was not timed: $(cat "$tmp/out1" "$tmp/err1")"
python3 - "$run" <<'PY' || fail "pipelined run's plan / summary / memory"
import json, sys
d = sys.argv[1]
plan = json.load(open(d + "/plan.json"))
p = plan["parallel"]
assert p["stages"] == 2 and p["replicas"] == 1 and len(p["partition"]) == 2, p
assert 0 < p["memory_bytes"] <= 150 << 20 and "2 stages" in p["reason"], p
s = json.load(open(d + "/summary.json"))
assert s["steps"] == 24 and s["throughput_sps"] > 0, s
w = json.load(open(d + "/worker_summary.json"))
mem = w["memory"]
assert len(mem["ranks"]) == 2 and {r["stage"] for r in mem["ranks"]} == {0, 1}, mem
for r in mem["ranks"]:
    assert r["estimate_bytes"] <= 150 << 20, r
    assert r["error"] <= 0.15, ("memory model vs measured peak", r)
# The summary gives the largest stage's estimate beside its measured peak.
sm = s["memory"]
top = max(mem["ranks"], key=lambda r: r["estimate_bytes"])
assert sm["rank"] == top["rank"] and sm["estimate_bytes"] == top["estimate_bytes"], (sm, top)
assert sm["measured_bytes"] == top["measured_bytes"] and sm["max_error"] == mem["max_error"], sm
PY
grep -q "memory .* MiB per rank estimated (rank 0, stage 0), .* MiB measured" \
  "$tmp/out1" "$tmp/err1" || fail "the summary has no memory line: $(cat "$tmp/out1")"
[ ! -e "$run/train_config.json" ] || fail "the run directory holds a train_config.json"
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); assert c['parallel']['stages']==2, c" "$run/plan.json" || fail "plan.json stages"

# 2b. Tuned (tune.budget 20): the trials measure the pipeline layout (data parallelism does
# not fit), the plan stores it with its measured throughput, and the next launch takes it from
# the database. The limit comes from --set over a file where data parallelism fits: the trials'
# layouts must follow the recipe as run, not the file.
tuned=$(recipe tuned 's/budget: 0/budget: 20/' 's/steps: 24/steps: 8/' 's/^name: deep-mlp/name: tuned/' \
  's/memory_per_rank: 150MiB/memory_per_rank: 1GiB/')
limit=(--set launch.memory_per_rank=150MiB)
"$dltune" launch "$tuned" "${limit[@]}" >"$tmp/tuned.out" 2>&1 || fail "tuned launch: $(cat "$tmp/tuned.out")"
run_t=$(newest_run)
python3 - "$run_t" <<'PY' || fail "tuned pipeline plan: $(cat "$tmp/tuned.out")"
import json, sys
d = sys.argv[1]
plan = json.load(open(d + "/plan.json"))
p, pv = plan["parallel"], plan["provenance"]
assert pv["source"] == "tuned", pv
assert p["stages"] == 2 and p["replicas"] == 1 and p["measured_sps"] > 0, p
assert "measured" in p["reason"] and "in the trials" in p["reason"], p["reason"]
cands = json.load(open(d + "/tuning/candidates.json"))["candidates"]
assert cands and all(c["parallel"]["stages"] == 2 for c in cands), cands
# Each measured trial's memory: the estimate beside the measured peak, within 15 %.
trials = [t for t in json.load(open(d + "/tuning/trials.json"))["trials"] if not t["failed"]]
assert trials, "no trial was measured"
for t in trials:
    est, peak = t["memory_estimate_bytes"], t["memory_peak_bytes"]
    assert 0 < est <= 150 << 20 and abs(est - peak) <= 0.15 * peak, ("trial memory", t)
# The report tells what the summary tells (issue 42): trials ran, a prediction was made, and a
# lone pipeline allreduces nothing.
html = open(d + "/report.html").read()
summary = json.load(open(d + "/summary.json"))
assert "No trials were run" not in html, "report: no trials"
if summary["predicted_sps"]:
    assert "No prediction was made" not in html, "report: no prediction"
    assert "The models predicted" in html, "report: the prediction"
assert "the plan&#39;s choice" not in html, "report: a lone pipeline's allreduce"  # as escaped
PY
# ... and the database keeps them with the trial.
"$dltune" db show >"$tmp/dbshow.out" 2>&1 || fail "db show: $(cat "$tmp/dbshow.out")"
grep -q "1x2 stage .*samples/s; memory [0-9.]* MiB estimated, [0-9.]* MiB measured" "$tmp/dbshow.out" ||
  fail "the trial's memory is not in the database: $(cat "$tmp/dbshow.out")"
"$dltune" launch "$tuned" "${limit[@]}" >"$tmp/tuned2.out" 2>&1 ||
  fail "second tuned launch: $(cat "$tmp/tuned2.out")"
grep -q "plan: cached in" "$tmp/tuned2.out" || fail "the tuned layout was not cached: $(cat "$tmp/tuned2.out")"
python3 - "$run_t" "$(newest_run)" <<'PY' || fail "the cached plan's layout"
import json, sys
a, b = (json.load(open(d + "/plan.json"))["parallel"] for d in sys.argv[1:])
for k in ("replicas", "stages", "partition", "microbatches", "schedule", "recompute"):
    assert a[k] == b[k], (k, a, b)
PY

# 2c. The trial program never builds a candidate that does not fit a rank's memory: it fails
# with why, and the others are measured.
one_mem=$(recipe onemem 's/memory_per_rank: 150MiB/memory_per_rank: 220MiB/' 's/ranks: 2/ranks: 1/' \
  's/ranks_per_node: 2/ranks_per_node: 1/')
python3 - "$one_mem" "$tmp/cands.json" <<'PY'
import json, sys
def training(b):
    return {"per_rank_batch": b, "global_batch": b, "scaling": "weak", "lr_scale": 1.0,
            "warmup_steps": 0, "bucket_bytes": 4194304, "overlap": True}
ring = {"min_bytes": 0, "max_bytes": 2**64 - 1, "algo": "ring", "segment_bytes": 0}
json.dump({"version": 1, "recipe": sys.argv[1],
           "base": {"version": 1, "collectives": {"allreduce": [ring]}, "training": training(32),
                    "job": {"nodes": 1, "ranks_per_node": 1}},
           "candidates": [{"label": "b32", "training": training(32)},
                          {"label": "b8192", "training": training(8192)}],
           "schedule": {"grid": False, "eta": 4, "min_steps": 2, "max_steps": 4, "warmup_steps": 1,
                        "chunk_steps": 2, "budget_s": 20, "keep_trainers": True}},
          open(sys.argv[2], "w"))
PY
"$worker" trial --recipe "$one_mem" --candidates "$tmp/cands.json" \
  --out "$tmp/trials.json" --budget 20 >"$tmp/trial.out" 2>&1 || fail "trial: $(cat "$tmp/trial.out")"
python3 - "$tmp/trials.json" <<'PY' || fail "the trial ran a candidate that does not fit"
import json, sys
o = json.load(open(sys.argv[1]))
by = {t["label"]: t for t in o["trials"]}
big, small = by["b8192"], by["b32"]
assert big["failed"] and big["reason"].startswith("does not fit: needs ") and \
    "over the 220 MiB limit (launch.memory_per_rank)" in big["reason"], big
assert not small["failed"] and small["samples_per_s"] > 0, small
assert o["trainers_built"] == 1, o
PY

# 3. Equivalence with one rank (4 micro-batches each way; no memory limit on one rank).
pipe=$(recipe pipe 's/  parallel: auto/  parallel: {mode: pipeline, stages: 2, microbatches: 4, schedule: 1f1b}/' \
  's/memory_per_rank: 150MiB/memory_per_rank: auto/' 's/steps: 24/steps: 6/')
one=$(recipe one 's/  parallel: auto/  parallel: {mode: data, microbatches: 4}/' \
  's/memory_per_rank: 150MiB/memory_per_rank: auto/' 's/steps: 24/steps: 6/' 's/ranks: 2/ranks: 1/' \
  's/ranks_per_node: 2/ranks_per_node: 1/')
"$dltune" launch "$pipe" >"$tmp/pipe.out" 2>&1 || fail "pipeline launch: $(cat "$tmp/pipe.out")"
run_pipe=$(newest_run)
"$dltune" launch "$one" >"$tmp/one.out" 2>&1 || fail "one-rank launch: $(cat "$tmp/one.out")"
run_one=$(newest_run)
python3 - "$run_pipe" "$run_one" <<'PY' || fail "pipeline vs one rank losses"
import json, sys
def losses(d):
    return [e["loss"] for e in map(json.loads, open(d + "/metrics.jsonl")) if e.get("event") == "step"]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 6, (a, b)
for x, y in zip(a, b):
    assert abs(x - y) <= 1e-5 * abs(y), (a, b)
PY

# 4. A stage killed mid-step; then --resume.
hyb=$(recipe hybrid 's/  parallel: auto/  parallel: {mode: hybrid, stages: 2, microbatches: 4}/' \
  's/memory_per_rank: 150MiB/memory_per_rank: auto/' 's/ranks: 2/ranks: 4/' 's/ranks_per_node: 2/ranks_per_node: 4/' \
  's/steps: 24/steps: 60/' 's/^name: deep-mlp/name: hybrid/')
"$dltune" launch "$hyb" >"$tmp/hyb.out" 2>"$tmp/hyb.err" &
launcher_pid=$!
victim=
for _ in $(seq 1 600); do
  run_h=$(ls -dt "$DLTUNE_RUNS_DIR"/hybrid-*/ 2>/dev/null | head -1)
  if [ -n "$run_h" ] && [ "$(grep -c '"event": *"step"' "$run_h/metrics.jsonl" 2>/dev/null)" -ge 6 ] 2>/dev/null; then
    for p in $(pgrep -f "dltune-worker train --run-dir $DLTUNE_RUNS_DIR"); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMIX_RANK=3"; then victim=$p; fi
    done
    [ -n "$victim" ] && break
  fi
  sleep 0.2
done
[ -n "$victim" ] || fail "the hybrid run never reached step 6 with rank 3 running: $(cat "$tmp/hyb.out" "$tmp/hyb.err")"
kill -9 "$victim"
t0=$(date +%s)
wait $launcher_pid
rc=$?
launcher_pid=
t1=$(date +%s)
[ $rc != 0 ] || fail "the launch survived a killed stage"
[ $((t1 - t0)) -le 20 ] || fail "the launch took $((t1 - t0)) s to stop"
grep -q "rank 3 (stage 1 of replica 1)" "$tmp/hyb.out" "$tmp/hyb.err" ||
  fail "the failure does not name the rank and its stage: $(cat "$tmp/hyb.out" "$tmp/hyb.err")"
sleep 1
pgrep -f "dltune-worker train --run-dir $DLTUNE_RUNS_DIR" >/dev/null && fail "ranks left behind"
"$dltune" launch --resume "${run_h%/}" >"$tmp/resume.out" 2>&1 || fail "resume: $(cat "$tmp/resume.out")"
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['steps']==60, s" "${run_h%/}/summary.json" ||
  fail "the resumed run did not finish: $(cat "$tmp/resume.out")"
# Each stage read only its own tensors back (the file holds the whole model's parameters and
# momentum, 2 x 54 MiB): every rank's measured peak is still within 15 % of its estimate.
python3 - "${run_h%/}/worker_summary.json" <<'PY' || fail "resuming a pipeline exceeded the memory model"
import json, sys
mem = json.load(open(sys.argv[1]))["memory"]
assert len(mem["ranks"]) == 4, mem
for r in mem["ranks"]:
    assert r["error"] <= 0.15, ("memory model vs measured peak after --resume", r)
PY
echo "PASS"
