#!/usr/bin/env bash
# The device kit (issue 26): what a GPU machine without dltune's Debian dependencies needs to run
# dltune's GPU checks, in one git-ignored folder that travels there beside the working tree.
#
#   scripts/device_kit.sh [--out DIR] [--build-dir DIR] [--from-build DIR] [--dry-run]
#
# By default it configures and builds a Release tree with CUDA and NCCL for sm_90 in build-kit/
# (only the targets the checks run), then assembles .device-kit/:
#   bin/          the binaries, stripped: dltune, dltune-worker, dltune-bench-rank,
#                 dltune-nccl-probe, dltune-rank-env, engine_gpu_test, engine_gpu_errors_test,
#                 engine_gpu_math_test, nccl_test
#   lib/          every non-CUDA shared library they load (found with ldd; glibc excepted), and
#                 the plugin folders of PMIx (lib/pmix), Open MPI (lib/openmpi, when a binary
#                 loads it) and hwloc (lib/hwloc: PCI discovery), with their own dependencies
#   lib-fallback/ libstdc++ and libgcc_s, used only where the machine's are older than the build's
#   share/        run.sh's helpers: the PMIx and Open MPI help and parameter files, the NCCL run
#                 test, bench_gpu.py and the PyTorch twins it imports, the bundled recipes
#   cuda-libs.txt the CUDA libraries the binaries need (not carried: run.sh finds the machine's)
#   run.sh        the checks (bench/gpu/device_run.sh; --dry-run works without a GPU)
# Files above 1 MiB travel compressed with xz (FILE.xz); run.sh unpacks the kit into a scratch
# folder before it runs anything (with xz, or Python's lzma where xz is missing), so the carried
# folder never grows. The script fails if the kit exceeds 56 MiB (the device machine takes 64 MiB
# of carried files, the working tree included).
#
#   --from-build DIR  assemble from an existing build tree instead of building (the CI test
#                     does this with the regular build, and compresses faster: xz -1)
#   --dry-run         then run the kit's run.sh --dry-run (exit status: its)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=.device-kit
build="build-kit"
from=""
dry=0
max_mib=56
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --from-build) from=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "device_kit.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

bins="dltune dltune-worker dltune-bench-rank dltune-nccl-probe dltune-rank-env engine_gpu_test
      engine_gpu_errors_test engine_gpu_math_test nccl_test"
level=6
if [ -z "$from" ]; then
  echo "== building a Release tree with CUDA and NCCL (sm_90) in $build"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLTUNE_WITH_CUDA=ON \
    -DDLTUNE_WITH_NCCL=ON -DDLTUNE_WITH_PMIX=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DDLTUNE_BUILD_TESTS=ON -DDLTUNE_BUILD_BENCH=OFF >/dev/null
  # shellcheck disable=SC2086
  nice -n 5 cmake --build "$build" -j "${JOBS:-$(nproc)}" --target $bins
  from=$build
else
  level=1  # the CI test: speed over size
fi
for b in $bins; do
  [ -x "$from/bin/$b" ] || { echo "device_kit.sh: $from/bin/$b is missing (build it first)" >&2; exit 1; }
done

echo "== assembling $out from $from"
case "$out" in /*) ;; *) out=$root/$out ;; esac
rm -rf "$out"
mkdir -p "$out"/{bin,lib,lib-fallback,share}
for b in $bins; do
  cp "$from/bin/$b" "$out/bin/$b"
  strip --strip-unneeded "$out/bin/$b"
done

# Libraries: CUDA's are the machine's (cuda-libs.txt), glibc's too; libstdc++ and libgcc_s go to
# lib-fallback; everything else is carried.
is_cuda() {
  case "$1" in
    libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnccl*|libnvrtc*|libnvJitLink*|libcufft*|\
    libcurand*|libcusparse*|libcusolver*|libnvidia-*|libnvToolsExt*) return 0 ;;
  esac
  return 1
}
is_glibc() {
  case "$1" in
    linux-vdso.so*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|\
    libutil.so*|libanl.so*|libmvec.so*) return 0 ;;
  esac
  return 1
}
declare -A cuda_libs=()
carry_deps() {  # carry_deps FILE...: the libraries the files load (one ldd for them all)
  # No process per line: a kit's ~200 files list ~3,000 dependencies, and a basename and a sed
  # for each took 35 of the 40 s the kit's assembly took.
  local line name path file=$1
  while IFS= read -r line; do
    if [[ $line != [[:space:]]* ]]; then  # "FILE:" heads each file's list when there are several
      file=${line%:}
      continue
    fi
    line=${line#"${line%%[![:space:]]*}"}
    [ "$line" = "statically linked" ] && continue
    name=${line%% *}
    name=${name##*/}
    path=""
    if [[ $line =~ "=> "([^ ]+)" (0x" ]]; then path=${BASH_REMATCH[1]}; fi
    if is_glibc "$name"; then continue; fi
    if is_cuda "$name"; then cuda_libs[$name]=1; continue; fi
    if [ -z "$path" ]; then
      echo "device_kit.sh: $file needs $name, which ldd does not find here" >&2
      exit 1
    fi
    case "$name" in
      libstdc++.so*|libgcc_s.so*) [ -e "$out/lib-fallback/$name" ] || cp -L "$path" "$out/lib-fallback/$name" ;;
      *) [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name" ;;
    esac
  done < <(ldd "$@")
}
bin_paths=()
for b in $bins; do bin_paths+=("$out/bin/$b"); done
carry_deps "${bin_paths[@]}"

