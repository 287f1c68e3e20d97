#!/usr/bin/env bash
# `dltune predict` end to end: its JSON and table from each compute and communication source
# (a device, a published throughput, a topology file, this machine's compute measured by
# dltune-worker profile), the overlap's interference (assumed, given, measured here by
# dltune-worker overlap), the pipeline model, and one sentence with exit 2 for each bad input.
# Usage: predict_cli_test.sh DLTUNE_BINARY SOURCE_DIR
set -u
dltune=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_SITE_DB=
fail() { echo "FAIL: $*"; exit 1; }

# A device and a network: the acceptance command, as JSON and as a table.
"$dltune" predict resnet50 --nodes 1,8,64,512,1024 --per-node 8 --device h100 --inter 50 --json \
  >"$tmp/h100.json" 2>"$tmp/err" || fail "device h100 exited $?: $(cat "$tmp/err")"
python3 - "$tmp/h100.json" <<'PY' || fail "device h100: $(cat "$tmp/h100.json")"
import json, sys
j = json.load(open(sys.argv[1]))
p = j["predictions"]
assert [x["nodes"] for x in p] == [1, 8, 64, 512, 1024], p
assert [x["ranks"] for x in p] == [8, 64, 512, 4096, 8192], p
keys = {"nodes", "ranks", "step_ms", "compute_ms", "exposed_comm_ms", "throughput_sps",
        "scaling_efficiency", "algorithm"}
for x in p:
    assert keys <= set(x), x
    assert abs(x["step_ms"] - x["compute_ms"] - x["exposed_comm_ms"]) < 1e-6 * x["step_ms"], x
    assert abs(x["throughput_sps"] - 32 * x["ranks"] / x["step_ms"] * 1e3) < 1e-6 * x["throughput_sps"], x
    assert 0 < x["scaling_efficiency"] <= 1 + 1e-9, x
    assert x["algorithm"] in ("ring", "hier_pipelined"), x
effs = [x["scaling_efficiency"] for x in p]
assert effs == sorted(effs, reverse=True), effs
assert j["batch"] == 32 and j["per_node"] == 8 and j["parameters"] == 25557032, j
assert "h100" in j["compute_source"] and "fraction" in j["compute_source"], j
# Intervals (issue 41): a device's rate is an assumed +-25 %, its links the model's checked
# error against nccl-tests; every range holds its value, and the note says what they cover.
for x in p:
    for k, lo_hi in (("step_ms", x["step_ms_range"]), ("throughput_sps", x["throughput_sps_range"]),
                     ("scaling_efficiency", x["scaling_efficiency_range"])):
        assert lo_hi[0] <= x[k] * (1 + 1e-12) and x[k] <= lo_hi[1] * (1 + 1e-12), (k, x)
    assert x["compute_spread"] == 0.25 and x["comm_spread"] == 0.16, x
    assert x["throughput_sps_range"][1] > 1.3 * x["throughput_sps_range"][0], x
assert "compute +-25 % (the assumed fraction of peak)" in j["interval_note"], j["interval_note"]
# The overlap assumed on devices (issue 41): the published compute slowdown, said in the
# header and on every row with more than one rank.
assert "arXiv:2507.03114" in j["interference"] and "+18.9 %" in j["interference"], j
for x in p:
    o = x["overlap"]
    assert o["interference"] in j["interference"] and o["compute_slowed_ms"] >= 0, x
    assert o["compute_slowed_ms"] <= x["compute_ms"], x
# How far a device's rows held against published results (issue 41: a bare 100 % told nothing).
assert "4 to 28 points above held-out ones" in j["trust_note"], j
PY
"$dltune" predict resnet50 --nodes 8 --per-node 8 --device h100 --inter 50 --interference 0.3,0.5 \
  --json >"$tmp/given.json" || fail "--interference 0.3,0.5 exited $?"
