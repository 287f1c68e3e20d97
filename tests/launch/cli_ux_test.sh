#!/usr/bin/env bash
# What a user sees around a launch, without starting ranks: did-you-mean for subcommands, errors
# as JSON events with --json, the dry run in words, --set checked as the file's keys are,
# `recipe show` in YAML without placeholders, and `data check`.
# Usage: cli_ux_test.sh DLTUNE_BINARY SOURCE_DIR
set -u
dltune=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1 DLTUNE_SITE_DB=

# Did you mean, at every level; exit 2.
"$dltune" launhc quickstart >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "dltune launhc did not exit 2"
grep -q "dltune: unknown command 'launhc' (did you mean 'launch'?)" "$tmp/err" || fail "launhc: $(cat "$tmp/err")"
"$dltune" db shwo >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "dltune db shwo did not exit 2"
grep -q "dltune db: unknown command 'shwo' (did you mean 'show'?)" "$tmp/err" || fail "db shwo: $(cat "$tmp/err")"

# --json: errors are JSON events on standard output (and the sentence on stderr).
"$dltune" launch nosuchrecipe --json >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "an unknown recipe with --json did not exit 2"
python3 - "$tmp/out" <<'PY' || fail "--json error event: $(cat "$tmp/out")"
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 1, lines
e = json.loads(lines[0])
assert e["event"] == "error" and e["exit_code"] == 2 and "nosuchrecipe" in e["message"], e
PY
"$dltune" launch quickstart --json --no-such-flag >"$tmp/out" 2>/dev/null
[ $? -eq 2 ] || fail "a bad flag with --json did not exit 2"
grep -q '"event":"error"' "$tmp/out" || fail "a bad flag with --json printed no error event"

# The dry run, in words: where the plan would come from, what tuning would do, the command.
"$dltune" launch quickstart --dry-run >"$tmp/out" 2>&1 || fail "--dry-run exited $?: $(cat "$tmp/out")"
grep -q "^dry run: nothing is started and nothing is written" "$tmp/out" || fail "dry run: $(cat "$tmp/out")"
grep -q "not cached: a launch would first tune for up to 20 s (tune.budget)" "$tmp/out" || fail "dry run tuning: $(cat "$tmp/out")"
grep -q "trial trainings of [0-9]* candidates" "$tmp/out" || fail "dry run candidates: $(cat "$tmp/out")"
grep -q "no-tune" "$tmp/out" && fail "dry run talks of --no-tune without it: $(cat "$tmp/out")"
grep -q '^{' "$tmp/out" && fail "dry run dumps raw JSON: $(cat "$tmp/out")"
grep -q "^ranks:   dltune run -n 2" "$tmp/out" || fail "dry run command: $(cat "$tmp/out")"
grep -q "a launch creates .* and writes the plan and the recipe as run there" "$tmp/out" || fail "dry run run dir: $(cat "$tmp/out")"
grep -q -- "--plan .*plan.json'* --recipe .*recipe.yaml'* -- .*dltune-worker train --run-dir" "$tmp/out" || fail "dry run rank command: $(cat "$tmp/out")"
"$dltune" launch quickstart --dry-run --no-tune >"$tmp/out" 2>&1 || fail "--dry-run --no-tune exited $?"
grep -q "the recipe's own settings (--no-tune)" "$tmp/out" || fail "dry run --no-tune: $(cat "$tmp/out")"
"$dltune" launch quickstart --dry-run --json >"$tmp/out" 2>&1 || fail "--dry-run --json exited $?"
python3 -c "import json,sys; e=json.loads(open(sys.argv[1]).read()); assert e['event']=='dry_run' and e['would_tune'] and e['candidates']>1, e" "$tmp/out" ||
  fail "--dry-run --json: $(cat "$tmp/out")"
[ ! -e "$DLTUNE_RUNS_DIR" ] || fail "a dry run created $DLTUNE_RUNS_DIR"

