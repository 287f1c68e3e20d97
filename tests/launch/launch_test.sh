#!/usr/bin/env bash
# `dltune launch` end to end on this machine (local backend, 2 ranks): tune + train + run
# directory, a cached second run, --retune, --dry-run, --json, bad recipes, an interrupted
# run resumed to the same final parameters as an uninterrupted one, a run that loses a rank
# and restarts by itself (launch.restarts) to those parameters too, and a stopped run resumed
# on fewer ranks, planned again.
# Usage: launch_test.sh DLTUNE_BINARY SOURCE_DIR
set -u
dltune=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1 DLTUNE_SITE_DB=
tiny=$src/tests/launch/data/tiny.yaml
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval('d'+sys.argv[2]))" "$@"; }
newest_run() { ls -dt "$DLTUNE_RUNS_DIR"/*/ | head -1 | sed 's|/$||'; }

# 1. First run: tunes within the budget, trains, writes the whole run directory.
"$dltune" launch "$tiny" >"$tmp/out1" 2>"$tmp/err1" || fail "first launch exited $?: $(cat "$tmp/err1" "$tmp/out1")"
grep -q "plan: tuned" "$tmp/out1" || fail "first run did not tune: $(cat "$tmp/out1")"
# The why and the summary wrap at 100 columns (not a terminal) between words: no line of theirs
# is longer, and the why's words all survive.
python3 - "$tmp/out1" <<'PY' || fail "the why or the summary is not wrapped: $(cat "$tmp/out1")"
import sys
lines = open(sys.argv[1]).read().split("\n")
i = next(i for i, l in enumerate(lines) if l.startswith("  why: "))
why = [lines[i]]
while lines[i + len(why)].startswith("       "):
    why.append(lines[i + len(why)])
assert all(len(l) <= 100 for l in why), why
assert len(why) > 1 or len(why[0]) <= 100, why
s = lines.index(next(l for l in lines if l.startswith("summary: ")))
assert all(len(l) <= 100 for l in lines[s:] if " " in l.strip()), [l for l in lines[s:] if len(l) > 100]
PY
run1=$(newest_run)
for f in recipe.yaml plan.json launch.json metrics.jsonl summary.json \
         trace.json report.html checkpoints/checkpoint.bin; do
  [ -s "$run1/$f" ] || fail "run directory lacks $f"
done
# The ranks ran the Plan and the recipe as run: no engine configuration of their own.
[ ! -e "$run1/train_config.json" ] || fail "the run directory holds a train_config.json"
python3 - "$run1/plan.json" "$run1/launch.json" <<'PY' || fail "plan.json / launch.json"
import json, sys
plan, launch = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert plan["collectives"]["allreduce"], plan
job = dict(plan["job"])
threads = job.pop("threads_per_rank")  # the node's cores shared by its 2 ranks: at least 1
assert job == {"nodes": 1, "ranks_per_node": 2} and threads >= 1, plan["job"]
cmd = launch["command"]
assert cmd[1:3] == ["train", "--run-dir"] and "TrainConfig" not in " ".join(cmd), cmd
PY
"$dltune" recipe show "$tiny" --json >"$tmp/shown-file.json" || fail "recipe show $tiny"
"$dltune" recipe show "$run1/recipe.yaml" --json >"$tmp/shown-run.json" || fail "recipe show recipe.yaml"
python3 - "$tmp/shown-file.json" "$tmp/shown-run.json" <<'PY' || fail "recipe.yaml is not the recipe as run"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    r.pop("source_path", None)
assert a == b, (a, b)
PY
[ "$(field "$run1/summary.json" "['plan_source']")" = tuned ] || fail "summary plan_source"
[ "$(field "$run1/summary.json" "['steps']")" = 80 ] || fail "summary steps"
[ "$(field "$run1/summary.json" "['ranks']")" = 2 ] || fail "summary ranks"
python3 - "$run1" <<'PY' || fail "summary/trace content"
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
for k in ["recipe", "ranks", "nodes", "steps", "throughput_sps", "scaling_efficiency", "final_loss",
          "heldout_accuracy", "plan_source", "plan", "tuning_seconds", "wall_seconds"]:
    assert k in s, k
assert s["throughput_sps"] > 0, s
assert s["threads_per_rank"] == s["plan"]["job"]["threads_per_rank"] >= 1 and s["precision"] == "fp32", s
# The scaling efficiency's 1-rank baseline runs as the job's rank 0 does (same binding, warm,
# long enough for its mean to be known to +-5 % within about 10 % of the training's time, at
# least 2 s, else a warning says how well it is known), and the efficiency is the job's
# throughput over 2x that baseline, exactly. (Its first run's length is set at the job's step
# time: one rank alone on a loaded machine can take longer.)
assert s["baseline_1rank_bind"] == "auto" and s["baseline_1rank_steps"] >= 40, s
assert s["baseline_1rank"] == "auto" and s["baseline_1rank_budget_s"] >= 2, s
assert 0 < s["baseline_1rank_seconds"] <= 1.5 * s["baseline_1rank_budget_s"], s
ci = s["baseline_1rank_rel_ci"]
assert (ci is not None and ci <= 0.05) or any("1-rank baseline" in w for w in s["warnings"]), s
assert abs(s["scaling_efficiency"] - s["throughput_sps"] / (2 * s["baseline_1rank_sps"])) < 1e-9
# So it is a physical figure: 2 weak-scaling ranks, each on its own core, cannot beat twice one
# rank on one of those cores beyond the two figures' noise (the old unbound, cold, 30-step
# baseline let it reach 2). The lower end is left wide because a shared machine starves a pair
# of ranks that wait for each other every step far more than one rank alone: 0.43 was measured
# at load average 9 on 2 cores.
# Above 1.1 the figure is not physical: the baseline was slowed by load that came and went
# (it ran after the job; CI's shared machine measured 1.18), and the summary must say so.
eff = s["scaling_efficiency"]
assert 0.25 <= eff, eff
assert eff <= 1.1 or any("above 100 %" in w for w in s["warnings"]), (eff, s["warnings"])
assert s["tuning_seconds"] > 0 and s["heldout_accuracy"] > 0.5, s
assert s["plan"]["provenance"]["source"] == "tuned" and s["plan"]["provenance"]["reason"]
# The budget is a promise: the whole tuning phase (sweep, trials, the ranks' start-up) within
# tune.budget + 10 %, here with 2 s more for a loaded 2-core CI machine's process start-up and
# shut-down; the plan records the budget and what it cut.
assert s["tuning_seconds"] <= 6 * 1.1 + 2, s["tuning_seconds"]
b = s["plan"]["provenance"]["budget"]
assert b["budget_s"] == 6 and b["tuning_s"] > 0, b
assert s["budget"]["budget_s"] == 6, s["budget"]
# Every per-step figure over the same timed steps, start-up kept out of them.
st = s["step_time"]
assert abs(st["compute_s"] + st["exposed_comm_s"] + st["other_s"] - st["total_s"]) < 1e-9 or st["other_s"] == 0, st
assert st["outside_steps_s"] >= 0 and st["total_s"] < 1.0, st
# The allreduce line: the sweep covered the job's buckets, and the bound is there.
ar = s["allreduce"]
# (On a loaded machine the ranks' start-up can take the sweep's share of a 6 s budget: then
# the budget cut and the summary's note say so.)
assert ar["sweep_s_per_step"] is not None or ("collective sweep" in s["budget"]["cut"] and ar["sweep_note"]), (ar, s["budget"])
assert ar["bound_s_per_step"] is not None and ar["bound_s_per_step"] > 0, ar
# Unknown figures are null, never a -1 sentinel.
assert s["heldout_loss"] is None or s["heldout_loss"] >= 0, s
t = json.load(open(d + "/trace.json"))
pids = {e["pid"] for e in t["traceEvents"] if e.get("ph") == "X"}
assert pids == {0, 1}, pids
steps = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"step"' in l]
assert len([x for x in steps if x["event"] == "step"]) == 80
PY
# report.html in headless Chromium: it loads without errors, renders at a page's width (the
# screenshot), and every plot in the rendered DOM has data, with readable axis labels (9 plots:
# the last two the predicted scaling curve).
"$src/tests/launch/report_check.sh" "$run1/report.html" "$tmp/report" 9 "tiny on 2 rank(s)" ||
  fail "report.html: $(cat "$tmp/report/why" 2>/dev/null)"
grep -q "Predicted scaling efficiency" "$tmp/report/dom.html" ||
  fail "report.html lacks the predicted scaling curve"
# db show names the recipe, not only its signature.
"$dltune" db show >"$tmp/dbshow" 2>&1 || fail "db show exited $?"
grep -q "recipe tiny (" "$tmp/dbshow" || fail "db show does not name the recipe: $(cat "$tmp/dbshow")"

# 2. Second run, shorter and without the baseline (issue 42): the cached plan, no tuning (the
#    run's length is not in the tuning key; the launch says the plan was tuned for 80 steps),
#    no 1-rank baseline.
"$dltune" launch "$tiny" --set training.steps=60 --set launch.baseline=off >"$tmp/out2" 2>"$tmp/err2" ||
  fail "second launch exited $?: $(cat "$tmp/err2")"
grep -q "plan: cached in $DLTUNE_DB" "$tmp/out2" || fail "second run did not use the cache: $(cat "$tmp/out2")"
grep -q "tuning collectives\|tuning batch" "$tmp/out2" && fail "second run tuned: $(cat "$tmp/out2")"
grep -q "cached plan tuned for a run of 80 steps, used for this run of 60" "$tmp/out2" ||
  fail "second run does not say the plan was tuned for another length: $(cat "$tmp/out2")"
grep -q "measuring 1 rank" "$tmp/out2" && fail "launch.baseline: off ran the baseline: $(cat "$tmp/out2")"
grep -q "scaling efficiency *not measured (launch.baseline: off)" "$tmp/out2" ||
  fail "the summary does not say the baseline was off: $(cat "$tmp/out2")"
run2=$(newest_run)
[ "$run2" != "$run1" ] || fail "second run reused the first run directory"
[ "$(field "$run2/summary.json" "['plan_source']")" = cache ] || fail "second summary plan_source"
[ "$(field "$run2/summary.json" "['steps']")" = 60 ] || fail "second summary steps"
[ "$(field "$run2/summary.json" "['scaling_efficiency']")" = None ] || fail "second run has an efficiency"
cmp -s "$run1/plan.json" "$run2/plan.json" && fail "plan.json should record provenance 'cache'"
python3 -c "
import json,sys; a=json.load(open('$run1/plan.json')); b=json.load(open('$run2/plan.json'))
assert a['training']==b['training'] and a['collectives']==b['collectives']" || fail "cached plan differs from the tuned one"

# 2b. The same work again with another learning rate (issue 42): the plan is cached (the rate is
#     not in the key, and no trial of tiny's scaled it), and the 1-rank baseline the first run
#     measured and stored is reused from the database when it was known within +-5 % (else
#     measured again), the summary saying when it was measured; launch.baseline=measure
#     measures and stores it again.
"$dltune" launch "$tiny" --set training.steps=60 --set training.optimizer.lr=0.01 >"$tmp/out2b" 2>"$tmp/err2b" ||
  fail "launch with a stored baseline exited $?: $(cat "$tmp/err2b")"
grep -q "plan: cached in $DLTUNE_DB" "$tmp/out2b" || fail "another lr did not use the cache: $(cat "$tmp/out2b")"
grep -q "cached plan tuned with lr 0.02, used with this run's lr 0.01: none of its trials scaled the lr" \
  "$tmp/out2b" || fail "the launch does not say the plan was tuned with another lr: $(cat "$tmp/out2b")"
run2b=$(newest_run)
python3 - "$run1/summary.json" "$run2b/summary.json" "$tmp/out2b" <<'PY' || fail "baseline reuse: $(cat "$tmp/out2b")"
import json, sys
first, again = (json.load(open(p)) for p in sys.argv[1:3])
out = open(sys.argv[3]).read()
assert first["baseline_1rank_source"] == "measured", first
if first["baseline_1rank_rel_ci"] is not None and first["baseline_1rank_rel_ci"] <= 0.05:
    assert again["baseline_1rank_source"] == "database", again
    assert again["baseline_1rank_sps"] == first["baseline_1rank_sps"], (first, again)
    assert again["baseline_1rank_measured_at"].endswith("Z"), again
    assert "measuring 1 rank" not in out, out
    assert "from the database: measured " + again["baseline_1rank_measured_at"] in " ".join(out.split()), out
else:  # too wide to reuse: measured again
    assert again["baseline_1rank_source"] == "measured" and "measuring 1 rank" in out, again
assert abs(again["scaling_efficiency"] - again["throughput_sps"] / (2 * again["baseline_1rank_sps"])) < 1e-9
PY
"$dltune" launch "$tiny" --set training.steps=40 --set launch.baseline=measure >"$tmp/out2c" 2>"$tmp/err2c" ||
  fail "launch.baseline=measure exited $?: $(cat "$tmp/err2c")"
grep -q "measuring 1 rank" "$tmp/out2c" || fail "launch.baseline=measure did not measure: $(cat "$tmp/out2c")"
[ "$(field "$(newest_run)/summary.json" "['baseline_1rank_source']")" = measured ] ||
  fail "launch.baseline=measure: the summary's source is not 'measured'"
"$dltune" db show >"$tmp/dbshow2" 2>&1 || fail "db show exited $?"
grep -q "1 one-rank baseline" "$tmp/dbshow2" || fail "db show does not count the baseline: $(cat "$tmp/dbshow2")"
# 2d. Another machine's export (DLTUNE_TOPO_XML, quartz's 36 cores): the ranks still run here,
#     so the 1-rank baseline is measured, and neither taken from nor stored under that machine's
#     key (no binding: quartz's CPUs are not this machine's); and nothing is tuned (it would
#     time this machine's cores and store the plan under quartz's key): the recipe's own
#     settings, said so.
DLTUNE_TOPO_XML=$src/topology/tests/data/mpibind_cts1-quartz-smt1.xml "$dltune" launch "$tiny" \
  -n 2 --set launch.threads_per_rank=1 --set launch.binding=none \
  --set training.steps=40 >"$tmp/out2d" 2>&1 || fail "a launch with an export exited $?: $(cat "$tmp/out2d")"
[ "$(field "$(newest_run)/summary.json" "['baseline_1rank_source']")" = measured ] ||
  fail "with an export, the baseline was not measured: $(cat "$tmp/out2d")"
[ "$(field "$(newest_run)/summary.json" "['plan_source']")" = default ] &&
  grep -q "not tuned: the topology is another machine's (DLTUNE_TOPO_XML .*quartz" "$tmp/out2d" ||
  fail "a launch with an export tuned here: $(cat "$tmp/out2d")"
"$dltune" db show >"$tmp/dbshow2d" 2>&1 || fail "db show exited $?"
grep -q "1 one-rank baseline" "$tmp/dbshow2d" ||
  fail "a baseline measured here was stored under the export's key: $(cat "$tmp/dbshow2d")"

# 3. --retune tunes again; --json prints machine-readable events ending in the summary, with
#    every phase reporting: the sweep's sizes, the trials' rounds and candidates, the ranks'
#    start-up, the steps; and never more than 3 s apart while tuning.
"$dltune" launch "$tiny" --retune --json >"$tmp/out3" 2>"$tmp/err3" || fail "--retune exited $?: $(cat "$tmp/err3")"
python3 - "$tmp/out3" <<'PY' || fail "--retune --json output: $(head -c 3000 "$tmp/out3")"
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert events[-1]["event"] == "summary" and events[-1]["plan_source"] == "tuned", events[-1]
assert all("t" in e for e in events[:-1]), [e for e in events if "t" not in e][:3]
kinds = {e.get("rank_event") for e in events if e["event"] == "status"}
for k in ("sweep", "trial_chunk"):
    assert k in kinds, (k, kinds)
phases = [e["phase"] for e in events if e["event"] == "phase"]
for p in ("tuning collectives", "tuning batch, buckets, overlap", "training",
          "measuring 1 rank for the scaling efficiency"):
    assert p in phases, (p, phases)
# Nothing silent while tuning: from the first tuning phase to the training phase.
start = next(i for i, e in enumerate(events) if e.get("phase") == "tuning collectives")
end = next(i for i, e in enumerate(events) if e.get("phase") == "training")
ts = [e["t"] for e in events[start:end + 1]]
gaps = [b - a for a, b in zip(ts, ts[1:])]
assert max(gaps) <= 3.0, max(gaps)
steps = [e["step"] for e in events if e["event"] == "progress" and e.get("phase") == "training"]
assert steps and steps[-1] == 80 and len(steps) == len(set(steps)), steps[-5:]
assert all(e["accuracy"] is None or 0 <= e["accuracy"] <= 1 for e in events if e["event"] == "progress")
s = events[-1]
c = s["confidence"]
assert c is None or (c["ratio"] > 0 and c["rounds"] >= 0), c
PY

# 4. --dry-run: prints the plan and the exact launch, starts and writes nothing.
before=$(ls "$DLTUNE_RUNS_DIR" | wc -l)
"$dltune" launch "$tiny" --dry-run >"$tmp/out4" 2>&1 || fail "--dry-run exited $?"
grep -q "^ranks:   dltune run -n 2 --backend local" "$tmp/out4" || fail "--dry-run: $(cat "$tmp/out4")"
grep -q "^plan:    cached in $DLTUNE_DB; a launch uses it as it is" "$tmp/out4" ||
  fail "--dry-run does not say the plan is cached: $(cat "$tmp/out4")"
grep -q "^  training: per-rank batch [0-9]*, global [0-9]*" "$tmp/out4" || fail "--dry-run does not print the plan"
grep -q "^  why: " "$tmp/out4" || fail "--dry-run does not say why the plan is what it is"
[ "$(ls "$DLTUNE_RUNS_DIR" | wc -l)" = "$before" ] || fail "--dry-run created a run directory"

# 4b. Ranks x threads by measurement (issue 38): with ranks and threads both auto, a launch
# that tunes measures every shape of this node's cores (1 x 2 and 2 x 1 on 2 cores), runs the
# fastest and stores the measurements; a dry run then finds them in the database. --no-tune on
# a database without them keeps the rule (one rank per NUMA domain) and says why.
auto=(--set launch.ranks=auto --set launch.ranks_per_node=auto --set training.steps=20
  --set launch.baseline=off)
DLTUNE_DB=$tmp/shapes.sqlite DLTUNE_RUNS_DIR=$tmp/shape-runs "$dltune" launch "$tiny" "${auto[@]}" \
  >"$tmp/out4b" 2>&1 ||
  fail "the ranks x threads launch exited $?: $(cat "$tmp/out4b")"
grep -q "^  ranks x threads    .* the fastest" "$tmp/out4b" ||
  fail "the summary does not say which shape was fastest: $(cat "$tmp/out4b")"
DLTUNE_DB=$tmp/shapes.sqlite "$dltune" launch "$tiny" "${auto[@]}" --dry-run --json >"$tmp/dry4b" ||
  fail "the ranks x threads dry run exited $?"
DLTUNE_DB=$tmp/none.sqlite "$dltune" launch "$tiny" "${auto[@]}" --no-tune --dry-run --json \
  >"$tmp/rule4b" || fail "the ranks x threads --no-tune dry run exited $?"
# Ctrl-C while the shapes are measured stops the launch (130), storing nothing.
DLTUNE_DB=$tmp/int4b.sqlite DLTUNE_RUNS_DIR=$tmp/int4b-runs "$dltune" launch "$tiny" "${auto[@]}" \
  >"$tmp/int4b" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q "measuring " "$tmp/int4b" && break; sleep 0.1; done
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] && grep -q "was interrupted (SIGINT)" "$tmp/int4b" ||
  fail "Ctrl-C during the shape search: exit $rc: $(cat "$tmp/int4b")"
if [ -s "$tmp/int4b.sqlite" ] && python3 -c "import sqlite3,sys; sys.exit(0 if sqlite3.connect(sys.argv[1]).execute('select count(*) from baselines').fetchone()[0] else 1)" "$tmp/int4b.sqlite"; then
  fail "the interrupted shape search stored measurements"
fi
python3 - "$tmp"/shape-runs/*/summary.json "$tmp/dry4b" "$tmp/rule4b" <<'PY' || fail "ranks x threads: $(cat "$tmp/out4b")"
import json, os, sys
s = json.load(open(sys.argv[1]))
ss = s["shape_search"]
assert ss["decided"], ss
shapes = {(c["ranks_per_node"], c["threads"]): c for c in ss["candidates"]}
assert set(shapes) == {(1, os.cpu_count()), (os.cpu_count(), 1)} or os.cpu_count() == 1, shapes
assert all(c["source"] == "measured" and c["samples_per_s"] > 0 for c in shapes.values()), shapes
best = max(shapes.values(), key=lambda c: c["samples_per_s"])
chosen = shapes[(ss["ranks_per_node"], ss["threads"])]
assert chosen["samples_per_s"] >= 0.98 * best["samples_per_s"], ss
assert s["ranks"] == ss["ranks_per_node"] and s["threads_per_rank"] == ss["threads"], s
assert s["threads_reason"] == ss["why"], (s["threads_reason"], ss["why"])
d = json.load(open(sys.argv[2]))
assert d["ranks"] == s["ranks"] and d["threads_per_rank"] == s["threads_per_rank"], d
assert all(c["source"] == "database" for c in d["shape_search"]["candidates"]), d["shape_search"]
assert "by an earlier launch" in d["threads_reason"], d["threads_reason"]
r = json.load(open(sys.argv[3]))
assert not r["shape_search"]["decided"] and r["ranks"] == 1, r["shape_search"]
assert "the rule" in r["threads_reason"] and "0 of the 2" in r["threads_reason"], r["threads_reason"]
PY

# 5. Bad command lines and bad recipes: exit 2, the recipe's file:line:col, nothing started.
"$dltune" launch "$tiny" --nodes 2 --backend local >/dev/null 2>"$tmp/err5"
[ $? -eq 2 ] || fail "--nodes 2 on the local backend did not exit 2"
grep -q "slurm backend" "$tmp/err5" || fail "--nodes 2 message: $(cat "$tmp/err5")"
"$dltune" launch nosuchrecipe >/dev/null 2>"$tmp/err5"
[ $? -eq 2 ] || fail "unknown recipe did not exit 2"
"$dltune" launch "$tiny" --retune --no-tune >/dev/null 2>&1
[ $? -eq 2 ] || fail "--retune --no-tune did not exit 2"
"$dltune" launch --resume "$tmp/nowhere" >/dev/null 2>&1
[ $? -eq 2 ] || fail "--resume of a missing directory did not exit 2"
bad=$src/recipes/tests/bad
n=0
for y in "$bad"/*.yaml; do
  (cd "$bad" && "$dltune" launch "$(basename "$y")") >/dev/null 2>"$tmp/err"
  rc=$?
  [ $rc -eq 2 ] || fail "$(basename "$y"): exit $rc, not 2: $(cat "$tmp/err")"
  first=$(sed "s|@DIR@|$bad|g" "${y%.yaml}.expected" | head -1)
  grep -qF -- "$first" "$tmp/err" || fail "$(basename "$y"): stderr lacks '$first': $(cat "$tmp/err")"
  n=$((n + 1))
done
[ $n -ge 30 ] || fail "only $n bad recipes"
[ "$(ls "$DLTUNE_RUNS_DIR" | wc -l)" = "$before" ] || fail "a bad recipe created a run directory"
# Refused once the run directory exists (here: a user database that is not one): still exit 2
# and nothing left behind (it used to keep runs/<recipe>-<time>/checkpoints/).
echo "this is not an SQLite database, only text long enough to look like a file" >"$tmp/broken.db"
DLTUNE_DB=$tmp/broken.db "$dltune" launch "$tiny" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "a broken user database did not exit 2: $(cat "$tmp/err")"
[ "$(ls "$DLTUNE_RUNS_DIR" | wc -l)" = "$before" ] || fail "a refused launch left a run directory"

# 5b. --set: the run trains the overridden recipe and records it in its recipe.yaml.
"$dltune" launch "$tiny" --no-tune --set training.steps=20 --set training.checkpoint_every=10 \
  >"$tmp/out5" 2>&1 || fail "--set launch exited $?: $(cat "$tmp/out5")"
setrun=$(newest_run)
[ "$(field "$setrun/summary.json" "['steps']")" = 20 ] || fail "--set training.steps=20 was not run"
grep -q "^#   --set training.steps=20$" "$setrun/recipe.yaml" || fail "recipe.yaml lacks the --set: $(cat "$setrun/recipe.yaml")"
grep -q "steps: 20" "$setrun/recipe.yaml" || fail "recipe.yaml lacks the overridden value"
"$dltune" recipe check "$setrun/recipe.yaml" >/dev/null || fail "the recorded recipe.yaml does not check"

# 6. Interrupt a run mid-way (SIGTERM to the launcher: ranks checkpoint and stop, exit 143),
#    resume it, and compare the final parameters with an uninterrupted run of the same plan.
"$dltune" launch "$tiny" --no-tune >"$tmp/out6a" 2>&1 || fail "uninterrupted run exited $?: $(cat "$tmp/out6a")"
ref=$(newest_run)
"$dltune" launch "$tiny" --no-tune >"$tmp/out6b" 2>&1 &
pid=$!
for i in $(seq 1 300); do
  r=$(newest_run)
  if [ "$r" != "$ref" ] && [ -s "$r/metrics.jsonl" ] &&
     [ "$(grep -c '"event":"step"' "$r/metrics.jsonl")" -ge 25 ]; then break; fi
  sleep 0.1
done
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 143 ] || fail "interrupted launch exited $rc, not 143: $(cat "$tmp/out6b")"
cut=$(newest_run)
[ -s "$cut/checkpoints/checkpoint.bin" ] || fail "no checkpoint after the interruption"
grep -q "dltune launch --resume $cut" "$tmp/out6b" || fail "no resume hint: $(cat "$tmp/out6b")"
# A copy whose launch.json was edited to a wrong type: refused naming the field (exit 2). The
# ranks as a string; lost nodes that are not a list of names (a control character in one); a
# --nodes range upside down.
cp -r "$cut" "$tmp/edited"
for edit in "j['ranks']='two':'ranks' must be a whole number" \
    "j['ranks']=2; j['exclude']=['n1', 'n\x1b2']:'exclude' must be a list of node names" \
    "j['exclude']=[]; j['nodes_range']=[3, 2]:'nodes_range' must be \[MIN, MAX\]"; do
  python3 -c "import json,sys; p=sys.argv[1]; j=json.load(open(p)); ${edit%%:*}; json.dump(j, open(p,'w'))" \
    "$tmp/edited/launch.json"
  "$dltune" launch --resume "$tmp/edited" >"$tmp/out6e" 2>&1
  rc=$?
  [ $rc -eq 2 ] && grep -q "${edit#*:}" "$tmp/out6e" ||
    fail "an edited launch.json (${edit%%:*}): exit $rc, $(cat "$tmp/out6e")"
done
"$dltune" launch --resume "$cut" >"$tmp/out6c" 2>&1 || fail "resume exited $?: $(cat "$tmp/out6c")"
cmp "$ref/checkpoints/checkpoint.bin" "$cut/checkpoints/checkpoint.bin" ||
  fail "resumed run ended with other parameters than the uninterrupted one"
[ "$(field "$cut/summary.json" "['steps']")" = 80 ] || fail "resumed summary steps"

# 7. launch.restarts (issue 40): rank 1 SIGKILLed after step 25 (a checkpoint every 10 steps),
#    and again as soon as the restarted attempt starts it (a failure during the restart).
#    With restarts 2 the launch continues by itself from the checkpoint, exits 0 with the
#    uninterrupted run's final parameters, and its summary says when, which rank, why, from
#    which step and how long it took; --max-restarts 0 overrides the recipe: it stops as before.
# shellcheck source=tests/launch/kill_rank.sh
. "$src/tests/launch/kill_rank.sh"
prev=$(newest_run)
"$dltune" launch "$tiny" --no-tune --set launch.restarts=2 >"$tmp/out7a" 2>&1 &
pid=$!
kill_rank_twice "$DLTUNE_RUNS_DIR" "$prev" 1 25 ||
  fail "rank 1 was not running at step 25, or not again after the restart: $(cat "$tmp/out7a")"
wait $pid || fail "the launch with launch.restarts 2 exited $? after losing a rank twice: $(cat "$tmp/out7a")"
rs=$(newest_run)
cmp "$ref/checkpoints/checkpoint.bin" "$rs/checkpoints/checkpoint.bin" ||
  fail "the restarted run ended with other parameters than the uninterrupted one"
python3 - "$rs/summary.json" <<'PY' || fail "the restart is not in summary.json: $(cat "$rs/summary.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["steps"] == 80, s["steps"]
rs = s["restarts"]
assert len(rs) == 2, rs
for r in rs:
    assert r["exit_code"] == 137 and "rank 1" in r["why"] and "signal 9" in r["why"], r
    assert r["from_step"] >= 20 and r["from_step"] % 10 == 0, r
# The second failure came as the restarted attempt started (its lost_s null unless it trained a
# step first); the last restart's time lost runs from its failure to the first step after it.
assert rs[1]["from_step"] >= rs[0]["from_step"], rs
assert rs[1]["lost_s"] is not None and 0 < rs[1]["lost_s"] < 60, rs
PY
grep -q "restart 2 of 2 (launch.restarts): at .* s: rank 1 .* killed by signal 9" "$tmp/out7a" ||
  fail "the progress did not say it restarts: $(cat "$tmp/out7a")"
grep -q "^  restart 1 .*rank 1 on .*; continued from the" "$tmp/out7a" ||
  fail "the summary has no restart row: $(cat "$tmp/out7a")"
"$dltune" launch "$tiny" --no-tune --set launch.restarts=2 --max-restarts 0 >"$tmp/out7b" 2>&1 &
pid=$!
kill_rank_when_trained "$DLTUNE_RUNS_DIR" "$rs" 1 25 >/dev/null ||
  fail "the run never reached step 25 with rank 1 running: $(cat "$tmp/out7b")"
wait $pid
rc=$?
[ $rc -eq 137 ] || fail "--max-restarts 0: the launch exited $rc, not the killed rank's 137: $(cat "$tmp/out7b")"
grep -q "dltune launch --resume" "$tmp/out7b" || fail "--max-restarts 0: no resume hint: $(cat "$tmp/out7b")"
grep -q "restart 1" "$tmp/out7b" && fail "--max-restarts 0 restarted: $(cat "$tmp/out7b")"
stopped=$(newest_run)  # section 8 continues it
# A hung rank (SIGSTOP): its peer gives up after the communication timeout (5 s here), the job
# stops (the hung rank SIGKILLed), and the launch restarts to the same final parameters.
prev=$(newest_run)
DLTUNE_COMM_TIMEOUT_MS=5000 "$dltune" launch "$tiny" --no-tune --set launch.restarts=1 \
  >"$tmp/out7c" 2>&1 &
pid=$!
kill_rank_when_trained "$DLTUNE_RUNS_DIR" "$prev" 1 25 STOP >/dev/null ||
  fail "the run never reached step 25 with rank 1 running: $(cat "$tmp/out7c")"
wait $pid || fail "the launch exited $? after a rank hung: $(cat "$tmp/out7c")"
hung=$(newest_run)
cmp "$ref/checkpoints/checkpoint.bin" "$hung/checkpoints/checkpoint.bin" ||
  fail "the run restarted after a hang ended with other parameters than the uninterrupted one"
[ "$(field "$hung/summary.json" "['restarts'][0]['from_step'] >= 20")" = True ] ||
  fail "no restart after the hang in summary.json: $(cat "$tmp/out7c")"
# The hung rank says nothing itself; its peer's timeout names it in the restart's why ("rank 1 did
# not answer in time" from MPI, "local rank 1 did not reach the shared-memory barrier" from shm).
[ "$(field "$hung/summary.json" "['restarts'][0]['why']" | grep -c "rank 0 had timed out: .*rank 1 did not")" = 1 ] ||
  fail "the restart's why does not name the hung rank: $(field "$hung/summary.json" "['restarts']")"
# A failure while a checkpoint is being written (issue 40 item 6): step 30's write stalls 3 s
# before it renames its file into place (DLTUNE_FAULT_CHECKPOINT_STALL_MS=30:3000); rank 0, the
# writer, is SIGKILLed once training passed step 30 while the file still holds step 20 (step
# 30's write in flight). The write is lost whole, the restart continues from step 20's
# checkpoint, intact, and ends with the uninterrupted run's parameters.
ckpt_step() { python3 -c "import json,sys; print(json.loads(open(sys.argv[1],'rb').read(4096).split(b'\n')[1])['step'])" "$1" 2>/dev/null || echo 0; }
prev=$(newest_run)
DLTUNE_FAULT_CHECKPOINT_STALL_MS=30:3000 "$dltune" launch "$tiny" --no-tune --set launch.restarts=1 \
  >"$tmp/out7e" 2>&1 &
pid=$!
killed=
for _ in $(seq 1 600); do
  r=$(newest_run)
  if [ "$r" != "$prev" ] && [ "$(grep -c '"event":"step"' "$r/metrics.jsonl" 2>/dev/null)" -ge 31 ] &&
     [ "$(ckpt_step "$r/checkpoints/checkpoint.bin")" = 20 ]; then
    killed=$(rank_pid "$r" 0) && [ -n "$killed" ] && kill -9 "$killed" && break
  fi
  sleep 0.05
done
[ -n "$killed" ] || { kill $pid; fail "never caught step 30's checkpoint in flight: $(cat "$tmp/out7e")"; }
wait $pid || fail "the launch exited $? after rank 0 died writing a checkpoint: $(cat "$tmp/out7e")"
mid=$(newest_run)
cmp "$ref/checkpoints/checkpoint.bin" "$mid/checkpoints/checkpoint.bin" ||
  fail "the run restarted after a failed checkpoint write ended with other parameters"
[ "$(field "$mid/summary.json" "['restarts'][0]['from_step']")" = 20 ] ||
  fail "the restart did not continue from the checkpoint before the lost write: $(field "$mid/summary.json" "['restarts']")"
# A failure that comes again before the restarted job trains a step is taken as lasting: with
# launch.min_ranks 1 the next restart runs on 1 rank, planned again with the global batch kept,
# and ends within 1 % of the uninterrupted run's loss.
prev=$(newest_run)
"$dltune" launch "$tiny" --no-tune --set launch.restarts=3 --set launch.min_ranks=1 \
  --set tune.restart_budget=0 >"$tmp/out7d" 2>&1 &
pid=$!
kill_rank_twice "$DLTUNE_RUNS_DIR" "$prev" 1 25 ||
  fail "rank 1 was not running at step 25, or not again after the restart: $(cat "$tmp/out7d")"
wait $pid || fail "the launch with launch.min_ranks 1 exited $?: $(cat "$tmp/out7d")"
grep -q "restart 2 of 3 (launch.restarts): .*, on 1 rank, planned again" "$tmp/out7d" ||
  fail "the second restart did not run on fewer ranks: $(cat "$tmp/out7d")"
python3 - "$ref" "$(newest_run)" <<'PY' || fail "the run continued on fewer ranks: $(cat "$tmp/out7d")"
import json, sys
ref, run = sys.argv[1], sys.argv[2]
s = json.load(open(run + "/summary.json"))
rs = s["restarts"]
assert [r["ranks"] for r in rs] == [2, 1] and [r["fewer"] for r in rs] == [False, True], rs
assert s["ranks"] == 1 and s["steps"] == 80, s
assert s["reshaped"]["from"]["ranks"] == 2 and s["reshaped"]["global_batch"] == 64, s["reshaped"]
assert json.load(open(run + "/launch.json"))["ranks"] == 1
want = json.load(open(ref + "/summary.json"))["final_loss"]
assert abs(s["final_loss"] - want) <= 0.01 * want, (s["final_loss"], want)
print("restart_fewer_loss_rel", abs(s["final_loss"] - want) / want)
PY

# 8. --resume on another shape (issue 40): the run stopped above (2 ranks, a checkpoint at step
#    20 or later) continues on 1 rank, planned again: its global batch 64 kept (the data order
#    and the learning-rate schedule continue), the layout and threads the new shape's. A shape
#    the global batch does not split over is refused before any rank starts, naming the ones
#    that work. The loss ends within 1 % of the uninterrupted 2-rank run's.
cut2=$stopped
steps_before=$(grep -c '"event":"step"' "$cut2/metrics.jsonl")
"$dltune" launch --resume "$cut2" -n 3 >"$tmp/out8a" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "global batch 64, which does not split evenly over 3 ranks.*resume on 1, 2, 4" "$tmp/out8a" ||
  fail "--resume -n 3: exit $rc, $(cat "$tmp/out8a")"
[ "$(grep -c '"event":"step"' "$cut2/metrics.jsonl")" = "$steps_before" ] ||
  fail "--resume -n 3 was refused after a rank trained"
[ ! -e "$cut2/plan.previous.json" ] || fail "--resume -n 3 rewrote the plan"
"$dltune" launch --resume "$cut2" -n 1 --dry-run >"$tmp/out8b" 2>&1 || fail "--resume -n 1 --dry-run: $(cat "$tmp/out8b")"
grep -q "^plan:    planned again for the new shape: from 2 ranks on 1 node to 1 rank on 1 node; global batch 64 kept.*a launch tunes the new shape first, for up to 5 s (tune.restart_budget)" "$tmp/out8b" ||
  fail "the dry run does not say the plan is made again: $(cat "$tmp/out8b")"
grep -q "a launch continues $cut2 from its last checkpoint" "$tmp/out8b" || fail "dry run: $(cat "$tmp/out8b")"
"$dltune" launch --resume "$cut2" -n 1 >"$tmp/out8c" 2>&1 || fail "--resume -n 1 exited $?: $(cat "$tmp/out8c")"
grep -q "^  new shape .*from 2 ranks on 1 node to 1 rank on 1 node; global batch 64 kept" "$tmp/out8c" ||
  fail "the summary has no new shape row: $(cat "$tmp/out8c")"
"$dltune" db show --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert any(p['key']['recipe'] and p['key']['ranks_per_node'] == 1 for p in d['plans']), d['plans']" ||
  fail "the plan tuned for 1 rank was not stored"
python3 - "$ref" "$cut2" <<'PY' || fail "the run continued on 1 rank is not as planned: $(cat "$tmp/out8c")"
import json, sys
ref, run = sys.argv[1], sys.argv[2]
s = json.load(open(run + "/summary.json"))
r = s["reshaped"]
assert r["from"] == {"nodes": 1, "ranks": 2} and r["to"] == {"nodes": 1, "ranks": 1}, r
assert r["global_batch"] == 64 and "samples per replica 32 -> 64" in r["changes"], r
# No plan was cached for 1 rank: tuned within tune.restart_budget (5 s) and stored.
assert r["plan_source"] == "tuned", r
assert s["ranks"] == 1 and s["steps"] == 80, s
plan, before = (json.load(open(run + f)) for f in ("/plan.json", "/plan.previous.json"))
assert plan["job"]["ranks_per_node"] == 1 and plan["parallel"]["replicas"] == 1, plan["job"]
assert plan["training"]["global_batch"] == 64 and plan["training"]["per_rank_batch"] == 64
assert before["job"]["ranks_per_node"] == 2 and before["parallel"]["replicas"] == 2
assert json.load(open(run + "/launch.json"))["ranks"] == 1
# Every step once at least, none skipped; the loss within 1 % of the uninterrupted run's.
steps = {json.loads(l)["step"] for l in open(run + "/metrics.jsonl") if '"event":"step"' in l}
assert steps == set(range(80)), sorted(set(range(80)) - steps)
want = json.load(open(ref + "/summary.json"))["final_loss"]
assert abs(s["final_loss"] - want) <= 0.01 * want, (s["final_loss"], want)
PY
echo "launch: all checks passed"