python3 - "$tmp/h100.json" "$tmp/given.json" <<'PY' || fail "--interference 0.3,0.5: $(cat "$tmp/given.json")"
import json, sys
assumed = [x for x in json.load(open(sys.argv[1]))["predictions"] if x["nodes"] == 8][0]
g = json.load(open(sys.argv[2]))
x = g["predictions"][0]
assert "compute +30.0 %, communication +50.0 % while both run (--interference 0.3,0.5)" == g["interference"], g
assert x["overlap"]["compute_slowed_ms"] > assumed["overlap"]["compute_slowed_ms"], (x, assumed)
PY
"$dltune" predict resnet50 --nodes 8 --per-node 8 --device h100 --inter 50 --interference none \
  --json >"$tmp/none.json" || fail "--interference none exited $?"
python3 - "$tmp/h100.json" "$tmp/none.json" <<'PY' || fail "--interference none: $(cat "$tmp/none.json")"
import json, sys
assumed = [x for x in json.load(open(sys.argv[1]))["predictions"] if x["nodes"] == 8][0]
x = json.load(open(sys.argv[2]))["predictions"][0]
assert abs(x["overlap"]["compute_slowed_ms"]) < 1e-9 and "(--interference none)" in x["overlap"]["interference"], x
assert x["step_ms"] < assumed["step_ms"] and x["scaling_efficiency"] > assumed["scaling_efficiency"], (x, assumed)
PY
"$dltune" predict resnet50 --nodes 1,8 --per-node 8 --device h100 --inter 50 >"$tmp/h100.txt" ||
  fail "the table exited $?"
grep -q "exposed_ms" "$tmp/h100.txt" && grep -q "efficiency" "$tmp/h100.txt" &&
  grep -q "throughput/s (interval)" "$tmp/h100.txt" && grep -q "^intervals: compute" "$tmp/h100.txt" &&
  grep -q "^trust: how far to trust these rows" "$tmp/h100.txt" ||
  fail "the table: $(cat "$tmp/h100.txt")"

# A published throughput on the nodes of a topology file (8 GPUs, 4 x 100 Gbit/s EFA).
"$dltune" predict resnet50 --nodes 1,2 --single-sps 2500 --topo \
  "$src/predict/tests/data/aws_p4d-24xl-topo.xml" --json >"$tmp/p4d.json" 2>"$tmp/err" ||
  fail "--topo exited $?: $(cat "$tmp/err")"
python3 - "$tmp/p4d.json" <<'PY' || fail "--topo: $(cat "$tmp/p4d.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["per_node"] == 8 and abs(j["single_device_sps"] - 2500) < 1e-6, j
assert j["predictions"][1]["ranks"] == 16 and "EFA" in j["comm_source"], j
PY

# This machine's compute, measured (dltune-worker profile); one rank needs no network.
"$dltune" predict lenet --nodes 1 --per-node 1 --batch 16 --profile-steps 2 --json \
  >"$tmp/here.json" 2>"$tmp/err" || fail "measured compute exited $?: $(cat "$tmp/err")"
python3 - "$tmp/here.json" <<'PY' || fail "measured compute: $(cat "$tmp/here.json")"
import json, sys
j = json.load(open(sys.argv[1]))
p = j["predictions"][0]
assert p["ranks"] == 1 and p["exposed_comm_ms"] == 0 and abs(p["scaling_efficiency"] - 1) < 1e-9, p
assert p["step_ms"] > 0 and "measured here" in j["compute_source"], j
# One rank on this node computes on all its cores, as a launch runs it (issue 38).
assert j["threads_per_rank"] >= 1, j
assert f'{j["threads_per_rank"]} thread' in j["compute_source"], j
# Its interval is the timed steps' spread (2 steps), exact in nothing else.
assert "the range of 2 timed steps" in j["interval_note"], j["interval_note"]
lo, hi = p["throughput_sps_range"]
assert lo < p["throughput_sps"] < hi or p["compute_spread"] == 0, p
assert abs(hi / p["throughput_sps"] - 1 / (1 - p["compute_spread"])) < 1e-9, p
PY
"$dltune" predict lenet --nodes 1 --per-node 1 --batch 16 --profile-steps 2 --threads-per-rank 1 \
  >"$tmp/here1.txt" 2>"$tmp/err" || fail "--threads-per-rank 1 exited $?: $(cat "$tmp/err")"