# Plugin folders, for the libraries that load plugins.
plugins() {  # plugins LIB SOURCE_DIR KIT_SUBDIR [PATTERN_TO_SKIP]
  local lib=$1 src=$2 dst=$out/lib/$3 skip=${4:-^$} f
  [ -e "$out/lib/$lib" ] && [ -d "$src" ] || return 0
  mkdir -p "$dst"
  local copied=()
  for f in "$src"/*.so; do
    [ -e "$f" ] || continue
    if [[ ${f##*/} =~ $skip ]]; then continue; fi
    cp -L "$f" "$dst/"
    copied+=("$dst/${f##*/}")
  done
  [ ${#copied[@]} -eq 0 ] || carry_deps "${copied[@]}"
}
pmix_lib=$(pkg-config --variable=libdir pmix 2>/dev/null || true)
plugins libpmix.so.2 "$pmix_lib/pmix" pmix
ompi_lib=$(pkg-config --variable=libdir ompi 2>/dev/null || true)
# Transports the machine's Open MPI configuration turns off anyway (UCX, OFI, openib).
plugins libmpi.so.40 "$ompi_lib/openmpi3" openmpi 'ucx|ofi|openib|uct|psm|verbs|portals'
hwloc_lib=$(pkg-config --variable=libdir hwloc 2>/dev/null || true)
plugins libhwloc.so.15 "$hwloc_lib/hwloc" hwloc '^hwloc_(gl|opencl|cuda|nvml|rsmi|levelzero)'
if [ -n "$pmix_lib" ] && [ -d "$pmix_lib/../share/pmix" ]; then
  mkdir -p "$out/share/pmix"
  cp "$pmix_lib"/../share/pmix/help-*.txt "$out/share/pmix/" 2>/dev/null || true
fi
if [ -d "$out/lib/openmpi" ]; then
  mkdir -p "$out/share/openmpi" "$out/etc"
  cp /usr/share/openmpi/help-*.txt "$out/share/openmpi/" 2>/dev/null || true
  cp /etc/openmpi/openmpi-mca-params.conf "$out/etc/" 2>/dev/null || true
fi
printf '%s\n' "${!cuda_libs[@]}" | sort >"$out/cuda-libs.txt"

# What run.sh runs besides the binaries.
cp bench/gpu/device_run.sh "$out/run.sh"
chmod +x "$out/run.sh"
cp tests/launcher/nccl_run_test.sh bench/gpu/bench_gpu.py engine/tests/torch_nets.py "$out/share/"
# The bundled recipes where an installed dltune looks for them (<exe>/../share/dltune/recipes):
# `dltune recipe list` and `dltune launch quickstart` work from the kit too.
mkdir -p "$out/share/dltune/recipes"
cp recipes/*.yaml "$out/share/dltune/recipes/"
git rev-parse --short=12 HEAD >"$out/share/revision" 2>/dev/null || echo unknown >"$out/share/revision"

# Large files travel compressed; run.sh unpacks them into its scratch copy of the kit.
find "$out/bin" "$out/lib" "$out/lib-fallback" -type f -size +1024k -print0 |
  xargs -0 -r xz "-$level" -T0

kib=$(du -sk "$out" | cut -f1)
echo "== $out: $((kib / 1024)) MiB ($kib KiB): $(find "$out/bin" -type f | wc -l) binaries, \
$(find "$out/lib" "$out/lib-fallback" -type f | wc -l) library files; CUDA libraries left to the \
machine: $(tr '\n' ' ' <"$out/cuda-libs.txt")"
if [ "$kib" -gt $((max_mib * 1024)) ]; then
  echo "device_kit.sh: the kit is $((kib / 1024)) MiB, more than $max_mib MiB" >&2
  exit 1
fi
if [ "$dry" = 1 ]; then
  exec "$out/run.sh" --dry-run
fi
