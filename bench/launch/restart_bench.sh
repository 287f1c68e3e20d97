#!/usr/bin/env bash
# bench/launch/restart_bench.sh: a job that loses a rank and continues by itself
# (launch.restarts, issue 40), against the same job uninterrupted (not a test: the suite's
# launch_test checks the behaviour; this measures it over several runs).
#
#   bash bench/launch/restart_bench.sh [BUILD_DIR] [RUNS] [RECIPE]
#
# Defaults: build, 3 runs, tests/launch/data/tiny.yaml (LeNet, 2 ranks, 80 steps, a checkpoint
# every 10). The plan is tuned once and cached first. Each run: `dltune launch RECIPE --no-tune
# --set launch.restarts=2`, rank 1 SIGKILLed after step 25 (a checkpoint written); the run must
# exit 0. Its final checkpoint is compared byte for byte with an uninterrupted run's, and the
# summary's restart gives the time from the failure to the first step after it (lost_s: the
# `dltune run` start-up, PMIx wire-up, the model and data built again, the checkpoint read).
# Last line:
#   summary: restart_completes=0|1 restart_same_shape_bitwise=0|1 restart_seconds=T (median)
#            restart_seconds_max=T restart_fewer_loss_rel=R runs=N
set -uo pipefail
build=${1:-build}
runs=${2:-3}
src=$(cd "$(dirname "$0")/../.." && pwd)
recipe=${3:-$src/tests/launch/data/tiny.yaml}
dltune="$build/bin/dltune"
[ -x "$dltune" ] || { echo "restart_bench: $dltune not built" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1 DLTUNE_SITE_DB=
# shellcheck source=tests/launch/kill_rank.sh
. "$src/tests/launch/kill_rank.sh"
newest_run() { ls -dt "$DLTUNE_RUNS_DIR"/*/ 2>/dev/null | head -1 | sed 's|/$||'; }

"$dltune" launch "$recipe" >"$tmp/tune.out" 2>&1 || { echo "tuning failed:"; cat "$tmp/tune.out"; exit 1; }
"$dltune" launch "$recipe" --no-tune >"$tmp/ref.out" 2>&1 || { echo "reference failed:"; cat "$tmp/ref.out"; exit 1; }
ref=$(newest_run)
completes=1 bitwise=1
lost=()
for i in $(seq 1 "$runs"); do
  prev=$(newest_run)
  "$dltune" launch "$recipe" --no-tune --set launch.restarts=2 >"$tmp/run$i.out" 2>&1 &
  pid=$!
  victim=$(kill_rank_when_trained "$DLTUNE_RUNS_DIR" "$prev" 1 25)
  if ! wait $pid || [ -z "$victim" ]; then
    completes=0
    echo "run $i: did not complete (victim '${victim}'):"
    tail -5 "$tmp/run$i.out"
    continue
  fi
  r=$(newest_run)
  cmp -s "$ref/checkpoints/checkpoint.bin" "$r/checkpoints/checkpoint.bin" || bitwise=0
  s=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['restarts']; print(r[0]['lost_s'] if len(r)==1 and r[0]['lost_s'] is not None else 'none', r[0]['from_step'] if r else '')" "$r/summary.json")
  echo "run $i: restarted from step ${s#* }, training again after ${s%% *} s"
  [ "${s%% *}" = none ] && completes=0 || lost+=("${s%% *}")
done
# On fewer ranks: rank 1 killed after step 25 and again as the restart starts it; with
# launch.min_ranks 1 the job finishes on 1 rank at the global batch kept. Its final loss against
# the uninterrupted 2-rank run's (restart_fewer_loss_rel, the goal <= 0.01).
prev=$(newest_run)
"$dltune" launch "$recipe" --no-tune --set launch.restarts=3 --set launch.min_ranks=1 \
  --set tune.restart_budget=0 >"$tmp/fewer.out" 2>&1 &
pid=$!
kill_rank_twice "$DLTUNE_RUNS_DIR" "$prev" 1 25
fewer_rel=nan
if wait $pid; then
  fewer_rel=$(python3 -c "
import json, sys
s, r = (json.load(open(d + '/summary.json')) for d in sys.argv[1:])
assert s['ranks'] == 1, 'finished on %d ranks' % s['ranks']
print('%.2e' % (abs(s['final_loss'] - r['final_loss']) / r['final_loss']))" "$(newest_run)" "$ref") ||
    fewer_rel=nan
else
  echo "fewer ranks: did not complete:"; tail -5 "$tmp/fewer.out"
fi
echo "fewer ranks: finished on 1 rank, final loss relative to the uninterrupted run's: $fewer_rel"
median=$(printf '%s\n' "${lost[@]:-}" | sort -g | awk '{a[NR]=$1} END{if(NR==0){print "nan"} else if(NR%2){print a[(NR+1)/2]} else {print (a[NR/2]+a[NR/2+1])/2}}')
max=$(printf '%s\n' "${lost[@]:-}" | sort -g | tail -1)
echo "no peer: each restarted run against the same job run uninterrupted in this bench (torchrun's"
echo "--max-restarts restarts from the program's own checkpoint, which is the program's to write)"
echo "summary: restart_completes=$completes restart_same_shape_bitwise=$bitwise restart_seconds=$median restart_seconds_max=${max:-nan} restart_fewer_loss_rel=$fewer_rel runs=$runs"