grep -q "^dltune predict: lenet, per-rank batch 16, 1 rank(s) x 1 thread(s) per node" "$tmp/here1.txt" &&
  grep -q "measured here by dltune-worker profile (2 steps, 1 thread)" "$tmp/here1.txt" ||
  fail "--threads-per-rank 1: $(cat "$tmp/here1.txt")"

# The pipeline model: one replica of 8 stages.
"$dltune" predict gpt-tiny --nodes 2 --per-node 4 --device a100 --inter 25 --parallel pipeline \
  --json >"$tmp/pipe.json" 2>"$tmp/err" || fail "--parallel pipeline exited $?: $(cat "$tmp/err")"
grep -q '"layout": "pipeline 8 stages x 1 replica,' "$tmp/pipe.json" ||
  fail "--parallel pipeline: $(cat "$tmp/pipe.json")"
# On a device the pipeline rows say that the GPU engine would not run them; data-parallel rows
# and this machine's own compute (whose CPU engine runs pipelines) carry no such note.
grep -q '"note": "pipeline layouts here are a what-if.*GPU engine trains data-parallel' \
  "$tmp/pipe.json" || fail "--parallel pipeline on a device: no note: $(cat "$tmp/pipe.json")"
! grep -q '"note"' "$tmp/h100.json" || fail "a data-parallel prediction has a note"
"$dltune" predict lenet --nodes 1 --per-node 2 --batch 16 --profile-steps 2 --intra 10 \
  --parallel pipeline --json >"$tmp/here_pipe.json" 2>"$tmp/err" ||
  fail "a pipeline on this machine's compute exited $?: $(cat "$tmp/err")"
grep -q '"layout": "pipeline 2 stages' "$tmp/here_pipe.json" && ! grep -q '"note"' "$tmp/here_pipe.json" ||
  fail "a pipeline on this machine's compute: $(cat "$tmp/here_pipe.json")"

# Ranks of a node slow each other: with 2 ranks per node on this machine the compute is
# profiled as 2 copies at once (dltune-worker profile --copies), the slowest reported with every
# copy's step time; the source says so. A copy that fails fails the profile, naming it.
worker=$(dirname "$dltune")/dltune-worker
"$worker" profile --model lenet --batch 16 --steps 3 --copies 2 --out "$tmp/copies.json" ||
  fail "profile --copies 2 exited $?"
python3 - "$tmp/copies.json" <<'PY' || fail "profile --copies 2: $(cat "$tmp/copies.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["copies"] == 2 and len(j["copy_step_s"]) == 2, j
assert all(t > 0 for t in j["copy_step_s"]) and j["step_s"] == max(j["copy_step_s"]), j
assert len(j["step_samples_s"]) == 3 and len(j["forward_s"]) == len(j["backward_s"]) > 0, j
PY
"$worker" profile --model no-such-model --batch 16 --copies 2 --out "$tmp/bad.json" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "unknown model" "$tmp/err" || fail "profile --copies of a bad model: $(cat "$tmp/err")"
"$worker" profile --model lenet --batch 16 --barrier 'x,y' 2>"$tmp/err"
[ $? -eq 2 ] && grep -q -- "--barrier: expected R,W" "$tmp/err" || fail "a bad --barrier: $(cat "$tmp/err")"
if [ "$(nproc)" -ge 2 ]; then
  "$dltune" predict lenet --nodes 1 --per-node 2 --batch 16 --profile-steps 2 --intra 10 \
    --threads-per-rank 1 >"$tmp/copies.txt" 2>"$tmp/err" || fail "predict --per-node 2 exited $?: $(cat "$tmp/err")"
  grep -q "the slowest of 2 copies at once, as a node's ranks run" "$tmp/copies.txt" ||
    fail "predict --per-node 2 did not profile 2 copies: $(cat "$tmp/copies.txt")"
fi

# The interference measured here: 2 ranks train quickstart's model and reduce beside it
# (dltune-worker overlap), at 64 KiB, 1 MiB and the bucket size.
"$dltune" predict quickstart --nodes 1 --per-node 2 --intra 10 --profile-steps 2 \
  --threads-per-rank 1 --interference measure --json >"$tmp/measured.json" 2>"$tmp/err" ||
  fail "--interference measure exited $?: $(cat "$tmp/err")"
