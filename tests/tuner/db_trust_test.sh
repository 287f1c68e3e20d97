#!/usr/bin/env bash
# Bundles a site can verify, and a tuning database that refuses what it should, end to end
# through the real binary: keygen, signed export, import and merge against trusted keys, every
# refusal exiting 2 with one line and writing nothing (no database created), plausibility
# checks naming the field, conflict reports by plan, the database's own require_signature
# setting, a read-only user database, and the hostile bundles of the report.
# Usage: db_trust_test.sh PATH_TO_DLTUNE
set -euo pipefail
dltune=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/dltune_db_trust.XXXXXX")
chmod 0755 "$work"
trap 'rm -rf "$work"' EXIT
export XDG_DATA_HOME=$work/xdg DLTUNE_DB= DLTUNE_SITE_DB= DLTUNE_TRUSTED_KEYS=
user_db=$XDG_DATA_HOME/dltune/dltune.db
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() {  # expect_rc CODE CMD...: runs CMD, checks its exit code; stdout/stderr in $work/out, err
  local want=$1; shift
  set +e; "$@" >"$work/out" 2>"$work/err"; local rc=$?; set -e
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want: $(cat "$work/err")"
}
one_line() { [ "$(wc -l <"$work/err")" = 1 ] || fail "$1: not one line: $(cat "$work/err")"; }
show() { echo "\$ $*"; }

