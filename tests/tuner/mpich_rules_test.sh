#!/usr/bin/env bash
# `dltune db rules --format mpich` accepted by a real MPICH (Debian's mpich, installed beside
# Open MPI without taking its mpirun/mpicc alternatives): the selection file for every job shape
# of the database, given to MPICH through MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE, runs every
# collective family at 2, 3 and 4 ranks (MPICH asserts when one finds no algorithm); a file
# with an algorithm MPICH does not know is refused, so the file is really read.
# Exit 77 (skip) where MPICH is not installed.
# Usage: mpich_rules_test.sh DLTUNE_BINARY MPICH_COLLS_SOURCE
set -u
dltune=$1
source_c=$2
fail() { echo "FAIL: $*"; exit 1; }
if ! command -v mpicc.mpich >/dev/null || ! command -v mpiexec.mpich >/dev/null; then
  echo "SKIP: MPICH is not installed (apt-get install mpich libmpich-dev)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/dltune_mpich.XXXXXX")
trap 'rm -rf "$work"' EXIT
export XDG_DATA_HOME=$work/xdg DLTUNE_DB= DLTUNE_SITE_DB=

# Two plans, for 2 and 4 ranks, as a bundle another site would send.
python3 - "$work/plans.json" <<'PY'
import hashlib, json, sys
M = 18446744073709551615
def plan(nodes, rpn, colls, t):
    key = {"fingerprint": "ab12", "family": "fa11", "versions": {"mpi": "4.0.2", "pmix": "",
           "nccl": "", "dltune": "0.1.0"}, "nodes": nodes, "ranks_per_node": rpn, "recipe": ""}
    prov = {"site": "s", "host": "h", "user": "u", "dltune_version": "0.1.0", "created_at": t}
    # A whole plan (the database refuses less): the collectives, a training and the job shape.
    body = {"version": 1, "collectives": colls, "job": {"nodes": nodes, "ranks_per_node": rpn},
            "training": {"per_rank_batch": 1, "global_batch": nodes * rpn, "scaling": "weak"}}
    return {"key": key, "plan_json": json.dumps(body), "provenance": prov}
r = lambda lo, hi, a: {"min_bytes": lo, "max_bytes": hi, "algo": a, "segment_bytes": 0}
content = {"plans": [
    plan(1, 2, {"allreduce": [r(0, 4096, "rd"), r(4096, M, "rabenseifner")],
                "broadcast": [r(0, M, "ring")], "allgather": [r(0, M, "rd")]}, 1700000000),
    plan(1, 4, {"allreduce": [r(0, 65536, "hier"), r(65536, M, "ring")],
                "broadcast": [r(0, 8192, "tree"), r(8192, M, "rabenseifner")]}, 1700000001)],
    "measurements": []}
prov = {"site": "s", "host": "h", "user": "u", "dltune_version": "0.1.0", "created_at": 1700000002}
bundle = {"format": "dltune-tuning-bundle", "format_version": 3, "provenance": prov,
          "content": content}
canon = json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
bundle["checksum"] = {"algorithm": "sha256", "value": hashlib.sha256(canon.encode()).hexdigest()}
open(sys.argv[1], "w").write(json.dumps(bundle))
PY
"$dltune" db import "$work/plans.json" >/dev/null || fail "import"
"$dltune" db rules --format mpich -o "$work/all.json" 2>"$work/err" ||
  fail "db rules --format mpich: $(cat "$work/err")"
grep -q '"comm_size<4"' "$work/all.json" || fail "not every job size: $(cat "$work/all.json")"
"$dltune" db rules --format mpich --shape 1x2 -o "$work/one.json" 2>"$work/err" ||
  fail "db rules --format mpich --shape 1x2: $(cat "$work/err")"

mpicc.mpich -O1 -o "$work/colls" "$source_c" || fail "mpicc.mpich"
for rules in all one; do
  for n in 2 3 4; do
    MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE=$work/$rules.json timeout 60 \
      mpiexec.mpich -n $n "$work/colls" >"$work/out" 2>&1 ||
      fail "MPICH with $rules.json at $n ranks: $(head -c 3000 "$work/out")"
    grep -q "mpich colls ok size=$n" "$work/out" || fail "$rules.json, $n ranks: $(cat "$work/out")"
  done
done
# The negative control: MPICH reads the file, and refuses an algorithm it does not have.
sed 's/MPIR_Allreduce_intra_recursive_doubling/MPIR_Allreduce_intra_no_such_thing/' \
  "$work/all.json" >"$work/bad.json"
MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE=$work/bad.json timeout 60 \
  mpiexec.mpich -n 2 "$work/colls" >"$work/out" 2>&1 && fail "MPICH accepted an unknown algorithm"
grep -q "unrecognized key" "$work/out" || fail "the bad file failed otherwise: $(head -c 2000 "$work/out")"
echo "mpich rules: accepted by $(mpichversion 2>/dev/null | head -1 | tr -s ' ')"
