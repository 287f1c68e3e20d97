#!/usr/bin/env bash
# bench/launch/fault_stress.sh: how often `dltune run` names the right rank when one rank is
# SIGKILLed while its peers wait in a PMIx fence, with the machine loaded (not a test: it
# measures a race, which needs many runs under load).
#
#   bash bench/launch/fault_stress.sh [BUILD_DIR] [RUNS] [RANKS] [HOGS]
#
# Defaults: build, 40 runs, 8 ranks, 4 busy-loop processes (2 per core on this machine) that
# run only while the runs do. The killed rank is always rank 2 (pmix_probe --fault
# kill-in-fence); its peers, released from the fence, exit with errors of their own, so under
# load they may be reaped before it. Last line:
#   summary: runs=N named_right=N named_wrong=N other=N max_s=T
set -euo pipefail
build=${1:-build}
runs=${2:-40}
ranks=${3:-8}
hogs=${4:-4}
dltune="$build/bin/dltune"
probe="$build/bin/pmix_probe"
for p in "$dltune" "$probe"; do
  [ -x "$p" ] || { echo "fault_stress: $p not built" >&2; exit 2; }
done

pids=()
cleanup() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq "$hogs"); do
  timeout 600 sh -c 'while :; do :; done' &
  pids+=($!)
done

host=$(hostname)
right=0 wrong=0 other=0 max_ms=0
for i in $(seq "$runs"); do
  t0=$(date +%s%N)
  set +e
  err=$(timeout 60 "$dltune" run -n "$ranks" -- "$probe" --fault kill-in-fence --fault-rank 2 \
    2>&1 >/dev/null)
  rc=$?
  set -e
  ms=$((($(date +%s%N) - t0) / 1000000))
  [ "$ms" -gt "$max_ms" ] && max_ms=$ms
  line=$(grep '^dltune run: ' <<<"$err" | head -1)
  if [ $rc -eq 1 ] && grep -q "rank 2 on $host was killed by signal 9" <<<"$line"; then
    right=$((right + 1))
  elif [ $rc -eq 1 ]; then
    wrong=$((wrong + 1))
    echo "run $i named another rank: $line"
  else
    other=$((other + 1))
    echo "run $i exited $rc: $line"
  fi
done
awk -v r="$runs" -v a="$right" -v w="$wrong" -v o="$other" -v m="$max_ms" 'BEGIN {
  printf "summary: runs=%d named_right=%d named_wrong=%d other=%d max_s=%.2f\n", r, a, w, o, m / 1000 }'