# make_bundle OUT [FIELD=JSON ...]: an unsigned format-3 bundle of one plan (key ab12, 1x2),
# with its checksum recomputed after the edits (what anyone can do).
make_bundle() {
  python3 - "$@" <<'PY'
import hashlib, json, sys
out, edits = sys.argv[1], sys.argv[2:]
plan = {"version": 1, "collectives": {"allreduce": [
          {"min_bytes": 0, "max_bytes": 18446744073709551615, "algo": "ring", "segment_bytes": 0}]},
        "training": {"per_rank_batch": 64, "global_batch": 128, "scaling": "weak",
                     "lr_scale": 1.0, "warmup_steps": 20, "bucket_bytes": 4194304,
                     "overlap": True},
        "job": {"nodes": 1, "ranks_per_node": 2}}
key = {"fingerprint": "ab12", "family": "fa11", "versions": {"mpi": "4.1.4", "pmix": "4.2.2",
       "nccl": "", "dltune": "0.1.0"}, "nodes": 1, "ranks_per_node": 2, "recipe": "cafe"}
prov = {"site": "siteA", "host": "h1", "user": "u", "dltune_version": "0.1.0",
        "created_at": 1700000000}
for e in edits:
    where, value = e.split("=", 1)
    value = json.loads(value)
    target, *path = where.split(".")
    obj = {"plan": plan, "key": key, "prov": prov}[target]
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value
content = {"plans": [{"key": key, "plan_json": json.dumps(plan), "provenance": prov}],
           "measurements": [], "recipe_trials": []}
bundle = {"format": "dltune-tuning-bundle", "format_version": 3, "provenance": prov,
          "content": content}
canon = json.dumps(bundle, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
bundle["checksum"] = {"algorithm": "sha256", "value": hashlib.sha256(canon.encode()).hexdigest()}
open(out, "w").write(json.dumps(bundle, indent=1))
PY
}
# edit_bundle IN OUT PYTHON-EXPR-ON-b [rechecksum]: changes a bundle after the fact.
edit_bundle() {
  python3 - "$@" <<'PY'
import hashlib, json, sys
src, out, expr = sys.argv[1:4]
b = json.load(open(src))
exec(expr)
if len(sys.argv) > 4:
    payload = {k: b[k] for k in ("format", "format_version", "provenance", "content")}
    canon = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    b["checksum"]["value"] = hashlib.sha256(canon.encode()).hexdigest()
open(out, "w").write(json.dumps(b, indent=1))
PY
}

# ---- Keys.
show dltune db keygen --name siteA -o keys
expect_rc 0 "$dltune" db keygen --name siteA -o "$work/keys"
cat "$work/err"
[ "$(stat -c %a "$work/keys/siteA.key")" = 600 ] || fail "the secret key is not mode 0600"
grep -Eq '^siteA [A-Za-z0-9+/]{43}=$' "$work/keys/siteA.pub" || fail "pub: $(cat "$work/keys/siteA.pub")"
expect_rc 2 "$dltune" db keygen --name siteA -o "$work/keys"
grep -q "never overwritten" "$work/err" || fail "keygen overwrote: $(cat "$work/err")"
expect_rc 2 "$dltune" db keygen --name 'bad name;' -o "$work/keys"
expect_rc 0 "$dltune" db keygen --name mallory -o "$work/evil"
cp "$work/keys/siteA.pub" "$work/trusted.keys"
export DLTUNE_TRUSTED_KEYS=$work/trusted.keys

# ---- A signed export, imported at another site.
make_bundle "$work/plain.json"
expect_rc 0 "$dltune" db import "$work/plain.json"
grep -q "warning: .*plain.json' is unsigned: its rows are imported marked unsigned" "$work/err" ||
  fail "unsigned import warning: $(cat "$work/err")"
show dltune db export -o signed.json --site siteA --sign keys/siteA.key
expect_rc 0 "$dltune" db export -o "$work/signed.json" --site siteA --sign "$work/keys/siteA.key"
cat "$work/err"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["signatures"]; assert len(s)==1 and s[0]["signer"]=="siteA", s' "$work/signed.json"
chmod 0644 "$work/keys/siteA.key"
expect_rc 2 "$dltune" db export -o "$work/x.json" --sign "$work/keys/siteA.key"
grep -q "may be read by others" "$work/err" || fail "a readable key was used: $(cat "$work/err")"
chmod 0600 "$work/keys/siteA.key"

site_b=$work/siteB.db
show dltune db import signed.json --db siteB.db --require-signature
expect_rc 0 "$dltune" db import "$work/signed.json" --db "$site_b" --require-signature
cat "$work/err" "$work/out"
grep -q "signed.json' is signed by trusted key 'siteA'" "$work/err" || fail "verified: $(cat "$work/err")"
grep -q "plans 1 added" "$work/out" || fail "signed import: $(cat "$work/out")"
expect_rc 0 "$dltune" db show --db "$site_b"
grep -q "signed by siteA" "$work/out" || fail "provenance does not show the signer: $(cat "$work/out")"
expect_rc 0 "$dltune" db show --db "$site_b" --json
python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["plans"][0]; assert p["signed_by"]=="siteA", p' "$work/out"

# ---- Refusals: exit 2, one line, nothing written, no database created.
refuse() {  # refuse NAME BUNDLE EXPECTED-TEXT [ARGS...]: import into a fresh database is refused
  local name=$1 bundle=$2 text=$3; shift 3
  local fresh=$work/fresh-$name.db
  expect_rc 2 "$dltune" db import "$bundle" --db "$fresh" "$@"
  one_line "$name"
  grep -q -- "$text" "$work/err" || fail "$name: $(cat "$work/err")"
  [ ! -e "$fresh" ] || fail "$name: a refused import created $fresh"
  echo "refused ($name): $(cat "$work/err")"
}
# Content changed after signing, checksum recomputed: the signature no longer verifies.
edit_bundle "$work/signed.json" "$work/tampered.json" \
  'p=json.loads(b["content"]["plans"][0]["plan_json"]); p["training"]["per_rank_batch"]=8; p["training"]["global_batch"]=16; b["content"]["plans"][0]["plan_json"]=json.dumps(p)' rechecksum
show dltune db import tampered.json
refuse tampered "$work/tampered.json" "signature by 'siteA' does not verify with the trusted key"
DLTUNE_TRUSTED_KEYS= refuse tampered-untrusted "$work/tampered.json" "signature by 'siteA' does not verify"
# Provenance is signed too.
edit_bundle "$work/signed.json" "$work/prov.json" 'b["provenance"]["site"]="trusted-site"' rechecksum
refuse provenance "$work/prov.json" "does not verify"
# The reported forgery: "site: trusted-site", per-rank batch 8, checksum recomputed, no signature.
make_bundle "$work/forged.json" 'prov.site="trusted-site"' 'plan.training.per_rank_batch=8' \
  'plan.training.global_batch=16'
refuse forged "$work/forged.json" "is unsigned, and this database takes only bundles signed" --require-signature
# Signed by a key nobody trusts, and signed by that key under a trusted name.
"$dltune" db export -o "$work/mallory.json" --site mallory --sign "$work/evil/mallory.key" 2>/dev/null
refuse untrusted "$work/mallory.json" "signed by 'mallory', which is not a trusted key" --require-signature
expect_rc 0 "$dltune" db import "$work/mallory.json" --db "$work/lenient.db"
grep -q "signed by 'mallory', which is not a trusted key: its rows are imported marked unsigned" "$work/err" ||
  fail "untrusted without --require-signature: $(cat "$work/err")"
edit_bundle "$work/mallory.json" "$work/spoofed.json" 'b["signatures"][0]["signer"]="siteA"'
refuse spoofed "$work/spoofed.json" "signature by 'siteA' does not verify with the trusted key"

# Well formed but absurd: refused naming the field.
make_bundle "$work/b1.json" 'plan.training.warmup_steps=1000000000000000000'
refuse warmup "$work/b1.json" "training.warmup_steps: 1000000000000000000 is not plausible"
make_bundle "$work/b2.json" 'plan.training.per_rank_batch=1000000000000' 'plan.training.global_batch=2000000000000'
refuse batch "$work/b2.json" "training.per_rank_batch: 1000000000000 is not plausible"
make_bundle "$work/b3.json" 'plan.job={"nodes":64,"ranks_per_node":8}' 'plan.training.global_batch=32768'
refuse shape "$work/b3.json" "plan: job 64x8 is not the key's job shape 1x2"
make_bundle "$work/b4.json" 'prov.created_at=32503680000'
refuse future "$work/b4.json" "created_at: 32503680000 is not a plausible time"
make_bundle "$work/b5.json" 'key.fingerprint="ab12; rm -rf /"'
refuse fingerprint "$work/b5.json" "key.fingerprint"
make_bundle "$work/b6.json" 'plan.collectives.allreduce=[{"min_bytes":0,"max_bytes":18446744073709551615,"algo":"ringg"}]'
refuse algorithm "$work/b6.json" "unknown algorithm 'ringg'"
# A bundle nested ~75,000 levels deep (it crashed db import in the old checksum's dump()).
python3 -c 'import sys; open(sys.argv[1],"w").write("{\"content\": {\"j\": " + "["*75000 + "]"*75000 + "}}")' "$work/deep.json"
refuse deep "$work/deep.json" "nested deeper than 16 levels"

# ---- The database's own setting: a site database that takes only signed bundles.
site_db=$work/site.db
expect_rc 0 "$dltune" db settings --db "$site_db" --require-signature on --trusted-keys "$work/trusted.keys"
grep -q "require_signature on" "$work/out" || fail "settings: $(cat "$work/out")"
DLTUNE_TRUSTED_KEYS= expect_rc 2 "$dltune" db merge "$work/plain.json" -o "$site_db"
grep -q "its require_signature setting" "$work/err" || fail "setting ignored: $(cat "$work/err")"
DLTUNE_TRUSTED_KEYS= expect_rc 0 "$dltune" db merge "$work/signed.json" -o "$site_db"
grep -q "plans 1 added" "$work/out" || fail "signed merge: $(cat "$work/out")"

# ---- Conflicts are reported by plan: both sides, which won and why.
make_bundle "$work/newer.json" 'prov.site="siteC"' 'prov.created_at=1710000000' \
  'plan.training.per_rank_batch=32' 'plan.training.global_batch=64'
expect_rc 0 "$dltune" db merge "$work/newer.json" -o "$work/conflict.db"
expect_rc 0 "$dltune" db merge "$work/plain.json" -o "$work/conflict.db"
cat "$work/out"
grep -q "plans 0 added, 0 replaced, 0 unchanged, 1 kept local" "$work/out" || fail "counts: $(cat "$work/out")"
grep -q "^conflict: plan fingerprint ab12 shape 1x2 recipe cafe" "$work/out" || fail "no conflict line"
grep -q "local: *site siteC, 2024-03-09T.*per-rank 32" "$work/out" || fail "local side: $(cat "$work/out")"
grep -q "incoming: site siteA, 2023-11-14T.*per-rank 64.*(from .*plain.json)" "$work/out" ||
  fail "incoming side: $(cat "$work/out")"
grep -q "kept the local plan: policy keep-local" "$work/out" || fail "why: $(cat "$work/out")"
expect_rc 0 "$dltune" db merge "$work/plain.json" -o "$work/conflict.db" --policy prefer-newer --json
python3 -c '
import json,sys
c=json.load(open(sys.argv[1]))["plan_conflicts"]
assert len(c)==1 and c[0]["winner"]=="local" and "local plan is newer" in c[0]["why"], c' "$work/out"

# ---- A read-only user database: reads work, a write says read-only.
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
  ro=$work/ro && mkdir -p "$ro" && cp "$site_b" "$ro/user.db"
  chown -R 65534:65534 "$ro" && chmod 0444 "$ro/user.db" && chmod 0555 "$ro"
  as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups env DLTUNE_DB="$ro/user.db" HOME=/ "$@"; }
  expect_rc 0 as_nobody "$dltune" db show
  grep -q "user database $ro/user.db: schema v[0-9]*, 1 plans" "$work/out" || fail "ro show: $(cat "$work/out")"
  mkdir -p "$work/nobody" && chown 65534:65534 "$work/nobody"
  expect_rc 0 as_nobody "$dltune" db export -o "$work/nobody/export.json"
  grep -q '"plans"' "$work/nobody/export.json" || fail "ro export: $(cat "$work/err")"
  expect_rc 0 as_nobody "$dltune" db lookup --fingerprint ab12 --shape 1x2 --recipe cafe --mpi 4.1.4 --pmix 4.2.2
  grep -q "exact hit in user database" "$work/out" || fail "ro lookup: $(cat "$work/out")"
  expect_rc 2 as_nobody "$dltune" db import "$work/plain.json"
  one_line "read-only import"
  grep -q "is read-only (the file is not writable by this user); nothing was written" "$work/err" ||
    fail "ro import: $(cat "$work/err")"
  echo "read-only: $(cat "$work/err")"
fi

# ---- A broken database: db show says so and fails.
echo "not a database at all, just text that is long enough to be a file" >"$work/broken.db"
expect_rc 2 "$dltune" db show --db "$work/broken.db"
grep -q "broken.db" "$work/out" || fail "broken show: $(cat "$work/out")"
echo "db_trust_test: all passed"
