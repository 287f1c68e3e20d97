#!/usr/bin/env bash
# The device kit's checks (issue 26), as .device-kit/run.sh (scripts/device_kit.sh copies this
# file there). On the GPU machine, from the repository root, with .device-kit carried:
#
#   bash .device-kit/run.sh [--dry-run]
#
# in DLTUNE_KIT_BUDGET seconds (default 450; give the device call about 540), writing under
# $OUT (the kit's out/ when unset), as it goes: run.log (all of the output), progress.txt (one
# line per finished step: a run cut short still says how far it got), bench_gpu.json (case by
# case) and summary.txt (the summary line). Each step runs under `timeout` (SIGKILL 10 s after
# SIGTERM), capped so that it leaves the later steps their minimum: one hang costs its cap only.
#
#   step                        cap (s)  what
#   unpack                       60      the kit is copied to a scratch folder, its .xz files
#                                        unpacked there (the carried kit stays as it is)
#   machine                      30+20   uname, glibc, nvidia-smi (full, then the GPU's name)
#   python                       90      the Python that holds PyTorch: versions, GPU, the
#                                        nvidia-* wheels' lib folders (one interpreter start)
#   libraries                    -       each CUDA library the binaries need (cuda-libs.txt),
#                                        found in the CUDA toolkit, the loader's cache or the
#                                        wheels (printed with its source); the driver's libcuda;
#                                        the environment (printed); every binary's ldd resolves;
#                                        with --dry-run, every shared object the binaries and
#                                        the PMIx/MPI plugins load comes from the kit, glibc or
#                                        CUDA (LD_DEBUG), so the kit is complete
#   engine_gpu_test             150      every op's GPU twin against the CPU op, finite
#                                        differences, GpuModel (CUDA_LAUNCH_BLOCKING=1)
#   engine_gpu_errors_test      120      the GPU trainer against the CPU trainer (losses per step,
#                                        held-out loss, checkpoints), error paths
#   engine_gpu_math_test         60      kernel index math replayed on the CPU (no GPU needed)
#   nccl_gpu_test               120      nccl_test's NcclGpuTest.* (1-rank NCCL communicator)
#   memcheck                     90      compute-sanitizer memcheck over every op's twin, only when
#                                        the machine has it and 300 s are left
#   nccl_run_test               120      tests/launcher/nccl_run_test.sh (probe under dltune run)
#   pmix_rank                    60      dltune run -n 1 -- /bin/echo (the embedded PMIx server)
#   host_bench                   60      dltune bench -n 1 --algo ring,rd, 64 KiB (host memory)
#   nccl_probe                   90      dltune run -n 1 -- dltune-nccl-probe --choice
#                                        nccl:ring/simple --count 1000003
#   nccl_bench                  150      dltune bench --backend nccl -n 1 --algo all
#   bench_gpu                   rest     bench_gpu.py: the engine on the GPU against PyTorch on
#                                        the same GPU, and GPU/CPU loss agreement (its own budget:
#                                        what is left less 15 s)
#   summary                      -       one line: summary: gpu=NAME STEP=pass|fail|skip ...
#                                        [bench_gpu's ratios] wall_s=S
#
# --dry-run needs no GPU: the same steps, the GPU tests reaching their skip messages, the PyTorch
# twins checked against the built-ins and every bench case's configuration against the worker;
# exit 0 unless something that should work without a GPU failed. Without --dry-run, exit 0 only
# if every check passed.
set -u -o pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1
budget=${DLTUNE_KIT_BUDGET:-450}
t0=${DLTUNE_KIT_T0:-$(date +%s)}

