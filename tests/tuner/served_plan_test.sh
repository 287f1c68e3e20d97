#!/usr/bin/env bash
# What a launch and `dltune tune` do with hostile databases (issue 43), end to end through the
# real binary, each reproducer as the issue writes it: a site database with a negative schema
# number skipped with one warning (it hung every launch); an unsigned plan whose lr scale the
# recipe's rule would not give never served, and a served unsigned plan saying so; a plan's
# escape codes never reaching the terminal; recipes with a second YAML document, `!!str 5`
# or tune.budget 1e308 refused; `tune` refusing a read-only or newer-schema database before it
# measures; a killed `tune --collectives` leaving no /tmp/dltune-tune-* and no ranks behind.
# Every command runs under `timeout` so that a regression cannot hang CI.
# Usage: served_plan_test.sh PATH_TO_DLTUNE
set -euo pipefail
dltune=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/dltune_served.XXXXXX")
chmod 0755 "$work"
mkdir -p "$work/tmp"
cleanup() {
  [ -n "${tune_pid:-}" ] && kill -KILL "$tune_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export XDG_DATA_HOME=$work/xdg DLTUNE_DB= DLTUNE_SITE_DB= DLTUNE_TRUSTED_KEYS= \
  DLTUNE_RUNS_DIR=$work/runs TMPDIR=$work/tmp
user_db=$XDG_DATA_HOME/dltune/dltune.db
# KEEP_GOING=1 reports every failing check instead of stopping at the first (to see which
# reproducers a build without a fix fails).
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
  [ -n "${KEEP_GOING:-}" ] || exit 1
}
expect_rc() {  # expect_rc CODE SECONDS CMD...: runs CMD under a timeout; output in $work/out, err
  local want=$1 limit=$2; shift 2
  set +e; timeout "$limit" "$@" >"$work/out" 2>"$work/err"; local rc=$?; set -e
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want: $(cat "$work/err" "$work/out")"
}
no_escapes() {  # nothing a terminal would act on (ESC, BEL, NUL, C1 as UTF-8) in FILE...
  if python3 - "$@" <<'PY'
import re, sys
for f in sys.argv[1:]:
    if re.search(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]", open(f, "rb").read()):
        sys.exit(0)
sys.exit(1)
PY
  then fail "control characters reached the terminal: $(cat -v "$@")"; fi
}
sql() { python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()' "$@"; }
report() { echo "| $1 | $2 | $(head -c 300 "$3" | tr '\n' ' ') |"; }
echo "| reproducer | exit | message |"
echo "|---|---|---|"

# ---- 1. sqlite3 x.db 'PRAGMA user_version=-1'; DLTUNE_SITE_DB=$PWD/x.db dltune launch
# quickstart --dry-run: ran until killed; now one warning naming the file, exit 0.
sql "$work/x.db" "PRAGMA user_version=-1"
start=$(date +%s)
DLTUNE_SITE_DB=$work/x.db expect_rc 0 60 "$dltune" launch quickstart --dry-run
took=$(( $(date +%s) - start ))
cat "$work/out" "$work/err" >"$work/all"
[ "$(grep -c "$work/x.db" "$work/all")" = 1 ] || fail "not one warning naming x.db: $(cat "$work/all")"
grep -q "site database skipped: '$work/x.db' has database schema version -1, which no dltune writes" "$work/all" ||
  fail "the warning: $(cat "$work/all")"
grep -q "^dry run: nothing is started" "$work/out" || fail "no dry run: $(cat "$work/out")"
report "DLTUNE_SITE_DB=x.db (user_version -1) dltune launch quickstart --dry-run (${took} s)" 0 <(grep "$work/x.db" "$work/all")

# ---- The key a launch of quickstart looks up on this machine: a collective plan stored by a
# short `tune --collectives` carries the fingerprint, family and versions; the recipe
# signature comes from `recipe show --signature`.
expect_rc 0 120 "$dltune" tune --collectives -n 2 --budget 20 --min-bytes 4 --max-bytes 4KiB
sig=$("$dltune" recipe show quickstart --signature)
[ -n "$sig" ] || fail "no recipe signature"
# plant PLAN_JSON SIGNED_BY: the quickstart's plan row, as an import (or another program) left it.
plant() {
  python3 - "$user_db" "$sig" "$1" "$2" <<'PY'
import sqlite3, sys
db, sig, plan, signed_by = sys.argv[1:]
c = sqlite3.connect(db)
c.execute("DELETE FROM plans WHERE recipe = ?", (sig,))
cur = c.execute("""INSERT INTO plans(fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, recipe,
             family, plan_json, site, host, user_name, writer_version, created_at, signed_by)
             SELECT fingerprint, mpi, pmix, nccl, dltune, nodes, ranks_per_node, ?, family, ?,
                    'siteA', 'h1', 'u', writer_version, created_at, ? FROM plans
             WHERE recipe = '' LIMIT 1""", (sig, plan, signed_by))
assert cur.rowcount == 1, "no collective plan to copy the key from"
c.commit()
PY
}
quick_plan() {  # quick_plan LR REASON: the quickstart's settings (1x2, per-rank 64) as a plan
  python3 -c 'import json,sys; print(json.dumps({"version": 1, "collectives": {"allreduce": [{"min_bytes": 0, "max_bytes": 18446744073709551615, "algo": "ring", "segment_bytes": 0}]}, "training": {"per_rank_batch": 64, "global_batch": 128, "scaling": "weak", "lr_scale": float(sys.argv[1]), "warmup_steps": 20, "bucket_bytes": 4194304, "overlap": True}, "job": {"nodes": 1, "ranks_per_node": 2}, "provenance": {"source": "tuned", "reason": sys.argv[2]}}))' "$1" "$2"
}

# ---- 2. An unsigned plan with lr x1000: imported with a warning and served (the run diverged,
# "loss is NaN at step 5"). The bundle import refuses it now; planted by another program, the
# launch does not serve it.
python3 - "$work/lr1000.json" "$user_db" "$sig" "$(quick_plan 1000 'ring won')" <<'PY'
import hashlib, json, sqlite3, sys
out, db, sig, plan = sys.argv[1:]
row = sqlite3.connect(db).execute("SELECT fingerprint, family, mpi, pmix, nccl, dltune FROM plans WHERE recipe = ''").fetchone()
key = {"fingerprint": row[0], "family": row[1], "versions": {"mpi": row[2], "pmix": row[3],
       "nccl": row[4], "dltune": row[5]}, "nodes": 1, "ranks_per_node": 2, "recipe": sig}
prov = {"site": "siteA", "host": "h1", "user": "u", "dltune_version": row[5], "created_at": 1700000000}
b = {"format": "dltune-tuning-bundle", "format_version": 3, "provenance": prov,
     "content": {"plans": [{"key": key, "plan_json": plan, "provenance": prov}],
                 "measurements": [], "recipe_trials": []}}
canon = json.dumps(b, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
b["checksum"] = {"algorithm": "sha256", "value": hashlib.sha256(canon.encode()).hexdigest()}
open(out, "w").write(json.dumps(b))
PY
expect_rc 2 30 "$dltune" db import "$work/lr1000.json"
grep -q "training.lr_scale: 1000 is not plausible (at most 64 at global batch 128" "$work/err" ||
  fail "lr x1000 imported: $(cat "$work/err")"
report "db import lr1000.json (unsigned, the quickstart's key)" 2 "$work/err"
for lr in 1000 16; do
  plant "$(quick_plan $lr 'ring won')" unsigned
  expect_rc 0 60 "$dltune" launch quickstart --dry-run
  grep -q "note:    warning: the cached plan in $user_db is not used (training.lr_scale: " "$work/out" ||
    fail "lr x$lr served: $(cat "$work/out")"
  grep -q "lr x1.00 " "$work/out" || fail "lr x$lr: not the recipe's own lr: $(cat "$work/out")"
  grep -q "plan:    cached" "$work/out" && fail "lr x$lr served from the cache: $(cat "$work/out")"
  report "user db row (unsigned) with lr x$lr; dltune launch quickstart --dry-run" 0 <(grep "is not used" "$work/out")
done
# A plan the recipe's rule gives, imported unsigned: served, and the dry run says so.
plant "$(quick_plan 1 'ring won')" unsigned
expect_rc 0 60 "$dltune" launch quickstart --dry-run
grep -q "^plan:    cached in $user_db (imported unsigned); a launch uses it as it is:" "$work/out" ||
  fail "unsigned plan not said: $(cat "$work/out")"
grep -q "note:    warning: the plan cached in $user_db was imported unsigned (no trusted key vouches for it; it says it comes from site 'siteA')" "$work/out" ||
  fail "unsigned plan warning: $(cat "$work/out")"
report "user db row (unsigned) with lr x1; dltune launch quickstart --dry-run" 0 <(grep "unsigned" "$work/out")
expect_rc 0 60 "$dltune" launch quickstart --dry-run --json
python3 -c 'import json,sys; e=json.loads(open(sys.argv[1]).read()); assert e["plan_source"]=="cache" and e["plan_signed_by"]=="unsigned", e' "$work/out" ||
  fail "--json: $(cat "$work/out")"

# ---- 3. A plan's reason with escape codes: `why: ok ^[]0;pwned^G^[[31m...` on the terminal.
plant "$(quick_plan 1 $'ok \e]0;pwned\a\e[31m')" unsigned
expect_rc 0 60 "$dltune" launch quickstart --dry-run
no_escapes "$work/out" "$work/err"
grep -q "is not used (invalid plan: provenance.reason: a control character or a byte that is not UTF-8 at byte 3" "$work/out" ||
  fail "escape codes in the reason: $(cat -v "$work/out")"
report "user db row whose provenance.reason holds ESC ] 0;pwned BEL ESC [31m; launch --dry-run" 0 <(grep "is not used" "$work/out")
expect_rc 0 30 "$dltune" db show
no_escapes "$work/out" "$work/err"

# ---- 6. Recipes: a second YAML document, `!!str 5`, tune.budget 1e308.
recipes=$(cd "$(dirname "$0")/../../recipes" && pwd)
cp "$recipes/quickstart.yaml" "$work/q.yaml"
second=$(( $(wc -l <"$work/q.yaml") + 1 ))
printf -- '---\ntraining:\n  optimizer:\n    lr: 50\n' >>"$work/q.yaml"
expect_rc 2 30 "$dltune" recipe check "$work/q.yaml"
grep -q "q.yaml:$second:1: syntax: a second YAML document starts here" "$work/err" ||
  fail "second document: $(cat "$work/err")"
report "recipe check q.yaml (quickstart + '---' + a second document)" 2 "$work/err"
sed 's/^  samples: 20000/  samples: !!str 5/' "$recipes/quickstart.yaml" >"$work/s.yaml"
expect_rc 2 30 "$dltune" recipe check "$work/s.yaml"
grep -q 'data.samples: expected a positive integer, got the string "5" (tagged !!str); write numbers without quotes or tags' "$work/err" ||
  fail "!!str 5: $(cat "$work/err")"
report "recipe check s.yaml (samples: !!str 5)" 2 "$work/err"
sed 's/^  budget: 20/  budget: 1e308/' "$recipes/quickstart.yaml" >"$work/b.yaml"
expect_rc 2 30 "$dltune" recipe check "$work/b.yaml"
grep -q "tune.budget: expected a number in \[0, 1e+06\], got 1e+308" "$work/err" ||
  fail "budget 1e308: $(cat "$work/err")"
report "recipe check b.yaml (tune.budget: 1e308)" 2 "$work/err"

# ---- 6. tune against a newer-schema or read-only database refuses before measuring.
sql "$work/newer.db" "PRAGMA user_version=99"
expect_rc 2 20 "$dltune" tune --collectives -n 2 --budget 60 --retune --db "$work/newer.db"
grep -q "newer than this dltune supports" "$work/err" || fail "newer schema: $(cat "$work/err")"
report "tune --collectives --retune --budget 60 --db newer.db (user_version 99)" 2 "$work/err"
if [ "$(id -u)" = 0 ]; then
  cp "$user_db" "$work/ro.db" && chown 65534:65534 "$work/ro.db" && chmod 0444 "$work/ro.db"
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/ TMPDIR=/tmp)
else
  cp "$user_db" "$work/ro.db" && chmod 0444 "$work/ro.db"
  as=()
fi
expect_rc 2 20 "${as[@]}" "$dltune" tune --collectives -n 2 --budget 60 --retune --db "$work/ro.db"
grep -q "database '$work/ro.db' is read-only (the file is not writable by this user), so nothing measured could be stored; nothing was measured" "$work/err" ||
  fail "read-only: $(cat "$work/err")"
report "tune --collectives --retune --budget 60 --db ro.db (mode 444)" 2 "$work/err"

# ---- 6. A killed tune --collectives: no /tmp/dltune-tune-* left, its ranks stop promptly.
ranks_left() { pgrep -f "dltune-tune-rank.*$work/tmp" | wc -l; }
for sig in TERM KILL; do
  "$dltune" tune --collectives -n 2 --budget 60 --retune >"$work/out" 2>"$work/err" &
  tune_pid=$!
  for _ in $(seq 100); do
    [ "$(ranks_left)" -ge 1 ] && break
    sleep 0.2
  done
  [ "$(ranks_left)" -ge 1 ] || fail "the tuning ranks never started: $(cat "$work/err")"
  ls -d "$work/tmp"/dltune-tune-* >/dev/null || fail "no tuning directory while tuning"
  kill -"$sig" "$tune_pid"
  set +e; wait "$tune_pid"; rc=$?; set -e
  tune_pid=
  for _ in $(seq 25); do
    [ "$(ranks_left)" = 0 ] && break
    sleep 0.2
  done
  [ "$(ranks_left)" = 0 ] || fail "SIG$sig: the tuning ranks ran on 5 s after dltune tune died"
  if [ "$sig" = TERM ]; then
    [ "$rc" = 143 ] || fail "SIGTERM: tune exited $rc, not 143: $(cat "$work/err")"
    left=$(find "$work/tmp" -maxdepth 1 -name 'dltune-tune-*' | wc -l)
    [ "$left" = 0 ] || fail "SIGTERM left $(ls "$work/tmp")"
    echo "| kill -TERM dltune tune --collectives (while measuring) | $rc | ranks gone, no dltune-tune-* left |"
  else
    # SIGKILL cannot be caught: the next tune removes what a dead one left.
    expect_rc 2 20 "$dltune" tune --collectives -n 2 --budget 60 --retune --db "$work/newer.db"
    left=$(find "$work/tmp" -maxdepth 1 -name 'dltune-tune-*' | wc -l)
    [ "$left" = 0 ] || fail "SIGKILL's directory was never removed: $(ls "$work/tmp")"
    echo "| kill -KILL dltune tune --collectives (while measuring) | $rc | ranks gone within 5 s; the next tune removes its dltune-tune-* |"
  fi
done

[ "$failures" = 0 ] || { echo "served_plan_test: $failures checks failed" >&2; exit 1; }
echo "served_plan_test: all passed"
