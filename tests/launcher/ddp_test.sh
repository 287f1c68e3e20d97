#!/usr/bin/env bash
# A PyTorch DDP (gloo) script, unchanged, under `dltune run`: 2 ranks with the local backend
# (MODE local), or 2 ranks on the 2 nodes of the test Slurm cluster (MODE slurm,
# tests/slurm/cluster.sh). The ranks rendezvous through env:// with the variables dltune gives
# them and must end with identical parameters. Exit 77 (skip, with the reason) without
# python3-torch, or without Slurm / munge / root for MODE slurm.
# Usage: ddp_test.sh local|slurm DLTUNE_BINARY
set -u
mode=$1
dltune=$2
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
script=$here/ddp_gloo.py
python=/usr/bin/python3  # Debian's, which python3-torch installs into
fail() { echo "FAIL: $*"; exit 1; }
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "SKIP: python3-torch is not installed (apt-get install python3-torch; bash scripts/bootstrap.sh test installs it)"
  exit 77
fi
tmp=$(mktemp -d)
cluster=$tmp/cluster
cleanup() { [ -d "$cluster" ] && bash "$src/tests/slurm/cluster.sh" stop "$cluster" >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT

check() {  # check OUTPUT_FILE: both ranks' lines, one rendezvous, identical parameters
  local out=$1
  grep -q "^ddp rank=0/2 " "$out" || fail "no line from rank 0: $(cat "$out")"
  grep -q "^ddp rank=1/2 " "$out" || fail "no line from rank 1: $(cat "$out")"
  [ "$(grep '^ddp rank=' "$out" | sed 's/.*master=\([^ ]*\).*/\1/' | sort -u | wc -l)" -eq 1 ] ||
    fail "the ranks saw different MASTER_ADDR:MASTER_PORT: $(cat "$out")"
  grep -q "^ddp ok: 2 ranks ended with identical parameters" "$out" || fail "DDP: $(cat "$out")"
}

case "$mode" in
  local)
    timeout 240 "$dltune" run -n 2 --backend local -- "$python" "$script" >"$tmp/out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail "dltune run -n 2 exited $rc: $(cat "$tmp/out")"
    check "$tmp/out"
    grep -q "^ddp rank=1/2 local=1/2 group=0 " "$tmp/out" || fail "local ranks: $(cat "$tmp/out")"
    ;;
  slurm)
    bash "$src/tests/slurm/cluster.sh" start "$cluster" 2 2
    rc=$?
    [ $rc -eq 77 ] && { echo "SKIP: the Slurm test cluster cannot start here"; exit 77; }
    [ $rc -eq 0 ] || fail "cluster.sh start exited $rc"
    # shellcheck disable=SC1091
    source "$cluster/env.sh"
    timeout 240 salloc --quiet -N 2 -n 2 "$dltune" run --backend slurm -- "$python" "$script" \
      >"$tmp/out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail "dltune run under salloc -N 2 exited $rc: $(cat "$tmp/out")"
    check "$tmp/out"
    grep -q "^ddp rank=0/2 local=0/1 group=0 .* node=n1 " "$tmp/out" || fail "rank 0: $(cat "$tmp/out")"
    grep -q "^ddp rank=1/2 local=0/1 group=1 .* node=n2 " "$tmp/out" || fail "rank 1: $(cat "$tmp/out")"
    ;;
  *) echo "usage: ddp_test.sh local|slurm DLTUNE_BINARY" >&2; exit 2 ;;
esac
cat "$tmp/out"
echo "ddp ($mode): all checks passed"
