#!/usr/bin/env bash
# Hostile databases and bundles, round two (issue 43), end to end through the real binary, each
# reproducer as the issue writes it: negative schema numbers through db merge and db import,
# control characters in every text field of a bundle's rows and plans, implausible values,
# format-2 bundles, trust that a user's environment cannot widen, trusted-keys files others may
# write, a site database created requiring signatures, db rules on a read-only database, and a
# database created on a full disk. Every command runs under `timeout` so that a regression
# cannot hang CI; every refusal exits 2 with one line and writes nothing.
# Usage: db_hostile_test.sh PATH_TO_DLTUNE
set -euo pipefail
dltune=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/dltune_db_hostile.XXXXXX")
chmod 0755 "$work"
trap 'rm -rf "$work"' EXIT
umask 022
export XDG_DATA_HOME=$work/xdg DLTUNE_DB= DLTUNE_SITE_DB= DLTUNE_TRUSTED_KEYS=
user_db=$XDG_DATA_HOME/dltune/dltune.db
# KEEP_GOING=1 reports every failing check instead of stopping at the first (to see which
# reproducers a build without a fix fails).
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
  [ -n "${KEEP_GOING:-}" ] || exit 1
}
expect_rc() {  # expect_rc CODE CMD...: runs CMD under a 30 s timeout; output in $work/out, err
  local want=$1; shift
  set +e; timeout 30 "$@" >"$work/out" 2>"$work/err"; local rc=$?; set -e
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want: $(cat "$work/err")"
}
one_line() { [ "$(wc -l <"$work/err")" = 1 ] || fail "$1: not one line: $(cat "$work/err")"; }
no_escapes() {  # no_escapes FILE...: nothing a terminal would act on (ESC, BEL, NUL, C1 as UTF-8)
  if python3 - "$@" <<'PY'
import re, sys
for f in sys.argv[1:]:
    data = open(f, "rb").read()
    if re.search(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]", data):
        sys.exit(0)
sys.exit(1)
PY
  then fail "control characters reached the output: $(cat -v "$@")"; fi
}
set_version() {  # set_version FILE N: PRAGMA user_version = N, as `sqlite3 FILE` would
  python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("PRAGMA user_version=%d" % int(sys.argv[2])); c.commit()' "$1" "$2"
}
report() { echo "| $1 | $2 | $(head -c 300 "$3" | tr '\n' ' ') |"; }