# Unpack into a scratch copy (once): the carried kit holds its large files compressed with xz.
if [ -z "${DLTUNE_KIT_SCRATCH:-}" ]; then
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/dltune-kit.XXXXXX") || exit 1
  unxz_to() {  # unxz_to FILE.xz OUT
    if command -v xz >/dev/null 2>&1; then
      xz -dc "$1" >"$2"
    else  # Python's lzma reads xz: any python3 will do
      python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as i, open(sys.argv[2], "wb") as o: shutil.copyfileobj(i, o)' "$1" "$2"
    fi
  }
  ok=1
  timeout 60 cp -a "$src/." "$scratch/" || ok=0
  rm -rf "$scratch/out"
  while IFS= read -r -d '' f; do
    if unxz_to "$f" "${f%.xz}"; then
      rm -f "$f"
      case "$f" in */bin/*) chmod +x "${f%.xz}" ;; esac
    else
      echo "run.sh: could not unpack $f (no xz and no python3?)"
      ok=0
    fi
  done < <(find "$scratch" -name '*.xz' -print0)
  if [ $ok = 0 ]; then
    echo "run.sh: could not copy and unpack the kit into $scratch"
    rm -rf "$scratch"
    exit 1
  fi
  DLTUNE_KIT_SCRATCH=$scratch DLTUNE_KIT_SOURCE=$src DLTUNE_KIT_T0=$t0 \
    OUT="${OUT:-$src/out}" bash "$scratch/run.sh" "$@"
  rc=$?
  rm -rf "$scratch"
  exit $rc
fi
kit=$DLTUNE_KIT_SCRATCH
out=$OUT
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1
tee_pid=$!
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
boxed() {  # boxed SECONDS CMD...: CMD under timeout, killed 10 s after the TERM it ignores
  local s=$1
  shift
  timeout -k 10 "$s" "$@"
}
declare -a order=()
declare -A result=()
record() {  # record STEP pass|fail|skip [why]
  order+=("$1")
  result[$1]=$2
  echo "-- $1: $2${3:+ ($3)}"
  echo "$(elapsed) s $1=$2${3:+ ($3)}" >>"$out/progress.txt"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$out/progress.txt"
echo "dltune device kit $(cat "$kit/share/revision" 2>/dev/null), \
$([ $dry = 1 ] && echo 'dry run' || echo 'GPU run'), budget ${budget} s, kit ${DLTUNE_KIT_SOURCE:-?} \
(unpacked in $kit), output in $out"

section "machine"
uname -srm
ldd --version 2>&1 | head -1
gpu="none"
smi=$(command -v nvidia-smi || ls /usr/local/nvidia/bin/nvidia-smi /usr/bin/nvidia-smi 2>/dev/null | head -1)
if [ -n "$smi" ]; then
  boxed 30 "$smi" || echo "nvidia-smi failed ($?)"
  gpu=$(boxed 20 "$smi" --query-gpu=name,driver_version,memory.total --format=csv,noheader \
    2>/dev/null | head -1)
  echo "GPU: ${gpu:-unknown}"
  gpu=${gpu%%,*}
  [ -n "$gpu" ] || gpu="unknown"
else
  echo "no nvidia-smi on this machine"
fi
gpu=${gpu// /_}

section "python"
# The first interpreter that imports torch; one start prints what the run needs of it.
py=""
any_py=""
wheel_dirs=()
for c in ${DLTUNE_PYTHON:-} python3 /opt/torch/.venv/bin/python3 /usr/bin/python3 python; do
  p=$(command -v "$c" 2>/dev/null) || continue
  [ -n "$any_py" ] || any_py=$p
  info=$(boxed "$(limit 90 300)" "$p" - 2>&1 <<'EOF'
import glob, os, site, sys
import torch
print("python:", sys.executable, sys.version.split()[0])
print("torch:", torch.__version__, "CUDA", torch.version.cuda, "cuDNN",
      torch.backends.cudnn.version(), "GPU visible:", torch.cuda.is_available())
roots = []
try:
    import nvidia
    roots += list(nvidia.__path__)
except Exception:
    pass
for s in site.getsitepackages() + [site.getusersitepackages()]:
    roots.append(os.path.join(s, "nvidia"))
seen = set()
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "*", "lib")) + glob.glob(os.path.join(r, "lib"))):
        d = os.path.realpath(d)
        if d not in seen and os.path.isdir(d):
            seen.add(d)
            print("wheel-lib:", d)
EOF
  )
  rc=$?
  if [ $rc -eq 0 ]; then
    py=$p
    echo "$info" | grep -v '^wheel-lib: '
    while IFS= read -r d; do wheel_dirs+=("$d"); done < <(echo "$info" | sed -n 's/^wheel-lib: //p')
    break
  fi
  echo "$p: no torch ($(echo "$info" | tail -1))"
done
[ -n "$py" ] || echo "no Python here imports torch (tried ${DLTUNE_PYTHON:-} python3 /opt/torch/.venv/bin/python3 /usr/bin/python3 python)"

section "libraries"
# Where each CUDA library comes from: the toolkit, the loader's cache, the Python wheels.
dirs=()
for d in ${CUDA_HOME:+$CUDA_HOME/lib64 $CUDA_HOME/lib} /usr/local/cuda/lib64 /usr/local/cuda/lib \
  /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 /usr/local/cuda-*/lib; do
  [ -d "$d" ] && dirs+=("$d:toolkit")
