#!/usr/bin/env bash
# The device kit's checks (issue 26), as .device-kit/run.sh (scripts/device_kit.sh copies this
# file there). On the GPU machine, from the repository root:
#
#   bash .device-kit/run.sh [--dry-run]
#
# in about 8 minutes at most (DLTUNE_KIT_BUDGET seconds, default 470), writing under $OUT (the
# kit's out/ when unset): run.log (all of the output), summary.txt (the last line),
# bench_gpu.json and the GPU tests' gtest XML. Steps:
#   1. the machine: nvidia-smi, glibc, the Python that holds PyTorch (printed), and the CUDA
#      libraries the binaries need (cuda-libs.txt), each found in the machine's CUDA toolkit,
#      the loader's cache or the Python nvidia-* wheels (the first that has it; printed);
#   2. the GPU tests, run directly: engine_gpu_test, engine_gpu_errors_test (the GPU trainer
#      against the CPU trainer), engine_gpu_math_test, nccl_gpu_test (nccl_test's GPU cases),
#      then every GPU op once more under compute-sanitizer's memcheck (when the machine has it
#      and 5 minutes are left), and nccl_run_test (the NCCL probe under `dltune run`);
#   3. `dltune run -n 1 -- dltune-nccl-probe --choice nccl:ring/simple --count 1000003` and
#      `dltune bench --backend nccl -n 1 --algo all`;
#   4. bench_gpu.py: the engine on the GPU against PyTorch on the same GPU, and GPU/CPU losses;
#   5. one summary line.
# --dry-run needs no GPU: the same steps up to the GPU tests' skip messages (the binaries load,
# the PMIx server starts a rank, the PyTorch twins match the built-ins); exit 0 unless something
# that should work without a GPU failed. Without --dry-run, exit 0 only if every check passed.
set -u -o pipefail
kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
# A kit in a read-only place runs from a copy (the large libraries are unpacked in place).
if [ ! -w "$kit" ]; then
  copy=$(mktemp -d)
  cp -r "$kit" "$copy/kit" && exec bash "$copy/kit/run.sh" "$@"
fi
out=${OUT:-$kit/out}
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1
tee_pid=$!
t0=$(date +%s)
budget=${DLTUNE_KIT_BUDGET:-470}
elapsed() { echo $(($(date +%s) - t0)); }
left() { echo $((budget - $(elapsed))); }
section() { printf '\n== %s (%s s)\n' "$*" "$(elapsed)"; }
# A step's limit: `cap` seconds, less when that would leave under `keep` for what follows.
limit() {
  local cap=$1 keep=$2 l
  l=$(($(left) - keep))
  [ "$l" -lt 10 ] && l=10
  [ "$l" -lt "$cap" ] && echo "$l" || echo "$cap"
}
declare -a order=()
declare -A result=()
record() {  # record STEP pass|fail|skip [why]
  order+=("$1")
  result[$1]=$2
  echo "-- $1: $2${3:+ ($3)}"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "dltune device kit $(cat "$kit/share/revision" 2>/dev/null), $([ $dry = 1 ] && echo 'dry run' || echo 'GPU run'), budget ${budget} s, output in $out"

section "machine"
uname -srm
ldd --version 2>&1 | head -1
gpu="none"
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi || echo "nvidia-smi failed ($?)"
  gpu=$(timeout 10 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  [ -n "$gpu" ] || gpu="unknown"
else
  echo "no nvidia-smi on this machine"
fi
gpu=${gpu// /_}

section "Python"
py=""
any_py=""
for c in ${DLTUNE_PYTHON:-} python3 /opt/torch/.venv/bin/python3 /usr/bin/python3 python; do
  p=$(command -v "$c" 2>/dev/null) || continue
  [ -n "$any_py" ] || any_py=$p
  if timeout 120 "$p" -c 'import torch' >/dev/null 2>&1; then
    py=$p
    break
  fi
done
if [ -n "$py" ]; then
  echo "python with PyTorch: $py"
  timeout 60 "$py" -c 'import sys, torch; print("Python", sys.version.split()[0], "PyTorch", torch.__version__, "CUDA", torch.version.cuda, "GPU visible:", torch.cuda.is_available())'
else
  echo "no Python here imports torch (tried ${DLTUNE_PYTHON:-} python3 /opt/torch/.venv/bin/python3 /usr/bin/python3 python)"
fi

section "libraries"
# The large libraries travel compressed.
while IFS= read -r -d '' f; do
  [ -e "${f%.gz}" ] || { gzip -dc "$f" >"${f%.gz}.part" && mv "${f%.gz}.part" "${f%.gz}"; } ||
    echo "could not unpack $f"
done < <(find "$kit/lib" "$kit/lib-fallback" -name '*.gz' -print0)
# Where each CUDA library comes from: the toolkit, the loader's cache, the Python wheels.
dirs=()
for d in ${CUDA_HOME:+$CUDA_HOME/lib64 $CUDA_HOME/lib} /usr/local/cuda/lib64 /usr/local/cuda/lib \
  /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 /usr/local/cuda-*/lib; do
  [ -d "$d" ] && dirs+=("$d:toolkit")
done
while IFS= read -r d; do dirs+=("$d:loader cache"); done < <(ldconfig -p 2>/dev/null |
  sed -n 's/.*=> \(.*\)/\1/p' | grep -E 'libcu|libnccl|libnvrtc|libnvJitLink' | xargs -r -n1 dirname | sort -u)
if [ -n "$py" ]; then
  while IFS= read -r d; do dirs+=("$d:python wheel"); done < <(timeout 60 "$py" - 2>/dev/null <<'EOF'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "*", "lib"))):
        print(d)
EOF
)
fi
cuda_path=""
missing=0
while read -r lib; do
  [ -n "$lib" ] || continue
  found=""
  for e in "${dirs[@]}"; do
    d=${e%%:*}
    if [ -e "$d/$lib" ]; then
      found=$e
      break
    fi
  done
  if [ -z "$found" ]; then
    echo "  $lib: NOT FOUND"
    missing=$((missing + 1))
    continue
  fi
  d=${found%%:*}
  echo "  $lib: $d (${found#*:})"
  case ":$cuda_path:" in *":$d:"*) ;; *) cuda_path=${cuda_path:+$cuda_path:}$d ;; esac
