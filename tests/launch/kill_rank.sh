# shellcheck shell=bash
# Sourced by tests/launch/launch_test.sh and bench/launch/restart_bench.sh (not run on its own).
#
# rank_pid RUN_DIR RANK [OLD_PID]: prints the pid of RUN_DIR's `dltune-worker train` whose
# PMIX_RANK is RANK (other than OLD_PID), nothing when there is none.
rank_pid() {
  local r=$1 rank=$2 old=${3:-} p
  for p in $(pgrep -f "dltune-worker train --run-dir $r"); do
    [ "$p" = "$old" ] && continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMIX_RANK=$rank"; then
      echo "$p"
      return
    fi
  done
}

# kill_rank_when_trained RUNS_DIR PREVIOUS_RUN RANK STEPS [SIGNAL]: waits up to 120 s for a run
# directory in RUNS_DIR other than PREVIOUS_RUN (the newest before the launch started) to log
# STEPS steps with a checkpoint written, then sends SIGNAL (default KILL; STOP hangs the rank)
# to that run's `dltune-worker train` whose PMIX_RANK is RANK. Prints the signalled pid;
# returns 1 (signalling nothing) when no such rank appeared in time.
kill_rank_when_trained() {
  local runs=$1 previous=$2 rank=$3 steps=$4 sig=${5:-KILL} r victim=
  for _ in $(seq 1 1200); do
    r=$(ls -dt "$runs"/*/ 2>/dev/null | head -1 | sed 's|/$||')
    if [ -n "$r" ] && [ "$r" != "$previous" ] && [ -s "$r/checkpoints/checkpoint.bin" ] &&
       [ "$(grep -c '"event":"step"' "$r/metrics.jsonl" 2>/dev/null)" -ge "$steps" ]; then
      victim=$(rank_pid "$r" "$rank")
      [ -n "$victim" ] && break
    fi
    sleep 0.1
  done
  [ -n "$victim" ] || return 1
  kill -"$sig" "$victim"
  echo "$victim"
}

# kill_rank_when_started RUN_DIR RANK OLD_PID: waits up to 60 s for RUN_DIR's `dltune-worker
# train` whose PMIX_RANK is RANK and whose pid is not OLD_PID (the rank of a restarted attempt,
# as soon as it runs, before or while it loads the checkpoint), then SIGKILLs it. Prints the
# killed pid; returns 1 when none appeared in time.
kill_rank_when_started() {
  local victim=
  for _ in $(seq 1 3000); do
    victim=$(rank_pid "$1" "$2" "$3")
    [ -n "$victim" ] && break
    sleep 0.02
  done
  [ -n "$victim" ] || return 1
  kill -9 "$victim"
  echo "$victim"
}

# kill_rank_twice RUNS_DIR PREVIOUS_RUN RANK STEPS: SIGKILLs RANK of the new run after STEPS
# steps (kill_rank_when_trained), then again as soon as the restarted attempt starts it (a
# failure during the restart). Returns 1 when either rank did not appear in time.
kill_rank_twice() {
  local first
  first=$(kill_rank_when_trained "$1" "$2" "$3" "$4") || return 1
  kill_rank_when_started "$(ls -dt "$1"/*/ | head -1 | sed 's|/$||')" "$3" "$first" >/dev/null
}
