#!/usr/bin/env bash
# A node whose /dev/shm is too small for the gradients (a Docker container's default is 64 MiB):
# node-shared memory is refused with a clear error instead of a SIGBUS at the first write past
# the tmpfs's end, and the engine trains with its gradients in private memory registered with
# the node's ranks (comm/registration.h, which 'shm' reduces in place as 'cma' does). Where cross-memory
# attach is off too, the launch fails and says both. Runs in a mount namespace of its own with
# a 256 KiB tmpfs on /dev/shm; skips (77) where namespaces cannot be made.
# Usage: small_shm_test.sh DLTUNE_BINARY BENCH_RANK_BINARY
set -u
dltune=$1
bench=$2
if [ "${DLTUNE_IN_SMALL_SHM:-}" != 1 ]; then
  if ! unshare -m true 2>/dev/null; then
    echo "SKIP: cannot create a mount namespace (unshare -m) here"
    exit 77
  fi
  exec env DLTUNE_IN_SMALL_SHM=1 unshare -m "$0" "$@"
fi
mount -t tmpfs -o size=256k tmpfs /dev/shm || { echo "SKIP: cannot mount a tmpfs on /dev/shm"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export DLTUNE_DB=$tmp/db.sqlite DLTUNE_RUNS_DIR=$tmp/runs DLTUNE_NO_PROGRESS=1 DLTUNE_SITE_DB=

# 1. The shm allreduce's 16 MiB per rank: an error naming /dev/shm's size, not a SIGBUS (135).
"$bench" --threads 2 --algo shm --min-bytes 16MiB --max-bytes 16MiB --rounds 3 >"$tmp/b" 2>&1
rc=$?
[ $rc = 1 ] || fail "bench exited $rc (135 is the SIGBUS this test guards against): $(cat "$tmp/b")"
grep -q "No space left on device; /dev/shm is too small (256 KiB" "$tmp/b" ||
  fail "no clear message: $(cat "$tmp/b")"
echo "1. the node-shared segment refused: $(grep -o '/dev/shm is too small[^:]*' "$tmp/b" | head -1)"

# 2. The quickstart trains on 2 ranks with its 1.6 MiB of gradients in registered memory.
"$dltune" launch quickstart -n 2 --no-tune >"$tmp/out" 2>"$tmp/err" ||
  fail "launch exited $?: $(tail -20 "$tmp/err" "$tmp/out")"
grep -q "the gradients are in private memory registered with the node's ranks" "$tmp/err" ||
  fail "no word of registered gradients: $(grep -v vader "$tmp/err" | tail -20)"
run=$(ls -dt "$DLTUNE_RUNS_DIR"/*/ | head -1)
python3 - "$run/summary.json" <<'PY' || fail "summary"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["ranks"] == 2 and s["steps"] == 300, (s["ranks"], s["steps"])
assert s["heldout_accuracy"] >= 0.95, s["heldout_accuracy"]
PY
echo "2. trained on registered gradients: $(grep -o 'throughput .*' "$tmp/out" | head -1)"

# 3. Cross-memory attach off as well: nothing to fall back on; the error says both.
DLTUNE_COMM_CMA=off "$dltune" launch quickstart -n 2 --no-tune >"$tmp/out3" 2>"$tmp/err3"
rc=$?
[ $rc != 0 ] && [ $rc != 135 ] || fail "launch without cma exited $rc"
grep -q "/dev/shm is too small" "$tmp/err3" && grep -q "registering private memory instead" "$tmp/err3" ||
  fail "the error does not say why: $(grep -v vader "$tmp/err3" | tail -10)"
echo "3. without cross-memory attach: exit $rc, $(grep -o 'registering private memory instead: [^)]*' "$tmp/err3" | head -1)"
echo PASS
