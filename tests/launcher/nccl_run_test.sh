#!/usr/bin/env bash
# A 1-rank NCCL communicator bootstrapped over PMIx by `dltune run` (the embedded PMIx server):
# the probe exchanges NCCL's unique id through the Bootstrap, creates the communicator on its
# GPU and checks an allreduce and a broadcast, once with NCCL's own choice and once with a
# forced algorithm/protocol. Skips (exit 77) without a CUDA device or without NCCL.
# Usage: nccl_run_test.sh DLTUNE_BINARY NCCL_PROBE_BINARY [RANKS]
set -u
dltune=$1
probe=$2
ranks=${3:-1}
fail() { echo "FAIL: $*"; exit 1; }

reason=$("$probe" --check-device 2>&1)
rc=$?
if [ $rc -eq 77 ]; then
  echo "SKIPPED: ${reason#SKIP: }"
  exit 77
fi
[ $rc -eq 0 ] || fail "the probe's device check failed (exit $rc): $reason"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for choice in nccl nccl:ring/simple; do
  timeout 120 "$dltune" run -n "$ranks" -- "$probe" --choice "$choice" --count 1000003 \
    >"$out" 2>&1
  rc=$?
  cat "$out"
  [ $rc -eq 0 ] || fail "dltune run -n $ranks of the NCCL probe ($choice) exited $rc"
  n=$(grep -c "^nccl probe rank=.* size=$ranks .*choice=$choice .*: ok" "$out")
  [ "$n" -eq "$ranks" ] || fail "$n of $ranks ranks reported ok for $choice"
done
echo "nccl run: all checks passed ($ranks rank(s))"