# make_bundle OUT [FIELD=JSON ...]: an unsigned format-3 bundle of one plan (key ab12, 1x2,
# per-rank 64, global 128) and one measurement, its checksum recomputed after the edits.
# FIELD is plan.*, key.*, prov.*, meas.*, or bundle.* (the envelope).
make_bundle() {
  python3 - "$@" <<'PY'
import hashlib, json, sys
out, edits = sys.argv[1], sys.argv[2:]
plan = {"version": 1, "collectives": {"allreduce": [
          {"min_bytes": 0, "max_bytes": 18446744073709551615, "algo": "ring", "segment_bytes": 0}]},
        "training": {"per_rank_batch": 64, "global_batch": 128, "scaling": "weak",
                     "lr_scale": 1.0, "warmup_steps": 20, "bucket_bytes": 4194304,
                     "overlap": True},
        "job": {"nodes": 1, "ranks_per_node": 2},
        "provenance": {"source": "tuned", "reason": "ring won"}}
key = {"fingerprint": "ab12", "family": "fa11", "versions": {"mpi": "4.1.4", "pmix": "4.2.2",
       "nccl": "", "dltune": "0.1.0"}, "nodes": 1, "ranks_per_node": 2, "recipe": "cafe"}
prov = {"site": "siteA", "host": "h1", "user": "u", "dltune_version": "0.1.0",
        "created_at": 1700000000}
meas = {"key": key, "collective": "allreduce", "algorithm": "ring", "segment_bytes": 0,
        "bytes": 4096, "median_us": 10.0, "p10_us": 9.0, "p90_us": 12.0, "iqr_us": 1.0,
        "samples": 20, "failed": False, "reason": "", "provenance": prov}
bundle = {"format": "dltune-tuning-bundle", "format_version": 3, "provenance": prov}
for e in edits:
    where, value = e.split("=", 1)
    value = json.loads(value)
    target, *path = where.split(".")
    if target == "plan" and not path:  # plan=JSON: a whole other plan
        plan = value
        continue
    obj = {"plan": plan, "key": key, "prov": prov, "meas": meas, "bundle": bundle}[target]
    for p in path[:-1]:
        obj = obj[int(p)] if isinstance(obj, list) else obj[p]
    obj[path[-1]] = value
bundle["content"] = {"plans": [{"key": key, "plan_json": json.dumps(plan), "provenance": prov}],
                     "measurements": [meas], "recipe_trials": []}
payload = {k: bundle[k] for k in ("format", "format_version", "provenance", "content")}
if bundle["format_version"] >= 3:
    canon = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
else:  # formats 1 and 2: the checksum covered the content only
    canon = json.dumps(bundle["content"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
bundle["checksum"] = {"algorithm": "sha256", "value": hashlib.sha256(canon.encode()).hexdigest()}
open(out, "w").write(json.dumps(bundle, indent=1))
PY
}

echo "| reproducer | exit | message |"
echo "|---|---|---|"

# ---- 1. A negative schema number: refused by db merge and db import, fast, nothing created.
for v in -1 -2 -3 -27 -100000 -2147483648; do
  rm -f "$work/x.db" "$work/merged.db"
  set_version "$work/x.db" "$v"
  expect_rc 2 "$dltune" db merge "$work/x.db" -o "$work/merged.db"
  one_line "merge $v"
  grep -q "x.db' has database schema version $v, which no dltune writes" "$work/err" ||
    fail "merge $v: $(cat "$work/err")"
  [ ! -e "$work/merged.db" ] || fail "merge $v created the target"
  report "PRAGMA user_version=$v; db merge x.db -o merged.db" 2 "$work/err"
  expect_rc 2 "$dltune" db import "$work/x.db"
  one_line "import $v"
  grep -q "schema version $v" "$work/err" || fail "import $v: $(cat "$work/err")"
  [ ! -e "$user_db" ] || fail "import $v created the user database"
  report "PRAGMA user_version=$v; db import x.db" 2 "$work/err"
done

# ---- 3 and 6. Bundles: control characters in every text field, implausible values, format 2.
refuse() {  # refuse NAME BUNDLE EXPECTED-TEXT: import into a fresh database is refused
  local name=$1 bundle=$2 text=$3
  local fresh=$work/fresh-$name.db
  expect_rc 2 "$dltune" db import "$bundle" --db "$fresh"
  one_line "$name"
  grep -qF -- "$text" "$work/err" || fail "$name: $(cat "$work/err")"
  no_escapes "$work/err"
  [ ! -e "$fresh" ] || fail "$name: a refused import created $fresh"
  report "db import $name.json" 2 "$work/err"
}
esc='"ok \u001b]0;pwned\u0007\u001b[31m"'
make_bundle "$work/b.json"
expect_rc 0 "$dltune" db import "$work/b.json" --db "$work/good.db"  # the base bundle is fine
for field in plan.provenance.reason plan.provenance.recipe plan.provenance.budget.cut \
             plan.provenance.confidence.rival plan.placement.1.nic; do
  case $field in
    plan.provenance.budget.cut) edits=("plan.provenance.budget={\"cut\": $esc}") ;;
    plan.provenance.confidence.rival) edits=("plan.provenance.confidence={\"rival\": $esc, \"ratio\": 1.1}") ;;
    plan.placement.1.nic) edits=("plan.placement=[{\"local_rank\": 0}, {\"local_rank\": 1, \"nic\": $esc}]") ;;
    *) edits=("$field=$esc") ;;
  esac
  make_bundle "$work/$field.json" "${edits[@]}"
  want=${field#plan.}; want=${want/placement.1/placement[1]}
  refuse "$field" "$work/$field.json" "plan: invalid plan: $want: a control character"
done
make_bundle "$work/nul.json" 'plan.provenance.reason="nul\u0000here"'
refuse nul-in-reason "$work/nul.json" "provenance.reason: a control character or a byte that is not UTF-8 at byte 3"
make_bundle "$work/c1.json" 'plan.provenance.reason="csi \u009b31m"'
refuse c1-in-reason "$work/c1.json" "provenance.reason: a control character"
make_bundle "$work/site.json" "prov.site=$esc"
refuse esc-in-site "$work/site.json" "provenance.site: unexpected character"
make_bundle "$work/mreason.json" "meas.reason=$esc"
refuse esc-in-measurement-reason "$work/mreason.json" "measurement.reason: unexpected character"
make_bundle "$work/big.json" 'plan.training.bucket_bytes=10737418240'
refuse bucket-10GiB "$work/big.json" "training.bucket_bytes: 10 GiB is not plausible"
make_bundle "$work/tiny.json" 'plan.training.bucket_bytes=1'
refuse bucket-1B "$work/tiny.json" "training.bucket_bytes: 1 B is not plausible"
make_bundle "$work/lr.json" 'plan.training.lr_scale=100'
refuse lr-x100-at-128 "$work/lr.json" "training.lr_scale: 100 is not plausible (at most 64 at global batch 128"
make_bundle "$work/regret.json" 'plan.provenance.regret=-0.5'
refuse negative-regret "$work/regret.json" "provenance.regret: expected a share >= 0"
make_bundle "$work/budget.json" 'plan.provenance.budget={"budget_s": -20}'
refuse negative-budget "$work/budget.json" "provenance.budget.budget_s: -20 is not plausible"
make_bundle "$work/p10.json" 'meas.p10_us=50' 'meas.p90_us=12'
refuse p10-above-p90 "$work/p10.json" "measurement.p10_us/median_us/p90_us"
make_bundle "$work/neg.json" 'plan.training.per_rank_batch=-8' 'plan.training.global_batch=-16'
refuse negative-batch "$work/neg.json" "training.per_rank_batch: expected a positive integer, got -8"
grep -q microbatches "$work/err" && fail "the negative batch is still blamed on microbatches"
make_bundle "$work/v2.json" 'bundle.format_version=2' 'prov.site="trusted-site"'
refuse format-2 "$work/v2.json" "bundle format version 2 (an older dltune's) is no longer read: its checksum does not cover the exporter's provenance, which anyone could have changed; re-export it with this dltune (dltune db export)"

# ---- 4. Trust: keys, a site database created requiring signatures, DLTUNE_TRUSTED_KEYS.
expect_rc 0 "$dltune" db keygen --name siteA -o "$work/keys"
expect_rc 0 "$dltune" db keygen --name mallory -o "$work/evil"
cp "$work/keys/siteA.pub" "$work/trusted.keys"
cat "$work/evil/mallory.pub" "$work/keys/siteA.pub" >"$work/user.keys"
expect_rc 0 "$dltune" db import "$work/b.json"
expect_rc 0 "$dltune" db export -o "$work/signed.json" --site siteA --sign "$work/keys/siteA.key"
expect_rc 0 "$dltune" db export -o "$work/mallory.json" --site mallory --sign "$work/evil/mallory.key"
site=$work/site/site.db
mkdir -p "$work/site"
expect_rc 0 "$dltune" db settings --db "$site" --require-signature on --trusted-keys "$work/trusted.keys"
grep -q "require_signature on" "$work/out" || fail "settings: $(cat "$work/out")"
[ -s "$site" ] || fail "db settings did not create the site database"
expect_rc 0 "$dltune" db show --db "$site"
grep -q "takes only signed bundles; trusted keys $work/trusted.keys" "$work/out" ||
  fail "a new site database does not require signatures: $(cat "$work/out")"
# The reproducer: a user's DLTUNE_TRUSTED_KEYS that trusts mallory.
DLTUNE_TRUSTED_KEYS=$work/user.keys expect_rc 2 "$dltune" db merge "$work/mallory.json" -o "$site"
one_line "widened"
grep -q "signed by 'mallory', which is not a trusted key, and this database takes only bundles signed by a trusted key (its require_signature setting); nothing was imported" "$work/err" ||
  fail "DLTUNE_TRUSTED_KEYS widened the site database's trust: $(cat "$work/err")"
report "DLTUNE_TRUSTED_KEYS=user.keys (mallory, siteA) db merge mallory.json -o site.db (require_signature, trusted siteA)" 2 "$work/err"
DLTUNE_TRUSTED_KEYS=$work/user.keys expect_rc 0 "$dltune" db merge "$work/signed.json" -o "$site"
grep -q "warning: DLTUNE_TRUSTED_KEYS' key 'mallory' is not trusted by the database" "$work/err" ||
  fail "the narrowing is not said: $(cat "$work/err")"
# A trusted-keys file others may change.
chmod 0666 "$work/trusted.keys"
DLTUNE_TRUSTED_KEYS=$work/trusted.keys expect_rc 2 "$dltune" db import "$work/signed.json" --require-signature --db "$work/other.db"
one_line "world-writable keys"
grep -q "trusted keys file '$work/trusted.keys' may be changed by others (mode 666)" "$work/err" ||
  fail "a world-writable trusted-keys file was accepted: $(cat "$work/err")"
report "chmod 666 trusted.keys; DLTUNE_TRUSTED_KEYS=trusted.keys db import signed.json --require-signature" 2 "$work/err"
chmod 0664 "$work/trusted.keys"
expect_rc 2 "$dltune" db merge "$work/signed.json" -o "$site"
grep -q "(mode 664)" "$work/err" || fail "a group-writable trusted-keys file: $(cat "$work/err")"
report "chmod 664 trusted.keys (the site database's); db merge signed.json -o site.db" 2 "$work/err"
chmod 0644 "$work/trusted.keys"

# ---- 5. db rules serves a read-only database.
collective='{"version":1,"collectives":{"allreduce":[{"min_bytes":0,"max_bytes":4096,"algo":"rd","segment_bytes":0},{"min_bytes":4096,"max_bytes":18446744073709551615,"algo":"ring","segment_bytes":0}]},"training":{"per_rank_batch":1,"global_batch":2,"scaling":"weak"},"job":{"nodes":1,"ranks_per_node":2}}'
make_bundle "$work/coll.json" 'key.recipe=""' "plan=$collective"
ro=$work/ro
mkdir -p "$ro"
expect_rc 0 "$dltune" db import "$work/coll.json" --db "$ro/rules.db"
if [ "$(id -u)" = 0 ]; then
  command -v setpriv >/dev/null || { echo "SKIP read-only db rules: no setpriv"; ro_as=""; }
  chown -R 65534:65534 "$ro"
  ro_as="setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/"
else
  ro_as=""
fi
chmod 0444 "$ro/rules.db" && chmod 0555 "$ro"
expect_rc 0 $ro_as "$dltune" db rules --db "$ro/rules.db" --format ompi
grep -q "allreduce" "$work/out" || grep -qi "rules" "$work/out" || fail "db rules output: $(cat "$work/out")"
grep -q "read-only" "$work/err" && fail "db rules refused a read-only database: $(cat "$work/err")"
echo "| db rules --db ro/rules.db (mode 444, directory 555) | 0 | $(head -c 120 "$work/err" | tr '\n' ' ') |"
chmod 0755 "$ro"

# ---- 5. A database created on a full disk: no 0-byte file left, the disk named as full.
full_disk() {  # runs the body in a private mount namespace with a 1 MiB tmpfs at $work/full
  mkdir -p "$work/full"
  local unshare=(unshare --mount)
  [ "$(id -u)" = 0 ] || unshare=(unshare --user --map-root-user --mount)
  "${unshare[@]}" bash -c '
    set -e
    mount -t tmpfs -o size=1m tmpfs "$1"
    dd if=/dev/zero of="$1/fill" bs=4k 2>/dev/null || true
    set +e
    timeout 30 "$2" db import "$3" --db "$1/new.db" >"$4/out" 2>"$4/err"; echo $? >"$4/rc"
    ls -A "$1" >"$4/left"
    rm -f "$1/fill"
    timeout 30 "$2" db import "$3" --db "$1/new.db" >"$4/out2" 2>"$4/err2"; echo $? >"$4/rc2"
    timeout 30 "$2" db show --db "$1/new.db" >"$4/show" 2>&1; echo $? >"$4/rc3"
  ' _ "$work/full" "$dltune" "$work/b.json" "$work"
}
if (unshare --mount true || unshare --user --map-root-user --mount true) 2>/dev/null; then
  full_disk
  [ "$(cat "$work/rc")" = 1 ] || fail "full disk: exit $(cat "$work/rc"): $(cat "$work/err")"
  grep -q "no space left on device writing '$work/full/new.db'" "$work/err" ||
    fail "full disk not said as such: $(cat "$work/err")"
  grep -q "disk I/O error\|cannot read" "$work/err" && fail "full disk as an I/O error: $(cat "$work/err")"
  [ "$(cat "$work/left")" = fill ] || fail "the full disk kept files: $(cat "$work/left")"
  report "db import b.json --db full/new.db (a full 1 MiB tmpfs)" "$(cat "$work/rc")" "$work/err"
  [ "$(cat "$work/rc2")" = 0 ] || fail "after freeing space: $(cat "$work/err2")"
  [ "$(cat "$work/rc3")" = 0 ] || fail "db show after freeing space: $(cat "$work/show")"
  grep -q "1 plans" "$work/show" || fail "db show after freeing space: $(cat "$work/show")"
else
  echo "SKIP the full-disk case: this machine lets no test mount a tmpfs (no unshare)"
fi

[ "$failures" = 0 ] || { echo "db_hostile_test: $failures checks failed" >&2; exit 1; }
echo "db_hostile_test: all passed"