# Ranks x threads per rank (engine issue 38): on a 2-socket, 36-core Xeon (an hwloc export) the
# ranks use every core: one rank per NUMA domain on its 18 cores, N-thread ranks filling the
# node, or the node's cores shared among -n ranks; each said in the dry run and in the plan.
quartz=$src/../shared/fixtures/topologies/mpibind_cts1-quartz-smt1.xml
if [ -f "$quartz" ]; then
  for args in "--set launch.ranks=auto:2:18" "--set launch.ranks=auto --set launch.threads_per_rank=4:9:4" \
      "-n 4:4:9" "-n 5:5:7"; do
    IFS=: read -r set want_ranks want_threads <<<"$args"
    # shellcheck disable=SC2086
    DLTUNE_TOPO_XML=$quartz "$dltune" launch resnet20-cifar --dry-run --json $set >"$tmp/out" 2>&1 ||
      fail "rxt dry run ($set) exited $?: $(cat "$tmp/out")"
    python3 - "$tmp/out" "$want_ranks" "$want_threads" <<'PY' || fail "ranks x threads ($set): $(cat "$tmp/out")"
import json, sys
e = json.loads(open(sys.argv[1]).read())
ranks, threads = int(sys.argv[2]), int(sys.argv[3])
assert e["ranks"] == ranks and e["threads_per_rank"] == threads, e
assert e["plan"]["job"]["threads_per_rank"] == threads, e["plan"]["job"]
idle = 36 - ranks * threads
assert (f"{idle} of 36 cores idle" in e["threads_reason"]) == (idle > 0), e["threads_reason"]
PY
  done
  DLTUNE_TOPO_XML=$quartz "$dltune" launch resnet20-cifar --dry-run --set launch.ranks=auto >"$tmp/out" 2>&1 ||
    fail "rxt dry run exited $?"
  grep -q "2 rank(s) x 18 thread(s) on 1 node(s)" "$tmp/out" || fail "dry run ranks x threads: $(cat "$tmp/out")"
  # Ranks and threads both auto: the rule's shape until a launch on that machine has measured
  # the node's four (shape_search.h: an export of another machine is never measured here), and
  # the dry run says so.
  grep -q "^threads: 18 per rank: the node's 36 cores shared among its ranks; ranks x threads: one rank per NUMA domain (the rule): the topology is another machine's (DLTUNE_TOPO_XML .*mpibind_cts1-quartz-smt1.xml): a launch there measures its shapes (the database has 0 of the 4 shapes' measurements)$" \
    "$tmp/out" || fail "dry run threads: $(cat "$tmp/out")"
  # Nor would a launch tune here: its trials would time this machine under quartz's key.
  grep -q "^plan:    the recipe's own settings (not tuned: the topology is another machine's (DLTUNE_TOPO_XML .*quartz-smt1.xml), and a tuning here would measure this machine):$" \
    "$tmp/out" || fail "dry run plan under an export: $(cat "$tmp/out")"
  DLTUNE_TOPO_XML=$quartz "$dltune" launch resnet20-cifar --dry-run --json --set launch.ranks=auto \
    >"$tmp/out" 2>&1 || fail "rxt dry run --json exited $?"
  python3 - "$tmp/out" <<'PY' || fail "the dry run's shape search: $(cat "$tmp/out")"
import json, sys
e = json.loads(open(sys.argv[1]).read())
ss = e["shape_search"]
assert not ss["decided"] and (ss["ranks_per_node"], ss["threads"]) == (2, 18), ss
got = [(c["ranks_per_node"], c["threads"], c["error"]) for c in ss["candidates"]]
assert got == [(2, 18, "not measured yet"), (6, 6, "not measured yet"), (12, 3, "not measured yet"),
               (36, 1, "not measured yet")], got
PY
  DLTUNE_TOPO_XML=$quartz "$dltune" launch resnet20-cifar --dry-run --set launch.threads_per_rank=2000 \
    >/dev/null 2>"$tmp/err"
  [ $? -eq 2 ] || fail "threads_per_rank 2000 did not exit 2"
  grep -q "launch.threads_per_rank: 2000 threads per rank: at most 1024" "$tmp/err" || fail "threads 2000: $(cat "$tmp/err")"
