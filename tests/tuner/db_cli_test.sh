#!/usr/bin/env bash
# `dltune db` end to end through the real binary: show / export / import / merge / prune / rules /
# lookup, exit codes (0 ok, 2 bad input), and that a rejected import leaves the database as it was.
# Usage: db_cli_test.sh PATH_TO_DLTUNE
set -euo pipefail
dltune=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/dltune_db_cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
export XDG_DATA_HOME=$work/xdg DLTUNE_DB= DLTUNE_SITE_DB=
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() {  # expect_rc CODE CMD...: runs CMD, checks its exit code, keeps stderr in $work/err
  local want=$1; shift
  set +e; "$@" >"$work/out" 2>"$work/err"; local rc=$?; set -e
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want: $(cat "$work/err")"
}
plan='{"version":1,"collectives":{"allreduce":[{"min_bytes":0,"max_bytes":4096,"algo":"rd","segment_bytes":0},{"min_bytes":4096,"max_bytes":18446744073709551615,"algo":"hier","segment_bytes":0}]},"training":{"per_rank_batch":1,"global_batch":2,"scaling":"weak"},"job":{"nodes":1,"ranks_per_node":2}}'

# A bundle made by hand (as another site would send it), with a correct checksum.
python3 - "$work/site.json" "$plan" <<'PY'
import hashlib, json, sys
key = {"fingerprint": "ab12", "family": "fa11", "versions": {"mpi": "4.1.4", "pmix": "4.2.2",
       "nccl": "", "dltune": "0.1.0"}, "nodes": 1, "ranks_per_node": 2, "recipe": ""}
prov = {"site": "siteA", "host": "h1", "user": "u", "dltune_version": "0.1.0",
        "created_at": 1700000000}
content = {"plans": [{"key": key, "plan_json": sys.argv[2], "provenance": prov}],
           "measurements": [{"key": key, "collective": "allreduce", "algorithm": "rd",
                             "segment_bytes": 0, "bytes": 8, "median_us": 1.5, "p10_us": 1.2,
                             "p90_us": 2.0, "iqr_us": 0.3, "samples": 30, "failed": False,
                             "reason": "", "provenance": prov}]}
bundle = {"format": "dltune-tuning-bundle", "format_version": 3, "provenance": prov,
          "content": content}
# Format 3: the checksum covers everything but itself (the exporter's provenance too).
canon = json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
bundle["checksum"] = {"algorithm": "sha256", "value": hashlib.sha256(canon.encode()).hexdigest()}
open(sys.argv[1], "w").write(json.dumps(bundle, indent=1))
PY

expect_rc 0 "$dltune" db show
grep -q "does not exist yet" "$work/out" || fail "show on a fresh machine: $(cat "$work/out")"
[ ! -e "$XDG_DATA_HOME/dltune/dltune.db" ] || fail "show created the user database"

expect_rc 0 "$dltune" db import "$work/site.json"
grep -q "plans 1 added" "$work/out" || fail "first import: $(cat "$work/out")"
expect_rc 0 "$dltune" db import "$work/site.json" --policy prefer-newer
grep -q "plans 0 added, 0 replaced, 1 unchanged" "$work/out" || fail "second import: $(cat "$work/out")"
expect_rc 0 "$dltune" db show --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["plans"][0]["site"]=="siteA", d' "$work/out"

# Rejections: exit 2, one line naming the file, database unchanged.
before=$(sha256sum "$XDG_DATA_HOME/dltune/dltune.db" | cut -d' ' -f1)
head -c 300 "$work/site.json" >"$work/trunc.json"
sed 's/"median_us": 1.5/"median_us": 9.5/' "$work/site.json" >"$work/tampered.json"
for bad in trunc tampered; do
  expect_rc 2 "$dltune" db import "$work/$bad.json"
  grep -q "^dltune db import: .*$bad.json" "$work/err" || fail "$bad: $(cat "$work/err")"
  [ "$(wc -l <"$work/err")" = 1 ] || fail "$bad: more than one line: $(cat "$work/err")"
done
expect_rc 2 "$dltune" db import "$work/site.json" --policy whatever
expect_rc 2 "$dltune" db import "$work/missing.json"
after=$(sha256sum "$XDG_DATA_HOME/dltune/dltune.db" | cut -d' ' -f1)
[ "$before" = "$after" ] || fail "a rejected import changed the database"

# Export round trip into a second database through merge.
expect_rc 0 "$dltune" db export -o "$work/out.json" --site siteB
expect_rc 0 "$dltune" db merge -o "$work/merged.db" "$work/out.json" "$work/site.json"
grep -q "plans 1 added, 0 replaced, 1 unchanged" "$work/out" || fail "merge: $(cat "$work/out")"

# Layered look-up: the merged database as a site database.
DLTUNE_SITE_DB=$work/merged.db expect_rc 0 "$dltune" db lookup --db "$work/none.db" \
  --fingerprint ab12 --family fa11 --shape 1x2 --mpi 4.1.4 --pmix 4.2.2 --json
grep -q '"hit":"exact"' "$work/out" || fail "lookup: $(cat "$work/out")"
grep -q '"layer":"site"' "$work/out" || fail "lookup layer: $(cat "$work/out")"
expect_rc 0 "$dltune" db lookup --fingerprint ab12 --family fa11 --shape 2x2 --mpi 4.1.4 --pmix 4.2.2
grep -q "^near hit in user database" "$work/out" || fail "near: $(cat "$work/out")"
expect_rc 2 "$dltune" db lookup --fingerprint "ab'--" --shape 1x2

# Rules for the stored plan: hier has no Open MPI equivalent, which is said.
expect_rc 0 "$dltune" db rules --format ompi --shape 1x2 -o "$work/rules.txt"
grep -q "note: allreduce: hier" "$work/err" || fail "rules note: $(cat "$work/err")"
grep -q "^4096 6 0 0" "$work/rules.txt" || fail "rules: $(cat "$work/rules.txt")"
expect_rc 2 "$dltune" db rules --format bogus --shape 1x2
expect_rc 2 "$dltune" db rules --shape 7x7
# Every job size at once (no --shape), and the other runtimes' formats.
expect_rc 0 "$dltune" db rules --format ompi -o "$work/all.txt"
grep -q "^2 # comm size" "$work/all.txt" || fail "rules for every size: $(cat "$work/all.txt")"
grep -q "from the 1x2 plan from" "$work/err" || fail "rules source: $(cat "$work/err")"
expect_rc 0 "$dltune" db rules --format mpich -o "$work/mpich.json"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert "collective=allreduce" in j, j' \
  "$work/mpich.json" || fail "mpich rules: $(cat "$work/mpich.json")"
expect_rc 0 "$dltune" db rules --format mvapich --shape 1x2
grep -qx "export MV2_INTER_ALLREDUCE_TUNING='1:0-4095,2:4096-+'" "$work/out" ||
  fail "mvapich rules: $(cat "$work/out")"
expect_rc 2 "$dltune" db rules --format mvapich
grep -q "shape is required" "$work/err" || fail "mvapich without --shape: $(cat "$work/err")"
expect_rc 2 "$dltune" db rules --format nccl-env --shape 1x2  # the plan names no NCCL algorithm

# Prune.
expect_rc 2 "$dltune" db prune
expect_rc 2 "$dltune" db prune --older-than 3x
expect_rc 0 "$dltune" db prune --older-than 1d
grep -q "pruned 2 rows" "$work/out" || fail "prune: $(cat "$work/out")"
echo "db_cli_test: all passed"