done
while IFS= read -r d; do dirs+=("$d:loader cache"); done < <(ldconfig -p 2>/dev/null |
  sed -n 's/.*=> \(.*\)/\1/p' | grep -E 'libcu|libnccl|libnvrtc|libnvJitLink' | xargs -r -n1 dirname | sort -u)
for d in "${wheel_dirs[@]}"; do dirs+=("$d:python wheel"); done
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
# cuDNN loads its engine libraries (libcudnn_*.so.9) from its own folder, on the path already,
# and, for its runtime-compiled engines, NVRTC and nvJitLink: on the path where found.
for lib in libnvrtc.so.13 libnvJitLink.so.13; do
  for e in "${dirs[@]}"; do
    d=${e%%:*}
    [ -e "$d/$lib" ] || continue
    echo "  $lib: $d (${e#*:}; for cuDNN)"
    case ":$cuda_path:" in *":$d:"*) ;; *) cuda_path=${cuda_path:+$cuda_path:}$d ;; esac
    break
  done
done
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
env_vars=("LD_LIBRARY_PATH=$kit/lib${cuda_path:+:$cuda_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  "PMIX_MCA_mca_base_component_path=$kit/lib/pmix" "PMIX_PKGLIBDIR=$kit/lib/pmix"
  "PMIX_PKGDATADIR=$kit/share/pmix" "HWLOC_PLUGINS_PATH=$kit/lib/hwloc"
  "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
if [ -d "$kit/lib/openmpi" ]; then
  env_vars+=("OPAL_PKGLIBDIR=$kit/lib/openmpi" "OPAL_PKGDATADIR=$kit/share/openmpi"
    "OPAL_SYSCONFDIR=$kit/etc")
fi
kenv() { boxed 60 env "${env_vars[@]}" "$@"; }
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
if [ -z "$unresolved" ] && kenv "$kit/bin/dltune" version; then
  record binaries_load pass
else
  record binaries_load fail "dltune version did not run, or a library is unresolved"
fi
if [ "$missing" -gt 0 ]; then
  record cuda_libraries "$([ $dry = 1 ] && echo skip || echo fail)" "$missing not found"
else
  record cuda_libraries pass
fi

# Every shared object a process loads, by path (LD_DEBUG=files writes one file per process).
loaded_from_elsewhere() {  # loaded_from_elsewhere CMD...: prints what did not come from the kit
  local d="$tmp/ld.$RANDOM" f
  mkdir -p "$d"
  boxed 60 env "${env_vars[@]}" LD_DEBUG=files LD_DEBUG_OUTPUT="$d/ld" "$@" >/dev/null 2>&1
  for f in "$d"/ld.*; do
    [ -e "$f" ] || continue
    sed -n -e 's/.*calling init: \(.*\)/\1/p' \
      -e 's/.*file=\(\/[^ ]*\) \[[0-9]*\];  dynamically loaded by.*/\1/p' "$f"
  done | sort -u | while read -r so; do
    case "$so" in
      "$kit"/*) continue ;;
    esac
    case "$(basename "$so")" in
      ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libutil.so*|\
      libanl.so*|libmvec.so*|libnss_*|libgcc_s.so*|libstdc++.so*) continue ;;
    esac
    case ":$cuda_path:" in *":$(dirname "$so"):"*) continue ;; esac
    echo "$so"
  done
}
if [ $dry = 1 ]; then
  section "the kit is complete (every shared object from the kit, glibc or CUDA)"
  {
    loaded_from_elsewhere "$kit/bin/dltune" version
    loaded_from_elsewhere "$kit/bin/dltune" run -n 1 -- /bin/true
    loaded_from_elsewhere "$kit/bin/dltune" bench -n 1 --algo ring --max-bytes 64
    loaded_from_elsewhere "$kit/bin/dltune" model list
    for b in engine_gpu_test engine_gpu_errors_test engine_gpu_math_test nccl_test; do
      loaded_from_elsewhere "$kit/bin/$b" --gtest_list_tests
    done
  } | sort -u >"$tmp/elsewhere"
  if [ -s "$tmp/elsewhere" ]; then
    echo "loaded from outside the kit (the GPU machine will not have these):"
    cat "$tmp/elsewhere"
    record kit_complete fail "$(wc -l <"$tmp/elsewhere") shared objects from outside the kit"
  else
    record kit_complete pass
  fi
fi

# A gtest program: pass (every test ran and passed), skip (all skipped: no GPU), fail.
gtest() {  # gtest NAME CAP_S BINARY [ARGS...]
  local name=$1 cap=$2 bin=$3 rc passed skipped
  shift 3
  section "$name"
  boxed "$(limit "$cap" 200)" env "${env_vars[@]}" "$kit/bin/$bin" "$@" >"$tmp/$name.log" 2>&1
  rc=$?
  cat "$tmp/$name.log"
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$tmp/$name.log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$tmp/$name.log" | tail -1)
  if [ "$rc" -ne 0 ]; then
    record "$name" fail "exit $rc$([ "$rc" -ge 124 ] && echo ': timed out or killed')"
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
env_vars=("${saved_env[@]}")
gtest engine_gpu_errors_test 120 engine_gpu_errors_test
gtest engine_gpu_math_test 60 engine_gpu_math_test --gtest_brief=1
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
  boxed "$(limit 90 240)" env "${env_vars[@]}" "$sanitizer" --tool memcheck --error-exitcode 3 \
    "$kit/bin/engine_gpu_test" --gtest_filter='Ops/GpuLayerTest.MatchesCpu/*' --gtest_brief=1 \
    >"$tmp/memcheck.log" 2>&1
  rc=$?
  tail -40 "$tmp/memcheck.log"
  case $rc in
    0) record memcheck pass ;;
    124|137) record memcheck skip "timed out" ;;
    *) record memcheck fail "exit $rc" ;;
  esac
fi

section "nccl_run_test"
boxed "$(limit 120 200)" env "${env_vars[@]}" bash "$kit/share/nccl_run_test.sh" \
  "$kit/bin/dltune" "$kit/bin/dltune-nccl-probe"
rc=$?
case $rc in
  0) record nccl_run_test pass ;;
  77) record nccl_run_test "$([ $dry = 1 ] && echo skip || echo fail)" "no GPU or no NCCL" ;;
  *) record nccl_run_test fail "exit $rc" ;;
esac

section "dltune run: a rank under the embedded PMIx server"
if boxed 60 env "${env_vars[@]}" "$kit/bin/dltune" run -n 1 -- /bin/echo "rank started"; then
  record pmix_rank pass
else
  record pmix_rank fail "dltune run -n 1 -- /bin/echo"
fi

section "dltune bench -n 1 --algo ring,rd --min-bytes 64KiB --max-bytes 64KiB (host memory)"
if boxed 60 env "${env_vars[@]}" "$kit/bin/dltune" bench -n 1 --algo ring,rd --min-bytes 64KiB \
  --max-bytes 64KiB; then
  record host_bench pass
else
  record host_bench fail "exit $?"
fi

section "dltune run -n 1 -- dltune-nccl-probe --choice nccl:ring/simple --count 1000003"
why=$(kenv "$kit/bin/dltune-nccl-probe" --check-device 2>&1)
rc=$?
if [ $rc -eq 77 ]; then
  echo "$why"
  record nccl_probe "$([ $dry = 1 ] && echo skip || echo fail)" "no GPU"
else
  boxed "$(limit 90 190)" env "${env_vars[@]}" "$kit/bin/dltune" run -n 1 -- \
    "$kit/bin/dltune-nccl-probe" --choice nccl:ring/simple --count 1000003
  rc=$?
  if [ $rc -eq 0 ]; then record nccl_probe pass; else record nccl_probe fail "exit $rc"; fi
fi

section "dltune bench --backend nccl -n 1 --algo all"
if [ "${result[nccl_probe]}" = skip ]; then
  record nccl_bench skip "no GPU"
else
  boxed "$(limit 150 180)" env "${env_vars[@]}" "$kit/bin/dltune" bench --backend nccl -n 1 \
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
  PYTHONUNBUFFERED=1 boxed "$(limit 600 5)" "$bpy" "$kit/share/bench_gpu.py" "${args[@]}" \
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
