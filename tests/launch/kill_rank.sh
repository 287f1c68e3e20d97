# shellcheck shell=bash
# Sourced by tests/launch/launch_test.sh, tests/launch/slurm_node_loss_test.sh and
# bench/launch/restart_bench.sh (not run on its own).
#
# newest_run_in RUNS_DIR: prints the newest run directory in RUNS_DIR (no trailing slash), nothing
# when there is none.
newest_run_in() { ls -dt "$1"/*/ 2>/dev/null | head -1 | sed 's|/$||'; }

# worker_pid RUN_DIR NAME=VALUE [OLD_PID]: prints the pid of RUN_DIR's `dltune-worker train`
# whose environment has NAME=VALUE (other than OLD_PID), nothing when there is none.
worker_pid() {
  local r=$1 var=$2 old=${3:-} p
  for p in $(pgrep -f "dltune-worker train --run-dir $r"); do
    [ "$p" = "$old" ] && continue
    if tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "$var"; then
      echo "$p"
      return
    fi
  done
}

# rank_pid RUN_DIR RANK [OLD_PID]: worker_pid of the rank whose PMIX_RANK is RANK.
rank_pid() { worker_pid "$1" "PMIX_RANK=$2" "${3:-}"; }

# wait_trained RUNS_DIR PREVIOUS_RUN STEPS: waits up to 120 s for a run directory in RUNS_DIR
# other than PREVIOUS_RUN (the newest before the launch started) to log STEPS steps with a
# checkpoint written, and prints it; returns 1 when none did in time.
wait_trained() {
  local r
  for _ in $(seq 1 1200); do
    r=$(newest_run_in "$1")
    if [ -n "$r" ] && [ "$r" != "$2" ] && [ -s "$r/checkpoints/checkpoint.bin" ] &&
       [ "$(grep -c '"event":"step"' "$r/metrics.jsonl" 2>/dev/null)" -ge "$3" ]; then
      echo "$r"
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# kill_rank_when_trained RUNS_DIR PREVIOUS_RUN RANK STEPS [SIGNAL]: once a new run has trained
# STEPS steps (wait_trained), sends SIGNAL (default KILL; STOP hangs the rank) to its
# `dltune-worker train` whose PMIX_RANK is RANK. Prints the signalled pid; returns 1
# (signalling nothing) when no such rank appeared in time.
kill_rank_when_trained() {
  local rank=$3 sig=${5:-KILL} r victim=
  r=$(wait_trained "$1" "$2" "$4") || return 1
  for _ in $(seq 1 1200); do
    victim=$(rank_pid "$r" "$rank")
    [ -n "$victim" ] && break
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
  kill_rank_when_started "$(newest_run_in "$1")" "$3" "$first" >/dev/null
}