python3 - "$tmp/measured.json" <<'PY' || fail "--interference measure: $(cat "$tmp/measured.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["interference"].startswith("compute +"), j
assert "measured here by dltune-worker overlap: 2 ranks x 1 thread(s) training quickstart" in j["interference"], j
assert "allreduces of 65536,1048576," in j["interference"], j
# The rounds' range is the interval's: its ends take the slowdowns at either end of it.
assert "rounds (the interval: their range)" in j["interference"], j
assert "overlap interference at the bucket size: compute +" in j["interval_note"], j
assert "overlap" in j["predictions"][0], j
# ... and stored under this machine, the model and the shape, for later predictions.
assert j["interference_stored"].startswith("stored in "), j
PY
# Measured here under another machine's topology (DLTUNE_TOPO_XML): used, never stored under
# that machine's key.
DLTUNE_TOPO_XML=$src/topology/tests/data/mpibind_g4dnmetal.xml "$dltune" predict quickstart \
  --nodes 1 --per-node 2 --intra 10 --profile-steps 2 --threads-per-rank 1 \
  --interference measure --json >"$tmp/elsewhere.json" 2>"$tmp/err" ||
  fail "--interference measure under DLTUNE_TOPO_XML exited $?: $(cat "$tmp/err")"
python3 - "$tmp/elsewhere.json" <<'PY' || fail "measured under another topology: $(cat "$tmp/elsewhere.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert "measured here by dltune-worker overlap" in j["interference"], j
assert j["interference_stored"].startswith("not stored: the topology is another machine's"), j
PY
# A later prediction of the same model and shape uses the stored measurement, at the nearest
# batch measured (saying so); `--interference assumed` the assumption by kind; another shape has
# none stored.
"$dltune" predict quickstart --nodes 1 --per-node 2 --intra 10 --profile-steps 2 \
  --threads-per-rank 1 --batch 32 --json >"$tmp/stored.json" 2>"$tmp/err" ||
  fail "predict after --interference measure exited $?: $(cat "$tmp/err")"
"$dltune" predict quickstart --nodes 1 --per-node 2 --intra 10 --profile-steps 2 \
  --threads-per-rank 1 --interference assumed --json >"$tmp/assumed.json" 2>"$tmp/err" ||
  fail "predict --interference assumed exited $?: $(cat "$tmp/err")"
python3 - "$tmp/measured.json" "$tmp/stored.json" "$tmp/assumed.json" <<'PY' || fail "the stored interference: $(cat "$tmp/stored.json")"
import json, sys
measured, stored, assumed = (json.load(open(f)) for f in sys.argv[1:4])
i = stored["interference"]
assert i.startswith("compute +") and "(stored measurement of " in i, i
assert "2 ranks x 1 thread(s) training quickstart at batch 64" in i, i
assert "measured at batch 64, this one's is 32" in i, i
# The same slowdowns as measured: the words before the source are equal.
assert i.split(" while both run")[0] == measured["interference"].split(" while both run")[0], (i, measured)
assert "not measured" in assumed["interference"] and "stored" not in assumed["interference"], assumed
PY
"$worker" overlap --model lenet --batch 8 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "run it as 2 or more ranks" "$tmp/err" ||
  fail "overlap outside a job: $(cat "$tmp/err")"

# Bad input: exit 2 and one sentence naming what is wrong.
# The README's example of this machine's models, as a newcomer types it (issue 42): on a fresh
# database it says to measure the links first; after that (a short sweep) it predicts.
readme=(recipes/resnet20-cifar.yaml --nodes 1,2,4 --inter 12.5 --json)
(cd "$src" && "$dltune" predict "${readme[@]}") >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "run \`dltune tune --collectives -n 2\`" "$tmp/err" ||
  fail "the README's predict on a fresh database: $(cat "$tmp/err" "$tmp/out")"
"$dltune" tune --collectives -n 2 --budget 12 >"$tmp/tune.out" 2>&1 ||
  fail "the README's tune --collectives -n 2 exited $?: $(cat "$tmp/tune.out")"
