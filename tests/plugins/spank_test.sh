#!/usr/bin/env bash
# The SPANK plugin with real Slurm daemons (tests/slurm/cluster.sh): the option shows in
# `srun --help`; a job gets the plan's environment and binding; --dltune=off gets nothing; a
# broken database or a missing plan leaves the job running normally with one log line;
# hostile option values and a hostile hwloc export change nothing; a bad plugstack argument drops
# only itself; the profiles (bind-only, collectives-only, tuned) apply
# what they say; --dltune-tune tunes as the job's user (root and nobody) when the database has no
# plan, then applies it, and never runs a program it does not trust.
#
# Usage: spank_test.sh DLTUNE_BIN SPANK_SO SOURCE_DIR      (exit 77 = skipped)
set -uo pipefail
dltune=$1 spank_so=$2 src=$3
lassen=$src/topology/tests/data/mpibind_coral-lassen.xml
fail=0
check() {  # check NAME CONDITION-EXIT-CODE [DETAIL]
  if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAILED: $1 ${3:-}"; fail=1; fi
}

dir=$(mktemp -d /tmp/dltune-spank-XXXXXX)
"$src/tests/slurm/cluster.sh" start "$dir/cluster" 1 4
rc=$?
if [ $rc -eq 77 ]; then echo "skipped: Slurm or munge is not installed"; rm -rf "$dir"; exit 77; fi
[ $rc -eq 0 ] || { echo "FAILED: the test cluster did not start"; rm -rf "$dir"; exit 1; }
trap '"$src/tests/slurm/cluster.sh" stop "$dir/cluster"; rm -rf "$dir" /tmp/dltune-pwned' EXIT
plugstack() { echo "required $spank_so $*" > "$dir/cluster/plugstack.conf"; }
# The tuning run --dltune-tune starts: this build's dltune (root-owned), tiny sizes.
plugstack "dltune=$dltune" tune_max_bytes=64 tune_timeout=120
# shellcheck disable=SC1091
source "$dir/cluster/env.sh"
export XDG_DATA_HOME=$dir/xdg   # never the real user database

help=$(srun --help 2>&1)
echo "$help" | grep -q -- '--dltune=\[PROFILE|off\]' && echo "$help" | grep -q -- '--dltune-tune' &&
  echo "$help" | tr -s ' \n' ' ' | grep -q 'PROFILE: default .*bind-only, collectives-only, tuned'
check "srun --help lists --dltune and --dltune-tune" $?

# A collective plan for this machine and a 1 x 2 step, tuned for real (tiny sizes).
db=$dir/user.db
"$dltune" tune --collectives -n 2 --max-bytes 64 --db "$db" > "$dir/tune.log" 2>&1
check "dltune tune --collectives stored a plan" $? "$(tail -3 "$dir/tune.log")"

probe='echo "task=$SLURM_LOCALID plan=${DLTUNE_PLAN:-none} rules=${OMPI_MCA_coll_tuned_dynamic_rules_filename:-none} cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2) gpu=${CUDA_VISIBLE_DEVICES:-none} hca=${NCCL_IB_HCA:-none}"; [ -z "${DLTUNE_PLAN:-}" ] || grep -q allreduce "$DLTUNE_PLAN" && echo "task=$SLURM_LOCALID planfile=ok"'

out=$(DLTUNE_DB=$db srun --dltune -N1 -n2 sh -c "$probe" 2>&1)
echo "$out" | sed 's/^/  /'
for t in 0 1; do
  echo "$out" | grep -q "task=$t plan=/.*/plan.json rules=/.*/ompi_rules.conf cpus=$t " 
  check "task $t got DLTUNE_PLAN, the Open MPI rules and its core" $?
  echo "$out" | grep -q "task=$t planfile=ok"
  check "task $t can read the plan" $?
done

out=$(DLTUNE_DB=$db srun --dltune=off -N1 -n2 sh -c "$probe" 2>&1)
[ "$(echo "$out" | grep -c 'plan=none rules=none')" -eq 2 ]
check "--dltune=off: nothing applied" $? "$out"
out=$(DLTUNE_DB=$db srun -N1 -n2 sh -c "$probe" 2>&1)
[ "$(echo "$out" | grep -c 'plan=none rules=none')" -eq 2 ]
check "no --dltune (site default off): nothing applied" $? "$out"

