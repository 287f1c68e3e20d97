#!/usr/bin/env bash
# CLI-level test of `dltune topo`: exit codes, the one-sentence errors, and the main outputs.
# Usage: cli_test.sh PATH/TO/dltune PATH/TO/topology/tests/data
set -u
dltune=$1
data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect CODE "STDERR LINE" -- ARGS...: runs dltune ARGS, checks the exit code and that stderr
# is exactly the one given line ("" = empty stderr).
expect() {
  local code=$1 err=$2
  shift 3
  "$dltune" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [[ $got -ne $code ]]; then
    echo "FAIL: dltune $* exited $got, want $code; stderr: $(cat "$tmp/err")"
    failures=$((failures + 1))
  elif [[ "$(cat "$tmp/err")" != "$err" ]]; then
    echo "FAIL: dltune $*: stderr"
    echo "  got:  $(cat "$tmp/err")"
    echo "  want: $err"
    failures=$((failures + 1))
  fi
}

# contains FILE TEXT: the output of the last command holds TEXT.
contains() {
  if ! grep -qF -- "$2" "$1"; then
    echo "FAIL: output lacks '$2':"
    cat "$1"
    failures=$((failures + 1))
  fi
}

lassen=$data/mpibind_coral-lassen.xml

# The live machine works and says plainly what it lacks.
expect 0 "" -- topo
contains "$tmp/out" "Placement:"
if ! grep -q "^GPUs: [0-9]" "$tmp/out"; then contains "$tmp/out" "GPUs: none"; fi

# An XML export: summary, matrix, placement; JSON; fingerprint.
expect 0 "" -- topo --xml "$lassen"
contains "$tmp/out" "GPU0     X     PIX    SYS    SYS    NODE   NODE   SYS    SYS    8-87          0"
contains "$tmp/out" "NIC Legend:"
contains "$tmp/out" "Placement: 4 local rank(s), one rank per GPU (default)"
expect 0 "" -- topo --xml "$lassen" --json
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["pus"]==160 and len(j["gpus"])==4, j' "$tmp/out" ||
  { echo "FAIL: --json output"; failures=$((failures + 1)); }
expect 0 "" -- topo --xml "$lassen" --fingerprint
if ! [[ "$(cat "$tmp/out")" =~ ^[0-9a-f]{64}$ ]]; then
  echo "FAIL: --fingerprint printed '$(cat "$tmp/out")'"
  failures=$((failures + 1))
fi
fp=$(cat "$tmp/out")
DLTUNE_TOPO_XML=$lassen expect 0 "" -- topo --fingerprint
[[ "$(cat "$tmp/out")" == "$fp" ]] || { echo "FAIL: DLTUNE_TOPO_XML not used"; failures=$((failures + 1)); }
# --export: hwloc's XML, which --xml reads back as the same machine (a launch over -H asks the
# first host for it); this machine's live export too.
DLTUNE_TOPO_XML=$lassen expect 0 "" -- topo --export
cp "$tmp/out" "$tmp/exported.xml"
expect 0 "" -- topo --xml "$tmp/exported.xml" --fingerprint
[[ "$(cat "$tmp/out")" == "$fp" ]] || { echo "FAIL: --export did not read back as lassen"; failures=$((failures + 1)); }
expect 0 "" -- topo --fingerprint
live_fp=$(cat "$tmp/out")
expect 0 "" -- topo --export
cp "$tmp/out" "$tmp/live.xml"
expect 0 "" -- topo --xml "$tmp/live.xml" --fingerprint
[[ "$(cat "$tmp/out")" == "$live_fp" ]] || { echo "FAIL: the live --export is another machine"; failures=$((failures + 1)); }
expect 0 "" -- topo --xml "$lassen" -n 3 --bind numa
contains "$tmp/out" "Placement: 3 local rank(s), 3 rank(s) on 4 GPU(s)"

# Bad input: exit 2 and one sentence.
expect 2 "dltune topo: topology file '$tmp/missing.xml' does not exist" -- topo --xml "$tmp/missing.xml"
printf 'not xml at all\n' >"$tmp/text.xml"
expect 2 "dltune topo: '$tmp/text.xml' is not an XML file: give an hwloc XML export such as \`lstopo --of xml\` writes" -- topo --xml "$tmp/text.xml"
: >"$tmp/empty.xml"
expect 2 "dltune topo: '$tmp/empty.xml' is empty: give an hwloc XML export such as \`lstopo --of xml\` writes" -- topo --xml "$tmp/empty.xml"
head -c 30000 "$lassen" >"$tmp/trunc.xml"
expect 2 "dltune topo: '$tmp/trunc.xml' is truncated: it ends before </topology>" -- topo --xml "$tmp/trunc.xml"
sed 's/<topology version="2.0">/<topology version="3.0">/' "$lassen" >"$tmp/v3.xml"
expect 2 "dltune topo: '$tmp/v3.xml' is an hwloc 3.0 export, which hwloc 2 (used by this dltune) cannot read: export it again with hwloc 2's lstopo" -- topo --xml "$tmp/v3.xml"
printf '<?xml version="1.0"?>\n<topology version="2.0">\n</topology>\n' >"$tmp/none.xml"
expect 2 "dltune topo: '$tmp/none.xml' describes an empty topology (no <object> element): export a whole machine with \`lstopo --of xml\`" -- topo --xml "$tmp/none.xml"
printf '<?xml version="1.0"?>\n<topology version="2.0">\n<object type="Machine" os_index="0" cpuset="0x0" complete_cpuset="0x0" allowed_cpuset="0x0" nodeset="0x0" complete_nodeset="0x0" allowed_nodeset="0x0" gp_index="1"/>\n</topology>\n' >"$tmp/nopu.xml"
expect 2 "dltune topo: '$tmp/nopu.xml' is not a valid hwloc XML export (hwloc rejected it: malformed, or no PU or NUMA node): export it again with \`lstopo --of xml\`" -- topo --xml "$tmp/nopu.xml"
# The reported crasher (libhwloc 2.9 dies of SIGSEGV on it): one sentence and exit 2, in-process,
# before hwloc sees it; and the same through DLTUNE_TOPO_XML.
crash=$data/hostile/machine-without-complete-cpuset.xml
expect 2 "dltune topo: '$crash' is not a valid hwloc XML export: line 3: the Machine object has no complete_cpuset attribute; export it again with \`lstopo --of xml\`" -- topo --xml "$crash"
DLTUNE_TOPO_XML=$crash expect 2 "dltune topo: DLTUNE_TOPO_XML: '$crash' is not a valid hwloc XML export: line 3: the Machine object has no complete_cpuset attribute; export it again with \`lstopo --of xml\`" -- topo
expect 2 "dltune topo: -n expects a number of local ranks from 1 to 4096, got '0'" -- topo --xml "$lassen" -n 0
expect 2 "dltune topo: -n expects a number of local ranks from 1 to 4096, got 'x'" -- topo --xml "$lassen" -n x
expect 2 "dltune topo: --bind: unknown binding 'socket': expected auto, core, numa or none" -- topo --xml "$lassen" --bind socket
expect 2 "dltune topo: --json, --fingerprint and --export exclude each other: give one of them" -- topo --json --fingerprint
expect 2 "dltune topo: --json, --fingerprint and --export exclude each other: give one of them" -- topo --export --json
DLTUNE_TOPO_XML=$tmp/missing.xml expect 2 "dltune topo: DLTUNE_TOPO_XML: topology file '$tmp/missing.xml' does not exist" -- topo

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all dltune topo CLI checks passed"
