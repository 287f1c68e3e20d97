#!/usr/bin/env bash
# A launcher killed with SIGKILL cannot remove its temporary directories; the next launch on
# the machine removes them (and only them: a live launcher's directory stays).
# Usage: stale_tmp_test.sh DLTUNE_BINARY
set -u
dltune=$1
tmp=$(mktemp -d)
trap 'kill -9 $live 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export TMPDIR=$tmp
live=0

# A launcher that stays alive (its directory must survive the sweep)...
"$dltune" run -n 1 -- sleep 30 &
live=$!
# ...and one that is killed with SIGKILL while its ranks run.
"$dltune" run -n 2 -- sleep 30 &
victim=$!
for i in $(seq 1 100); do
  [ "$(ls -d "$tmp"/dltune-run-* 2>/dev/null | wc -l)" -ge 2 ] && break
  sleep 0.1
done
[ "$(ls -d "$tmp"/dltune-run-* 2>/dev/null | wc -l)" -ge 2 ] || fail "the launchers made no temp dirs"
sleep 0.5
kill -9 $victim
wait $victim 2>/dev/null
sleep 0.5
[ "$(ls -d "$tmp"/dltune-run-* | wc -l)" -eq 2 ] || fail "expected the killed launcher's dir to remain for now"

# The next launch sweeps the dead launcher's directory, not the live one's.
"$dltune" run -n 1 -- true || fail "the sweeping launch failed"
left=$(ls -d "$tmp"/dltune-run-* 2>/dev/null | wc -l)
[ "$left" -eq 1 ] || fail "$left temp dirs left, expected only the live launcher's"
kill $live
wait $live 2>/dev/null
[ "$(ls -d "$tmp"/dltune-run-* 2>/dev/null | wc -l)" -eq 0 ] || fail "the live launcher did not clean up"
echo "stale temp dirs: all checks passed"