echo "this is not a database" > "$dir/broken.db"
out=$(DLTUNE_DB=$dir/broken.db srun --dltune -N1 -n1 sh -c "$probe; echo job-ran" 2>&1)
rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q job-ran && echo "$out" | grep -q 'plan=none'
check "broken database: the job runs untouched" $? "$out"
out=$(DLTUNE_DB=$dir/missing.db srun --dltune -N1 -n1 sh -c "$probe; echo job-ran" 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q job-ran && echo "$out" | grep -q 'plan=none'
check "no plan for this shape: the job runs untouched" $? "$out"
grep -rq "dltune: .*not a dltune\|dltune: .*database\|dltune: .*file is not" "$dir/cluster/log" 
check "the broken database left one log line" $?
grep -rq "dltune: no plan for this node" "$dir/cluster/log"
check "the missing plan left one log line" $?

# A hostile hwloc export in the job's environment (the reported 827-byte reproducer: libhwloc 2.9
# crashes on it, and srun hung when slurmstepd did): hwloc never runs inside slurmstepd, the
# helper refuses the file, and the job completes untouched with one log line.
crash=$src/topology/tests/data/hostile/machine-without-complete-cpuset.xml
for profile in default bind-only; do
  lines_before=$(grep -rh "dltune: .*machine-without-complete-cpuset.xml" "$dir/cluster/log" | wc -l)
  out=$(DLTUNE_TOPO_XML=$crash DLTUNE_DB=$db timeout 60 srun "--dltune=$profile" -N1 -n2 \
    sh -c "$probe; echo job-ran" 2>&1)
  rc=$?
  [ $rc -eq 0 ] && [ "$(echo "$out" | grep -c job-ran)" -eq 2 ] && echo "$out" | grep -q 'plan=none'
  check "hostile DLTUNE_TOPO_XML ($profile): the job completes untouched" $? "rc=$rc $out"
  lines=$(grep -rh "dltune: .*machine-without-complete-cpuset.xml" "$dir/cluster/log")
  [ "$(echo "$lines" | wc -l)" -eq $((lines_before + 1)) ] &&
    echo "$lines" | tail -1 | grep -q "has no complete_cpuset attribute; .*the job runs untouched"
  check "hostile DLTUNE_TOPO_XML ($profile): one log line saying why" $? "$lines"
done
grep -rh "dltune: .*machine-without-complete-cpuset.xml" "$dir/cluster/log" | tail -1 | sed 's/^/  log: /'

# One bad plugstack argument drops only itself: site_db still applies, and the log says so.
plugstack "site_db=$db" "tune_timeout=5s"
out=$(DLTUNE_DB=$dir/missing.db srun --dltune -N1 -n2 sh -c "$probe" 2>&1)
echo "$out" | grep -q "task=0 plan=/.*/plan.json" && echo "$out" | grep -q "task=1 plan=/.*/plan.json"
check "a bad plugstack argument keeps the good ones (site_db)" $? "$out"
grep -rq "dltune: plugstack argument 'tune_timeout=5s' ignored .*the other settings on the line apply" "$dir/cluster/log"
check "the ignored plugstack argument is named in the log" $?
! grep -rq "dltune stays off" "$dir/cluster/log"
check "no log line says dltune stays off while it applies" $?
plugstack "dltune=$dltune" tune_max_bytes=64 tune_timeout=120

long=$(printf 'a%.0s' $(seq 5000))
for v in '$(touch /tmp/dltune-pwned)' 'x;touch /tmp/dltune-pwned' '../../../etc/passwd' "$long" '`id`'; do
  out=$(DLTUNE_DB=$db srun "--dltune=$v" -N1 -n1 sh -c "$probe; echo job-ran" 2>&1)
  rc=$?
  [ $rc -eq 0 ] && echo "$out" | grep -q job-ran && echo "$out" | grep -q 'plan=none' && [ ! -e /tmp/dltune-pwned ]
  check "hostile --dltune value (${v:0:30}) changes nothing" $? "$out"
done

# A GPU node (Lassen's hwloc export): each task gets its GPU and closest InfiniBand HCA.
DLTUNE_TOPO_XML=$lassen "$dltune" tune --collectives -n 2 --max-bytes 64 --db "$db" > "$dir/tune2.log" 2>&1
check "plan for the Lassen topology" $? "$(tail -3 "$dir/tune2.log")"
out=$(DLTUNE_TOPO_XML=$lassen DLTUNE_DB=$db srun --dltune -N1 -n2 sh -c "$probe" 2>&1)
echo "$out" | sed 's/^/  /'
echo "$out" | grep -q 'task=0 plan=/.* gpu=0 hca==mlx5_0' && echo "$out" | grep -q 'task=1 plan=/.* gpu=1 hca==mlx5_1'
check "Lassen tasks got CUDA_VISIBLE_DEVICES and NCCL_IB_HCA from the placement" $?

# ---- Profiles (policy.h): what each applies.
unbound=$(srun -N1 -n1 sh -c 'grep Cpus_allowed_list /proc/self/status | cut -f2')
out=$(DLTUNE_DB=$dir/missing.db srun --dltune=bind-only -N1 -n2 sh -c "$probe" 2>&1)
echo "$out" | sed 's/^/  /'
echo "$out" | grep -q 'task=0 plan=none rules=none cpus=0 ' && echo "$out" | grep -q 'task=1 plan=none rules=none cpus=1 '
check "bind-only: binding without a plan or collective settings" $? "$out"
out=$(DLTUNE_TOPO_XML=$lassen DLTUNE_DB=$db srun --dltune=collectives-only -N1 -n2 sh -c "$probe" 2>&1)
echo "$out" | sed 's/^/  /'
[ "$(echo "$out" | grep -c "plan=/.*/plan.json rules=/.*/ompi_rules.conf cpus=$unbound gpu=none hca=none")" -eq 2 ]
check "collectives-only: plan and rules, no binding, GPU or NIC" $? "$out"
out=$(DLTUNE_DB=$db srun --dltune=fast -N1 -n1 sh -c "$probe; echo job-ran" 2>&1)
echo "$out" | grep -q job-ran && echo "$out" | grep -q 'plan=none'
check "unknown profile: the job runs untouched" $? "$out"

# ---- --dltune-tune: no plan in an empty database -> dltune tune as the job's user, then applied.
tuned_lines() { grep -rh "dltune: tuned collectives" "$dir/cluster/log" | wc -l; }
before=$(tuned_lines)
echo "srun --dltune-tune -N1 -n2 (DLTUNE_DB=$dir/fresh.db, empty)"
out=$(DLTUNE_DB=$dir/fresh.db srun --dltune-tune -N1 -n2 sh -c "$probe" 2>&1)
echo "$out" | sed 's/^/  /'
echo "$out" | grep -q "task=0 plan=/.*/plan.json rules=/.*/ompi_rules.conf cpus=0 " &&
  echo "$out" | grep -q "task=1 plan=/.*/plan.json rules=/.*/ompi_rules.conf cpus=1 " &&
  echo "$out" | grep -q "task=1 planfile=ok"
check "--dltune-tune: tuned, then the tasks got the new plan" $? "$out"
[ -s "$dir/fresh.db" ] && [ $(( $(tuned_lines) - before )) -eq 1 ]
check "--dltune-tune stored the plan in the job's database and logged one line" $?
grep -rh "dltune: tuned collectives" "$dir/cluster/log" | tail -1 | sed 's/^/  log: /'
out=$(DLTUNE_DB=$dir/fresh.db srun --dltune-tune -N1 -n2 sh -c "$probe" 2>&1)
echo "$out" | grep -q "task=1 plan=/.*/plan.json" && [ $(( $(tuned_lines) - before )) -eq 1 ]
check "--dltune-tune with a plan present: no second tuning run" $? "$out"
out=$(DLTUNE_DB=$dir/fresh2.db srun --dltune=tuned -N1 -n2 sh -c "$probe" 2>&1)
echo "$out" | grep -q "task=0 plan=/.*/plan.json" && [ -s "$dir/fresh2.db" ]
check "--dltune=tuned tunes like --dltune-tune" $? "$out"
out=$(DLTUNE_DB=$dir/fresh3.db srun --dltune=off --dltune-tune -N1 -n1 sh -c "$probe" 2>&1)
echo "$out" | grep -q 'plan=none' && [ ! -e "$dir/fresh3.db" ]
check "--dltune=off wins over --dltune-tune" $? "$out"

# As an unprivileged user: the tuning run and the database it writes belong to that user.
chmod 0755 "$dir"  # mktemp made it 0700; nobody must reach its own directory
nobody_dir=$dir/nobody && mkdir -p "$nobody_dir" && chown 65534:65534 "$nobody_dir"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$nobody_dir" \
  DLTUNE_DB="$nobody_dir/user.db" SLURM_CONF="$SLURM_CONF" \
  srun --chdir=/tmp --dltune-tune -N1 -n2 sh -c "id -u; $probe" 2>&1)
echo "$out" | sed 's/^/  /'
echo "$out" | grep -q "task=1 plan=/.*/plan.json" && [ "$(stat -c %u "$nobody_dir/user.db")" = 65534 ] &&
  grep -rq "dltune: tuned collectives for 2 local task(s) as uid 65534" "$dir/cluster/log"
check "--dltune-tune as nobody: tuned as uid 65534 into nobody's database" $? "$out"

# A program the plugin does not trust (world-writable, not root's) is never run.
mkdir -p "$dir/evil" && chmod 0777 "$dir/evil"
printf '#!/bin/sh\ntouch /tmp/dltune-pwned\n' > "$dir/evil/dltune" && chmod 0777 "$dir/evil/dltune"
plugstack "dltune=$dir/evil/dltune"
out=$(DLTUNE_DB=$dir/fresh4.db srun --dltune-tune -N1 -n1 sh -c "$probe; echo job-ran" 2>&1)
echo "$out" | grep -q job-ran && echo "$out" | grep -q 'plan=none' && [ ! -e /tmp/dltune-pwned ] &&
  grep -rq "dltune: not tuning: .*writable by group or others" "$dir/cluster/log"
check "untrusted dltune program: not run, the job runs untouched, one log line" $? "$out"
# A tuning run that fails (here: killed by the timeout) leaves the job running untouched.
printf '#!/bin/sh\nsleep 30\n' > "$dir/slow-dltune" && chmod 0755 "$dir/slow-dltune"
plugstack "dltune=$dir/slow-dltune" tune_timeout=1
out=$(DLTUNE_DB=$dir/fresh5.db srun --dltune-tune -N1 -n1 sh -c "$probe; echo job-ran" 2>&1)
echo "$out" | grep -q job-ran && echo "$out" | grep -q 'plan=none' &&
  grep -rq "dltune: tuning failed: .*killed" "$dir/cluster/log"
check "a tuning run past the timeout is killed; the job runs untouched" $? "$out"

[ $fail -eq 0 ] && echo "all SPANK checks passed"
exit $fail