else
  echo "note: $quartz missing (../shared beside the clone): ranks x threads not checked"
fi
"$dltune" launch quickstart --dry-run --set training.precision=fp16 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "training.precision=fp16 did not exit 2"
grep -q "expected one of fp32, bf16, auto" "$tmp/err" || fail "precision fp16: $(cat "$tmp/err")"

# --set: any key, checked as the file's are, named in its problems.
# quickstart warms up for 20 steps and checkpoints every 100: 40 steps need a checkpoint period.
"$dltune" launch quickstart --dry-run --set training.steps=40 --set training.checkpoint_every=20 \
  --set data.samples=3000 >"$tmp/out" 2>&1 || fail "--set exited $?: $(cat "$tmp/out")"
"$dltune" launch quickstart --dry-run --json --set training.steps=40 --set training.checkpoint_every=20 >"$tmp/out" 2>&1
python3 -c "import json,sys; e=json.loads(open(sys.argv[1]).read()); assert e['steps']==40 and e['checkpoint_every']==20, e" "$tmp/out" ||
  fail "--set training.steps=40 did not reach the run: $(cat "$tmp/out")"
# A value that conflicts with the file's other keys is refused as the file's would be (a run's
# length is the exception: the schedule follows it, below).
"$dltune" launch quickstart --dry-run --set training.batch.max_global=32 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--set training.batch.max_global=32 (below quickstart's per-rank 64) did not exit 2"
grep -q "per-rank batch 64 exceeds max_global 32.*(with --set training.batch.max_global=32; add --set training.batch.per_rank=... to change it too)" "$tmp/err" ||
  fail "--set cross-field check: $(cat "$tmp/err")"
"$dltune" launch quickstart --dry-run --set training.steps=many >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--set training.steps=many did not exit 2"
grep -q -- "--set training.steps=many: training.steps: expected a positive integer, got \"many\"" "$tmp/err" ||
  fail "--set bad value: $(cat "$tmp/err")"
"$dltune" launch quickstart --dry-run --set training.stesp=10 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--set training.stesp did not exit 2"
grep -q "did you mean 'steps'" "$tmp/err" || fail "--set unknown key: $(cat "$tmp/err")"
"$dltune" launch quickstart --dry-run --set steps >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "--set without = did not exit 2"

# model show --kernels (issue 38): each node's kernel measured here, which it runs and why.
"$dltune" model show lenet5 --kernels --kernel-batch 4 >"$tmp/out" 2>&1 || fail "model show --kernels: $(cat "$tmp/out")"
grep -q "^kernels at batch 4 on 1 thread(s), fp32, measured here in" "$tmp/out" &&
  grep -Eq "^  conv2d1 +conv2d +[a-z0-9]+ .* ms.*fastest of [0-9] measured" "$tmp/out" ||
  fail "model show --kernels: $(cat "$tmp/out")"
"$dltune" model show lenet5 --kernels --kernel-batch 4 --json >"$tmp/out" 2>&1 || fail "model show --kernels --json"
python3 - "$tmp/out" <<'PY' || fail "model show --kernels --json: $(cat "$tmp/out")"
import json, sys
k = json.load(open(sys.argv[1]))["kernels"]
conv1 = next(n for n in k["kernels"] if n["node"] == "conv2d1")
assert conv1["kernel"] == k["choices"]["conv2d1"], k
assert conv1["kernel"] == min(conv1["timings"], key=lambda t: t["median_ms"])["kernel"], conv1
PY
"$dltune" model show lenet5 --kernels --input 1,32,32 >"$tmp/out" 2>&1
[ $? -eq 2 ] && grep -q "drop --input" "$tmp/out" || fail "--kernels with --input: $(cat "$tmp/out")"

# The worker profiles a plan's kernel choices, and refuses a node or kernel that does not exist.
worker=$(dirname "$dltune")/dltune-worker
echo '{"conv2d1": "im2col"}' >"$tmp/k.json"
"$worker" profile --model lenet5 --batch 4 --steps 2 --kernel-choices "$tmp/k.json" >"$tmp/out" 2>&1 &&
  grep -q '"step_samples_s"' "$tmp/out" || fail "profile --kernel-choices: $(cat "$tmp/out")"
echo '{"conv2d1": "warp-drive"}' >"$tmp/k.json"
"$worker" profile --model lenet5 --batch 4 --steps 2 --kernel-choices "$tmp/k.json" >"$tmp/out" 2>&1
[ $? -eq 2 ] && grep -q "warp-drive" "$tmp/out" || fail "a bad kernel choice: $(cat "$tmp/out")"

# recipe show: YAML by default, JSON with --json, no placeholders; data recipes still shown.
"$dltune" recipe show quickstart >"$tmp/out" || fail "recipe show exited $?"
grep -q "^name: quickstart$" "$tmp/out" || fail "recipe show is not YAML: $(head -3 "$tmp/out")"
grep -q "epochs" "$tmp/out" && fail "recipe show prints epochs for a steps recipe"
grep -q '""' "$tmp/out" && fail "recipe show prints empty strings"
"$dltune" recipe show --json quickstart >"$tmp/out" || fail "recipe show --json exited $?"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['model']['parameters']==431080 and 'epochs' not in j['training']" "$tmp/out" ||
  fail "recipe show --json"
"$dltune" recipe show cifar-cnn >"$tmp/out" 2>"$tmp/err" || fail "recipe show cifar-cnn exited $?: $(cat "$tmp/err")"
grep -q "^note: .*fetch CIFAR-10" "$tmp/err" || fail "recipe show cifar-cnn note: $(cat "$tmp/err")"

# A missing dataset says what to fetch and where; data check verifies the files.
"$dltune" launch cifar-cnn --dry-run >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "cifar-cnn without data did not exit 2"
grep -q "fetch CIFAR-10 (binary version) (cifar-10-binary.tar.gz) from https://www.cs.toronto.edu" "$tmp/err" ||
  fail "missing dataset message: $(cat "$tmp/err")"
"$dltune" data check quickstart >"$tmp/out" || fail "data check quickstart exited $?"
grep -q "nothing to fetch" "$tmp/out" || fail "data check synthetic: $(cat "$tmp/out")"
"$dltune" data check cifar-cnn >"$tmp/out" 2>&1
[ $? -eq 1 ] || fail "data check of missing files did not exit 1"
grep -q "^to get it: fetch CIFAR-10" "$tmp/out" || fail "data check fetch: $(cat "$tmp/out")"
mkdir -p "$tmp/mnist"
python3 - "$tmp/mnist" <<'PY'
import os, struct, sys
d = sys.argv[1]
for name, head, size in [("train-images-idx3-ubyte", struct.pack(">IIII", 0x803, 60000, 28, 28), 47040016),
                         ("train-labels-idx1-ubyte", struct.pack(">II", 0x801, 60000), 60008),
                         ("t10k-images-idx3-ubyte", struct.pack(">IIII", 0x803, 10000, 28, 28), 7840016),
                         ("t10k-labels-idx1-ubyte", struct.pack(">II", 0x801, 10000), 10008)]:
    with open(os.path.join(d, name), "wb") as f:
        f.write(head)
        f.truncate(size)
PY
"$dltune" data check lenet-mnist --set data.path="$tmp/mnist" >"$tmp/out" 2>&1 ||
  fail "data check with --set data.path exited $?: $(cat "$tmp/out")"
grep -q "MNIST: 4 of 4 files ok" "$tmp/out" || fail "data check mnist: $(cat "$tmp/out")"
"$dltune" launch lenet-mnist --dry-run --set data.path="$tmp/mnist" >/dev/null 2>&1 ||
  fail "lenet-mnist with --set data.path did not pass its checks"

# Issue 42: shorter runs just work. `--set training.steps=40` on the quickstart (checkpoints
# every 100 of 300 steps) and on lenet-mnist (epochs, a step decay every 1000) keeps the
# schedule in proportion and says so in one line; the dry run shows the checkpoint interval.
"$dltune" launch quickstart --set training.steps=40 --dry-run >"$tmp/out" 2>&1 ||
  fail "quickstart --set training.steps=40 exited $?: $(cat "$tmp/out")"
grep -q "^note:    --set training.steps=40: the run is shorter than the file's schedule: checkpoint_every 100 -> 13 (the share of the file's 300 steps each had)" "$tmp/out" ||
  fail "the shorter quickstart's note: $(cat "$tmp/out")"
"$dltune" launch quickstart --set training.steps=40 --dry-run --json >"$tmp/out" 2>&1 ||
  fail "quickstart --set training.steps=40 --json exited $?"
python3 -c "import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); assert d['steps'] == 40 and d['checkpoint_every'] == 13, d" "$tmp/out" ||
  fail "the shorter quickstart's dry run JSON: $(cat "$tmp/out")"
"$dltune" launch lenet-mnist --set training.steps=40 --set data.path="$tmp/mnist" --dry-run >"$tmp/out" 2>&1 ||
  fail "lenet-mnist --set training.steps=40 exited $?: $(cat "$tmp/out")"
grep -q "checkpoint_every 500 -> 10 (a quarter of the run, the default), schedule.warmup_steps 50 -> 2 (5 % of the run), schedule.step_size 1000 -> 20 (half the run)" "$tmp/out" ||
  fail "the shorter lenet-mnist's note: $(cat "$tmp/out")"
# mpirun's words on launch (issue 39): -np, -x (a bare NAME takes this shell's value), --map-by
# and --bind-to reach every `dltune run` the launch starts; bad values are refused first.
DLTUNE_UX_VALUE="with space" "$dltune" launch quickstart -np 2 -x FOO=1 -x DLTUNE_UX_VALUE --map-by numa \
  --bind-to core --dry-run >"$tmp/out" 2>&1 || fail "launch with mpirun's words exited $?: $(cat "$tmp/out")"
grep -q "^ranks:   dltune run -n 2 .* -x FOO=1 -x 'DLTUNE_UX_VALUE=with space' --map-by numa -- " "$tmp/out" ||
  fail "launch's ranks line lacks -x / --map-by: $(cat "$tmp/out")"
DLTUNE_DB=$tmp/program.sqlite "$dltune" launch "$src/examples/mpi4py/recipe.yaml" -x FOO=1 \
  --bind-to none --dry-run >"$tmp/out" 2>&1 || fail "a program recipe's dry run with -x exited $?"
grep -q "^  dltune run -n .* --bind none .* -x FOO=1 -- /usr/bin/python3 train.py" "$tmp/out" ||
  fail "a program recipe's run lacks --bind-to / -x: $(cat "$tmp/out")"
for bad in "-x 1X" "-x DLTUNE_UX_UNSET_VAR" "--map-by hwthread" "--bind-to socket"; do
  # shellcheck disable=SC2086
  "$dltune" launch quickstart $bad --dry-run >"$tmp/out" 2>&1
  [ $? -eq 2 ] || fail "launch $bad was not refused: $(cat "$tmp/out")"
done
# GPU ranks where hwloc finds no GPU are refused at the check, not after tuning.
if "$dltune" topo --json | python3 -c "import json,sys; sys.exit(0 if not json.load(sys.stdin)['gpus'] else 1)"; then
  "$dltune" launch quickstart --set comm.backend=nccl --dry-run >"$tmp/out" 2>&1
  [ $? -eq 2 ] || fail "comm.backend nccl without a GPU was not refused: $(cat "$tmp/out")"
  grep -q "comm.backend nccl runs one rank per GPU, and hwloc finds no GPU on this machine" "$tmp/out" ||
    fail "comm.backend nccl without a GPU: $(cat "$tmp/out")"
else
  echo "cli ux: this machine has a GPU: the nccl-without-GPU refusal is not checked here"
fi
echo "cli ux: all checks passed"