done <"$kit/cuda-libs.txt"
# The driver's libcuda, where the loader's cache does not know it.
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
    if [ -e "$d/libcuda.so.1" ]; then
      echo "  libcuda.so.1: $d (driver)"
      cuda_path=${cuda_path:+$cuda_path:}$d
      break
    fi
  done
fi
env_vars=("LD_LIBRARY_PATH=$kit/lib${cuda_path:+:$cuda_path}"
  "PMIX_PKGLIBDIR=$kit/lib/pmix" "PMIX_MCA_mca_base_component_path=$kit/lib/pmix"
  "PMIX_PKGDATADIR=$kit/share/pmix" "HWLOC_PLUGINS_PATH=$kit/lib/hwloc"
  "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
if [ -d "$kit/lib/openmpi" ]; then
  env_vars+=("OPAL_PKGLIBDIR=$kit/lib/openmpi" "OPAL_PKGDATADIR=$kit/share/openmpi"
    "OPAL_SYSCONFDIR=$kit/etc")
fi
kenv() { env "${env_vars[@]}" "$@"; }
# libstdc++ / libgcc_s of the build only where the machine's are older.
if kenv "$kit/bin/dltune" version 2>&1 | grep -Eq "GLIBCXX|CXXABI|GCC_[0-9]"; then
  env_vars[0]="LD_LIBRARY_PATH=$kit/lib:$kit/lib-fallback${cuda_path:+:$cuda_path}"
  echo "the machine's libstdc++ is older than the build's: using the kit's"
fi
printf '%s\n' "${env_vars[@]}"
printf '%s\n' "${env_vars[@]}" >"$tmp/kit.env"
unresolved=$(for b in "$kit"/bin/*; do kenv ldd "$b" 2>&1 | sed -n "s|^[[:space:]]*\(.*not found\)|$(basename "$b"): \1|p"; done)
if [ -n "$unresolved" ]; then
  echo "unresolved libraries:"
  echo "$unresolved"
fi
if kenv "$kit/bin/dltune" version; then
  record binaries_load pass
else
  record binaries_load fail "dltune version did not run"
fi
if [ "$missing" -gt 0 ]; then
  record cuda_libraries "$([ $dry = 1 ] && echo skip || echo fail)" "$missing not found"
else
  record cuda_libraries pass
fi

# A gtest program: pass (every test ran and passed), skip (all skipped: no GPU), fail.
gtest() {  # gtest NAME CAP_S BINARY [ARGS...]
  local name=$1 cap=$2 bin=$3 rc passed skipped
  shift 3
  section "$name"
  timeout "$(limit "$cap" 200)" env "${env_vars[@]}" "$kit/bin/$bin" "$@" \
    --gtest_output="xml:$out/gtest-$name.xml" >"$tmp/$name.log" 2>&1
  rc=$?
  cat "$tmp/$name.log"
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$tmp/$name.log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$tmp/$name.log" | tail -1)
  if [ "$rc" -ne 0 ]; then
    record "$name" fail "exit $rc"
  elif [ "${passed:-0}" = 0 ] && [ "${skipped:-0}" != 0 ]; then
    record "$name" "$([ $dry = 1 ] && echo skip || echo fail)" "all ${skipped} skipped: no GPU"
  elif [ "${skipped:-0}" != 0 ] && [ $dry = 0 ]; then
    record "$name" fail "$passed passed, $skipped skipped"
  else
    record "$name" pass "${passed:-0} passed${skipped:+, $skipped skipped}"
  fi
}
# Launches blocking: a kernel that faults is named by the call that launched it.
saved_env=("${env_vars[@]}")
env_vars+=("CUDA_LAUNCH_BLOCKING=1")
gtest engine_gpu_test 150 engine_gpu_test
gtest engine_gpu_errors_test 120 engine_gpu_errors_test
env_vars=("${saved_env[@]}")
gtest engine_gpu_math_test 60 engine_gpu_math_test
gtest nccl_gpu_test 120 nccl_test --gtest_filter='NcclGpuTest.*'

# The engine's own kernels under compute-sanitizer's memcheck (out-of-bounds and misaligned
# accesses), with what time is left: every op's GPU twin once.
section "memcheck of the GPU ops"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ $dry = 1 ]; then
  record memcheck skip "dry run"
elif [ -z "$sanitizer" ]; then
  record memcheck skip "no compute-sanitizer"
elif [ "$(left)" -lt 300 ]; then
  record memcheck skip "no time left"
else
  timeout "$(limit 90 240)" env "${env_vars[@]}" "$sanitizer" --tool memcheck --error-exitcode 3 \
    "$kit/bin/engine_gpu_test" --gtest_filter='Ops/GpuLayerTest.MatchesCpu/*' --gtest_brief=1 \
    >"$tmp/memcheck.log" 2>&1
  rc=$?
  tail -40 "$tmp/memcheck.log"
  case $rc in
    0) record memcheck pass ;;
    124) record memcheck skip "timed out" ;;
    *) record memcheck fail "exit $rc" ;;
  esac
fi

section "nccl_run_test"
timeout "$(limit 120 200)" env "${env_vars[@]}" bash "$kit/share/nccl_run_test.sh" \
  "$kit/bin/dltune" "$kit/bin/dltune-nccl-probe"
rc=$?
case $rc in
  0) record nccl_run_test pass ;;
  77) record nccl_run_test "$([ $dry = 1 ] && echo skip || echo fail)" "no GPU or no NCCL" ;;
  *) record nccl_run_test fail "exit $rc" ;;
esac

section "dltune run: a rank under the embedded PMIx server"
if timeout 60 env "${env_vars[@]}" "$kit/bin/dltune" run -n 1 -- /bin/echo "rank started"; then
  record pmix_rank pass
else
  record pmix_rank fail "dltune run -n 1 -- /bin/echo"
fi

section "dltune run -n 1 -- dltune-nccl-probe --choice nccl:ring/simple --count 1000003"
why=$(kenv "$kit/bin/dltune-nccl-probe" --check-device 2>&1)
rc=$?
if [ $rc -eq 77 ]; then
  echo "$why"
  record nccl_probe "$([ $dry = 1 ] && echo skip || echo fail)" "no GPU"
else
  timeout "$(limit 90 190)" env "${env_vars[@]}" "$kit/bin/dltune" run -n 1 -- \
    "$kit/bin/dltune-nccl-probe" --choice nccl:ring/simple --count 1000003
  rc=$?
  if [ $rc -eq 0 ]; then record nccl_probe pass; else record nccl_probe fail "exit $rc"; fi
fi

section "dltune bench --backend nccl -n 1 --algo all"
if [ "${result[nccl_probe]}" = skip ]; then
  record nccl_bench skip "no GPU"
else
  timeout "$(limit 150 180)" env "${env_vars[@]}" "$kit/bin/dltune" bench --backend nccl -n 1 \
    --algo all
  rc=$?
  if [ $rc -eq 0 ]; then record nccl_bench pass; else record nccl_bench fail "exit $rc"; fi
fi

section "bench_gpu.py: the engine on the GPU against PyTorch"
bench_line=""
bpy=${py:-$any_py}
if [ -z "$bpy" ]; then
  record bench_gpu "$([ $dry = 1 ] && echo skip || echo fail)" "no Python"
else
  args=(--bin "$kit/bin" --worker-env "$tmp/kit.env")
  if [ $dry = 1 ]; then
    args+=(--dry-run)
  else
    args+=(--budget "$(($(left) - 15))" --out "$out/bench_gpu.json")
  fi
  PYTHONUNBUFFERED=1 timeout "$(limit 600 5)" "$bpy" "$kit/share/bench_gpu.py" "${args[@]}" \
    2>&1 | tee "$tmp/bench.log"
  rc=$?
  bench_line=$(grep '^summary: ' "$tmp/bench.log" | tail -1 | sed 's/^summary: //')
  if [ $rc -ne 0 ]; then
    record bench_gpu fail "exit $rc"
  elif [ $dry = 0 ] && grep -q 'skipped: ' "$tmp/bench.log"; then
    record bench_gpu fail "$(grep -m1 'skipped: ' "$tmp/bench.log")"
  else
    record bench_gpu pass
  fi
fi

section "summary"
line="summary: gpu=${gpu:-none}"
failed=0
for s in "${order[@]}"; do
  line+=" $s=${result[$s]}"
  [ "${result[$s]}" = fail ] && failed=1
done
[ -n "$bench_line" ] && line+=" $bench_line"
line+=" wall_s=$(elapsed)"
echo "$line" | tee "$out/summary.txt"
exec >&- 2>&-
wait "$tee_pid" 2>/dev/null
exit $failed
