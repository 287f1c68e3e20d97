# shellcheck shell=bash
# Sourced by tests/launch/launch_test.sh and bench/launch/restart_bench.sh (not run on its own).
#
# kill_rank_when_trained RUNS_DIR PREVIOUS_RUN RANK STEPS: waits up to 120 s for a run directory
# in RUNS_DIR other than PREVIOUS_RUN (the newest before the launch started) to log STEPS steps
# with a checkpoint written, then SIGKILLs that run's `dltune-worker train` whose PMIX_RANK is
# RANK. Prints the killed pid; returns 1 (killing nothing) when no such rank appeared in time.
kill_rank_when_trained() {
  local runs=$1 previous=$2 rank=$3 steps=$4 r p victim=
  for _ in $(seq 1 1200); do
    r=$(ls -dt "$runs"/*/ 2>/dev/null | head -1 | sed 's|/$||')
    if [ -n "$r" ] && [ "$r" != "$previous" ] && [ -s "$r/checkpoints/checkpoint.bin" ] &&
       [ "$(grep -c '"event":"step"' "$r/metrics.jsonl" 2>/dev/null)" -ge "$steps" ]; then
      for p in $(pgrep -f "dltune-worker train --run-dir $r"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMIX_RANK=$rank"; then victim=$p; fi
      done
      [ -n "$victim" ] && break
    fi
    sleep 0.1
  done
  [ -n "$victim" ] || return 1
  kill -9 "$victim"
  echo "$victim"
}