(cd "$src" && "$dltune" predict "${readme[@]}") >"$tmp/out" 2>"$tmp/err" ||
  fail "the README's predict after a sweep exited $?: $(cat "$tmp/err")"
python3 - "$tmp/out" <<'PY' || fail "the README's predict: $(cat "$tmp/out")"
import json, sys
j = json.load(open(sys.argv[1]))
assert [p["nodes"] for p in j["predictions"]] == [1, 2, 4], j
assert all(p["throughput_sps"] > 0 for p in j["predictions"]), j
# The links inside the node come from the sweep just stored (a fit of it), not from --intra.
assert "intra" in j["comm_source"] and "--intra" not in j["comm_source"], j
PY

# A launch's predicted row uses it too: quickstart's 2 ranks, not tuned (the recipe's own
# settings, overlap on), predicted from the sweep just stored and the stored interference.
DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1 "$dltune" launch quickstart --no-tune \
  --set training.steps=12 >"$tmp/launch.out" 2>&1 || fail "launch --no-tune exited $?: $(cat "$tmp/launch.out")"
python3 - "$tmp"/runs/*/summary.json <<'PY' || fail "the launch's prediction: $(cat "$tmp/launch.out")"
import json, sys
p = json.load(open(sys.argv[1]))["prediction"]
assert "error" not in p and p["comm_source"].startswith("this shape's sweep"), p
i = p["overlap"]["interference"]
assert "(stored measurement of " in i and "training quickstart at batch 64" in i, i
PY

# A stored row another program damaged is not used: the prediction assumes, saying why.
python3 - "$DLTUNE_DB" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("UPDATE interference SET points_json = '[[65536, 50, 0, 99, 0, 0, 0]]'")
c.commit()
PY
"$dltune" predict quickstart --nodes 1 --per-node 2 --intra 10 --profile-steps 2 \
  --threads-per-rank 1 --json >"$tmp/damaged.json" 2>"$tmp/err" ||
  fail "predict with a damaged stored interference exited $?: $(cat "$tmp/err")"
python3 - "$tmp/damaged.json" <<'PY' || fail "a damaged stored interference: $(cat "$tmp/damaged.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert "not measured" in j["interference"], j
assert "not read" in j["interference_stored"] and "interference.points.compute" in j["interference_stored"], j
PY

bad() {  # bad WHAT-TO-FIND ARGS...
  local want=$1
  shift
  "$dltune" predict "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "predict $* exited $rc, not 2: $(cat "$tmp/err")"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "predict $*: more than one line: $(cat "$tmp/err")"
  grep -q -- "$want" "$tmp/err" || fail "predict $*: no '$want' in: $(cat "$tmp/err")"
  [ -s "$tmp/out" ] && fail "predict $* printed on stdout: $(cat "$tmp/out")"
  return 0
}
bad "unknown device 'tpu'" resnet50 --nodes 1 --device tpu
bad "at least 1" resnet50 --nodes 0 --device h100
bad "--nodes" resnet50 --nodes 1,x --device h100
printf '<system><pci class="0x030200">' >"$tmp/broken.xml"
bad "broken.xml" resnet50 --nodes 1 --topo "$tmp/broken.xml" --single-sps 100
printf '<?xml version="1.0"?>\n<html><body>a page</body></html>\n' >"$tmp/page.xml"
bad "neither" resnet50 --nodes 1 --topo "$tmp/page.xml" --single-sps 100
bad "not-a-model" not-a-model --nodes 1 --device h100
bad "--inter" resnet50 --nodes 1,2 --device h100
bad "--inter" resnet50 --nodes 2 --device h100 --inter fast
bad "--parallel" resnet50 --nodes 1 --device h100 --parallel model
bad "--algo" resnet50 --nodes 1 --device h100 --algo bogus
bad "--interference: expected measure, none or C" resnet50 --nodes 1 --device h100 --interference lots
bad "--interference: expected measure, none or C" resnet50 --nodes 1 --device h100 --interference -1
bad "the compute is a device's" resnet50 --nodes 1 --device h100 --interference measure
bad "one rank per node reduces nothing" lenet --nodes 1 --per-node 1 --interference measure
echo "dltune predict: all checks passed"
