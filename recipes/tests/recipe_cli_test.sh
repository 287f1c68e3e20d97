#!/usr/bin/env bash
# `dltune recipe` end to end: check (ok / every problem, exit 2), show, list; model and program
# recipes.
# Usage: recipe_cli_test.sh DLTUNE_BINARY SOURCE_DIR
set -u
dltune=$1
src=$2
bad=$src/recipes/tests/bad
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A good recipe, by name and by path: "ok", exit 0.
"$dltune" recipe check quickstart "$src/recipes/alexnet.yaml" >"$tmp/out" 2>"$tmp/err" ||
  fail "check of good recipes exited $?: $(cat "$tmp/err")"
grep -qx "quickstart: ok" "$tmp/out" || fail "no 'quickstart: ok' in: $(cat "$tmp/out")"
grep -q "alexnet.yaml: ok" "$tmp/out" || fail "no 'alexnet.yaml: ok'"

# A bad one: exit 2 and its golden problems on stderr (run from bad/ so paths match).
(cd "$bad" && "$dltune" recipe check several-at-once.yaml) >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "bad recipe did not exit 2"
diff <(sed "s|@DIR@|$bad|g" "$bad/several-at-once.expected") "$tmp/err" ||
  fail "stderr differs from several-at-once.expected"

# Good and bad together: still exit 2, the good one still says ok.
"$dltune" recipe check quickstart "$bad/zero-steps.yaml" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "mixed check did not exit 2"
grep -qx "quickstart: ok" "$tmp/out" || fail "mixed check lost 'quickstart: ok'"

# A missing file: exit 2, one sentence.
"$dltune" recipe check "$tmp/nope.yaml" >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] || fail "missing file did not exit 2"
grep -q "no recipe file or bundled recipe named" "$tmp/err" || fail "missing-file message: $(cat "$tmp/err")"

# --json
"$dltune" recipe check --json "$bad/zero-steps.yaml" >"$tmp/out" 2>/dev/null
[ $? -eq 2 ] || fail "--json check did not exit 2"
grep -q '"key": "training.steps"' "$tmp/out" || fail "--json lacks the key: $(cat "$tmp/out")"

# show: normalised YAML (--json: JSON) with the parameter count; --signature: 64 hex characters.
"$dltune" recipe show quickstart >"$tmp/out" || fail "show exited $?"
grep -q '^  parameters: 431080$' "$tmp/out" || fail "show lacks the LeNet parameter count"
"$dltune" recipe show --json quickstart >"$tmp/out" || fail "show --json exited $?"
grep -q '"parameters": 431080' "$tmp/out" || fail "show --json lacks the LeNet parameter count"
sig=$("$dltune" recipe show --signature quickstart) || fail "show --signature failed"
[[ $sig =~ ^[0-9a-f]{64}$ ]] || fail "signature '$sig'"

# A program recipe (recipes/program.h): check says ok and names the program; show prints it with
# every default (--json: the same fields, --signature: 64 hex characters).
cat >"$tmp/prog.yaml" <<'EOF'
program:
  command: [python3, train.py, --batch-size, "{batch}"]
  throughput: {pattern: 'samples/s: ([0-9.]+)'}
tune: {search: {batch: [32, 64], bucket_mb: [1, 4]}}
EOF
"$dltune" recipe check "$tmp/prog.yaml" >"$tmp/out" 2>"$tmp/err" ||
  fail "check of a good program recipe exited $?: $(cat "$tmp/err")"
grep -qx "$tmp/prog.yaml: ok" "$tmp/out" || fail "no 'prog.yaml: ok' in: $(cat "$tmp/out")"
grep -q "program: python3 train.py --batch-size {batch}" "$tmp/out" || fail "check lacks the program"
"$dltune" recipe show "$tmp/prog.yaml" >"$tmp/out" || fail "show of a program recipe exited $?"
grep -q '^  trial_steps: 20$' "$tmp/out" || fail "show lacks the default trial_steps: $(cat "$tmp/out")"
grep -q '^    bucket_mb: \[1, 4\]$' "$tmp/out" || fail "show lacks the search: $(cat "$tmp/out")"
cp "$tmp/out" "$tmp/shown.yaml"  # what show prints is a recipe that shows the same
"$dltune" recipe show "$tmp/shown.yaml" | diff "$tmp/shown.yaml" - || fail "show's YAML shown again differs"
"$dltune" recipe show --json "$tmp/prog.yaml" >"$tmp/out" || fail "show --json exited $?"
grep -q '"trial_steps": 20' "$tmp/out" || fail "show --json lacks trial_steps: $(cat "$tmp/out")"
sig=$("$dltune" recipe show --signature "$tmp/prog.yaml") || fail "show --signature failed"
[[ $sig =~ ^[0-9a-f]{64}$ ]] || fail "program signature '$sig'"

# A bad program recipe: exit 2, every problem located, in file order.
cat >"$tmp/badprog.yaml" <<'EOF'
model: lenet
program:
  command: [python3, train.py, "{bach}"]
  throughput: {pattern: 'no group'}
launch: {binding: tight}
EOF
(cd "$tmp" && "$dltune" recipe check badprog.yaml) >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "bad program recipe did not exit 2"
diff <(cut -d: -f1-4 "$tmp/err") - <<'EOF' || fail "bad program recipe's problems: $(cat "$tmp/err")"
badprog.yaml:1:1: model
badprog.yaml:3:32: program.command[2]
badprog.yaml:4:25: program.throughput.pattern
badprog.yaml:5:19: launch.binding
EOF
grep -q "did you mean '{batch}'" "$tmp/err" || fail "no 'did you mean' for {bach}"
(cd "$tmp" && "$dltune" recipe show badprog.yaml) >/dev/null 2>&1
[ $? -eq 2 ] || fail "show of a bad program recipe did not exit 2"

# list: the four bundled recipes.
"$dltune" recipe list >"$tmp/out" || fail "list exited $?"
for name in quickstart lenet-mnist alexnet cifar-cnn; do
  grep -q "^$name " "$tmp/out" || fail "list lacks $name"
done

# No subcommand: usage error, exit 2.
"$dltune" recipe >/dev/null 2>&1
[ $? -eq 2 ] || fail "bare 'dltune recipe' did not exit 2"
echo "recipe CLI: all checks passed"
