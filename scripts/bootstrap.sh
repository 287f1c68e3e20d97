#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root) for dltune, builds it, and then either runs the
# main job or the whole test suite:
#
#   scripts/bootstrap.sh run    # install what is missing, build, `dltune launch quickstart`
#   scripts/bootstrap.sh test   # install what is missing, build, run every test (ctest)
#   scripts/bootstrap.sh build  # install what is missing, build
#
# Idempotent: packages already installed are not touched (no network when nothing is missing),
# and the build is incremental. Environment: BUILD_DIR (default build), DLTUNE_WERROR=ON to
# turn warnings into errors (CI), CMAKE_ARGS for extra configure arguments, JOBS for parallelism.
set -euo pipefail

mode=${1:-build}
case "$mode" in run|test|build) ;; *) echo "usage: $0 run|test|build" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}

# Debian packages dltune builds, runs and tests with. Optional ones (Slurm, munge, Open MPI,
# PMIx) are installed too so that the whole test suite runs; the build works without them.
# chromium (headless) checks report.html in the tests. python3-torch and python3-torchvision
# are the reference the engine's numerics and benchmarks are compared with, and python3-torch
# runs the PyTorch DDP test under `dltune run`; mpich (with libmpich-dev) checks `dltune db rules
# --format mpich` against a real MPICH. It installs beside Open MPI: its mpirun/mpicc
# alternatives have a lower priority (40 against 50), so `mpirun` and `mpicc` stay Open MPI's.
# libdnnl-dev (oneDNN 2.6, optional: DLTUNE_WITH_DNNL) is a kernel provider of the CPU engine;
# its CMake package requires OpenCL's (its GPU runtime), so ocl-icd-opencl-dev comes with it:
# without it CMake finds no oneDNN and the engine builds without its kernels, saying only
# "DNNL = 0" in the configure output.
# libsodium signs bundles (required); clang with libFuzzer and its sanitizer runtimes builds the
# fuzz targets CI runs (fuzz/). libturbojpeg0-dev and libpng-dev decode imagefolder data
# (optional: DLTUNE_WITH_JPEG / DLTUNE_WITH_PNG); python3-pil writes and checks the image test
# fixtures, python3-protobuf decodes the TensorBoard event files in the tests, python3-mpi4py
# runs the mpi4py example program recipe (examples/mpi4py) that `dltune launch` tunes in them.
# openssh-client starts `dltune run -H` ranks on other hosts; openssh-server runs in the
# simulated nodes of the test of that (tests/slurm/ssh_launch_test.sh).
packages=(
  build-essential cmake ninja-build pkg-config git clang-format
  clang libfuzzer-14-dev libclang-rt-14-dev
  libhwloc-dev hwloc-nox libpmix-dev libopenmpi-dev openmpi-bin
  libsqlite3-dev sqlite3 libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libopenblas-dev
  libdnnl-dev ocl-icd-opencl-dev
  libsodium-dev
  libturbojpeg0-dev libpng-dev
  libgtest-dev googletest
  slurmctld slurmd slurm-client libslurm-dev munge
  procps psmisc iproute2 python3 openssh-client openssh-server
  python3-torch python3-torchvision python3-pil python3-protobuf python3-mpi4py
  mpich libmpich-dev
  chromium
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: packages are missing and this is not root; run as root or install them" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDLTUNE_WERROR="${DLTUNE_WERROR:-OFF}" ${CMAKE_ARGS:-}
fi
cmake --build "$build" -j "$jobs"

case "$mode" in
  build) ;;
  run)
    # The quickstart: tunes on the first run (its budget is 20 s), reuses the plan after.
    exec "$build/bin/dltune" launch quickstart
    ;;
  test)
    cd "$build"
    exec ctest --output-on-failure -j "$jobs" --timeout 900
    ;;
esac
