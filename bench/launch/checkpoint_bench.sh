#!/usr/bin/env bash
# bench/launch/checkpoint_bench.sh: what checkpoints cost a training run (issue 40's
# async_ckpt_overhead): resnet20 on 2 ranks, a checkpoint every 50 steps (written in the
# background by rank 0: engine/io/checkpoint_writer.h), against the same run checkpointing only
# at its end, alternated RUNS times on the same cores.
#
#   bash bench/launch/checkpoint_bench.sh [BUILD_DIR] [RUNS] [STEPS] [PARALLEL]
#
# Defaults: build, 3 runs, 150 steps, training.parallel data (PARALLEL pipeline: the 2 ranks
# are the 2 stages of one replica, whose rank 0 receives stage 1's tensors into the file while
# training waits; the hash, sync and rename are a thread's). Per run, from summary.json: the mean timed step (the
# background writes slow the steps they overlap), and the time training waited for the
# checkpoints (copying the state, the final write) per step. The overhead is
#   (median step of the checkpointing runs + their wait per step) / (median step of the others) - 1
# Last line:
#   summary: async_ckpt_overhead=F wait_per_step_ms=T write_ms=T checkpoints=N runs=N cpu='...'
set -uo pipefail
build=${1:-build}
runs=${2:-3}
steps=${3:-150}
parallel=${4:-data}
dltune="$build/bin/dltune"
[ -x "$dltune" ] || { echo "checkpoint_bench: $dltune not built" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1 DLTUNE_SITE_DB=
cpu=$(grep -m1 "model name" /proc/cpuinfo | sed 's/.*: //')
newest_run() { ls -dt "$DLTUNE_RUNS_DIR"/*/ 2>/dev/null | head -1 | sed 's|/$||'; }
common=(resnet20-cifar -n 2 --no-tune --set "training.steps=$steps" --set launch.baseline=off
        --set launch.threads_per_rank=1 --set "training.parallel=$parallel")
for i in $(seq 1 "$runs"); do
  for every in 50 "$steps"; do
    "$dltune" launch "${common[@]}" --set "training.checkpoint_every=$every" \
      >"$tmp/out" 2>&1 || { echo "run failed:"; tail -5 "$tmp/out"; exit 1; }
    python3 - "$(newest_run)/summary.json" "$every" >>"$tmp/rows" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c = s["checkpoints"]
print(sys.argv[2], s["step_time"]["total_s"], c["blocked_s_per_step"], c["write_s_each"] or 0,
      c["count"])
PY
    echo "run $i, a checkpoint every $every steps: $(tail -1 "$tmp/rows")"
  done
done
python3 - "$tmp/rows" "$steps" "$runs" "$cpu" "$parallel" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
steps, runs, cpu, par = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
ck = [r for r in rows if r[0] == "50"]
end = [r for r in rows if r[0] == steps]
med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
step_ck, wait, write = med(ck, 1), med(ck, 2), med(ck, 3)
step_end = med(end, 1)
overhead = (step_ck + wait) / step_end - 1
spread = (max(float(r[1]) for r in end) - min(float(r[1]) for r in end)) / step_end
print(f"steps: {step_ck*1e3:.1f} ms checkpointing every 50, {step_end*1e3:.1f} ms at the end "
      f"only (their spread over the runs {100*spread:.1f} %, the noise of this figure)")
print("no peer: the same run checkpointing only at its end is the reference")
print(f"summary: async_ckpt_overhead={overhead:.4f} wait_per_step_ms={wait*1e3:.3f} "
      f"write_ms={write*1e3:.1f} checkpoints={ck[0][4]} runs={runs} parallel={par} cpu='{cpu}'")
PY
