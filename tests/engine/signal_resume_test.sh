#!/usr/bin/env bash
# A 2-rank MPI training job stopped by SIGTERM mid-run, then resumed, ends with exactly the
# checkpoint (parameters, momentum, step) of an uninterrupted run, and one continuous
# metrics.jsonl. SIGTERM goes to ONE rank only: the other must agree to stop after the same step
# (else it would wait forever in the next gradient allreduce and the test would time out).
# Then a job whose loss turns NaN: it ends with exit 2 and one report of the divergence.
#
# usage: signal_resume_test.sh MPIRUN WORKER
set -euo pipefail
MPIRUN=$1
WORKER=$2
DIR=$(mktemp -d /tmp/dltune-signal-test.XXXXXX)
MPI_PID=
cleanup() {
  if [[ -n $MPI_PID ]] && kill -0 "$MPI_PID" 2>/dev/null; then kill -KILL "$MPI_PID" || true; fi
  rm -rf "$DIR"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
run() { "$MPIRUN" --allow-run-as-root --oversubscribe --mca pml ob1 -np 2 "$WORKER" train "$@"; }

STEPS=150
# The recipe and the plan, as `dltune launch` hands them to its ranks (here as files: mpirun
# has no dltune job data): lenet on synthetic digits, 32 samples per rank.
recipe() {  # LR STEPS
  cat <<EOF
name: signal
model: lenet5
data: {kind: synthetic-digits, samples: 2048, heldout: 0}
training:
  steps: $2
  checkpoint_every: $2
  batch: {per_rank: 32}
  scaling: weak
  optimizer: {kind: sgd, lr: $1, momentum: 0.9, weight_decay: 0.0005}
  seed: 7
EOF
}
recipe 0.02 "$STEPS" >"$DIR/recipe.yaml"
cat >"$DIR/plan.json" <<EOF
{"version": 1,
 "collectives": {"allreduce": [{"min_bytes": 0, "max_bytes": 18446744073709551615,
                                "algo": "ring", "segment_bytes": 0}]},
 "training": {"per_rank_batch": 32, "global_batch": 64, "scaling": "weak",
              "bucket_bytes": 65536},
 "job": {"nodes": 1, "ranks_per_node": 2}}
EOF

# 1. Uninterrupted reference.
run --recipe "$DIR/recipe.yaml" --plan "$DIR/plan.json" --checkpoint "$DIR/ref.ckpt" --metrics "$DIR/ref.jsonl" \
  >"$DIR/ref.out" 2>&1 || { cat "$DIR/ref.out"; fail "the reference run failed"; }

# 2. The same job, SIGTERM to one rank once it is 10 steps in.
"$MPIRUN" --allow-run-as-root --oversubscribe --mca pml ob1 -np 2 "$WORKER" train \
  --recipe "$DIR/recipe.yaml" --plan "$DIR/plan.json" --checkpoint "$DIR/run.ckpt" \
  --metrics "$DIR/run.jsonl" >"$DIR/run.out" 2>&1 &
MPI_PID=$!  # mpirun itself: the ranks are its children
for _ in $(seq 600); do
  [[ -f $DIR/run.jsonl ]] && (($(grep -c '"event":"step"' "$DIR/run.jsonl") >= 10)) && break
  sleep 0.05
done
RANKS=$(pgrep -P "$MPI_PID" || true)
[[ $(wc -w <<<"$RANKS") -eq 2 ]] || fail "expected 2 rank processes under mpirun, got '$RANKS'"
kill -TERM "$(head -n1 <<<"$RANKS")"
set +e
wait "$MPI_PID"
RC=$?
set -e
MPI_PID=
[[ $RC -eq 143 ]] || { cat "$DIR/run.out"; fail "stopped job exited $RC, expected 143"; }
STOPPED=$(grep -c '"event":"step"' "$DIR/run.jsonl")
((STOPPED < STEPS)) || fail "the job was not stopped early ($STOPPED steps)"
[[ -f $DIR/run.ckpt ]] || fail "no checkpoint after the stop"
grep -aqE "\"step\":$STOPPED[,}]" "$DIR/run.ckpt" || fail "checkpoint is not at step $STOPPED"

# 3. Resume to the end: same checkpoint bytes as the reference, one continuous metrics file.
run --recipe "$DIR/recipe.yaml" --plan "$DIR/plan.json" --checkpoint "$DIR/run.ckpt" --metrics "$DIR/run.jsonl" \
  --resume "$DIR/run.ckpt" >"$DIR/resume.out" 2>&1 || {
  cat "$DIR/resume.out"
  fail "the resumed run failed"
}
cmp -s "$DIR/ref.ckpt" "$DIR/run.ckpt" || fail "resumed checkpoint differs from the reference"
steps_of() { grep -o '"event":"step".*' "$1" | grep -o '"step":[0-9]*' | cut -d: -f2 | tr '\n' ' '; }
[[ $(steps_of "$DIR/run.jsonl") == "$(steps_of "$DIR/ref.jsonl")" ]] ||
  fail "metrics steps differ: $(steps_of "$DIR/run.jsonl")"

# 4. A learning rate that makes the loss NaN: both ranks stop at the same step with exit 2, and
# the error is said once (by rank 0), not once per rank.
recipe 1e20 40 >"$DIR/hot.yaml"
set +e
run --recipe "$DIR/hot.yaml" --plan "$DIR/plan.json" >"$DIR/hot.out" 2>&1
RC=$?
set -e
[[ $RC -eq 2 ]] || { cat "$DIR/hot.out"; fail "the diverging job exited $RC, expected 2"; }
N=$(grep -c "training diverged: " "$DIR/hot.out" || true)
[[ $N -eq 1 ]] || { cat "$DIR/hot.out"; fail "the divergence was reported $N times, expected once"; }
echo "PASS: stopped after step $STOPPED of $STEPS (exit 143), resumed to the reference checkpoint;"
echo "      a diverging job exits 2 with one report"
