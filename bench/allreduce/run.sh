#!/usr/bin/env bash
# bench/allreduce: every dltune allreduce algorithm against Open MPI 4.1's default
# MPI_Allreduce ("native"), measured interleaved in the same run (round-robin within each
# size, rotating order), 4 B to 64 MiB, f32 sum in place.
#   bench/allreduce/run.sh [BUILD_DIR]    (default: build)
#
# Like with like: every rank runs with the malloc settings dltune's own ranks use
# (comm::keep_freed_memory(): Open MPI's default allreduce mallocs a message-sized temporary on
# every call, which glibc's defaults map and unmap afresh each time from 32 MiB on), and
# native and dltune are compared on the same private buffer, as a user's program holds its
# gradients: the buffer as allocated, and the same kind of buffer registered once
# (Communicator::register_memory, comm/registration.h, as NCCL's ncclCommRegister), each side
# taking the faster of the two per size (dltune's cma reads and writes registered memory
# directly; native is measured on both too). The *_unregistered keys are the comparison with
# no registration. Also printed, labelled:
#  - dltune on its node-shared buffer (the engine allocates gradients there so the shm
#    allreduce works in place): the *_shared_buffer keys, a design choice shown as such;
#  - native as a user gets it by default (glibc's malloc defaults): a second 2-rank run with
#    --malloc default, the *_default_malloc keys (native there against dltune's best on the
#    same private buffer in that run).
# Prints the 4-rank table first (oversubscribed on this 2-core machine), then the 2-rank run
# with default malloc settings, then the main 2-rank run; the last line is the 2-rank summary:
#   summary: min_ratio_vs_native=R ratio_32MiB=R ratio_64MiB=R shm_bound_fraction_16_64MiB=F
#            (min_ratio_vs_native|ratio_32MiB|ratio_64MiB)_shared_buffer=R
#            (min_ratio_vs_native|ratio_32MiB|ratio_64MiB)_unregistered=R
#            (min_ratio_vs_native|ratio_32MiB|ratio_64MiB)_default_malloc=R
# (ratios: native time / best dltune time, paired per round; the fraction: the memory-traffic
# bound / shm time, worst of 16, 32 and 64 MiB; see dltune-bench-rank's table for the bound).
# ROUNDS (default 9) sets samples per size.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
rank="$build/bin/dltune-bench-rank"
[ -x "$rank" ] || { echo "bench/allreduce: $rank not built (cmake --build $build --target dltune-bench-rank)" >&2; exit 2; }
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1)
args=(--algo all --min-bytes 4 --max-bytes 64MiB --rounds "${ROUNDS:-9}" --private --summary)
load() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (figures taken under this load)"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== 4 ranks (oversubscribed: 4 ranks on $(nproc) cores)"
load
"${mpirun[@]}" -np 4 "$rank" "${args[@]}" | sed 's/^summary:/summary_4ranks:/'
echo
echo "== 2 ranks, glibc's default malloc settings (native as a user's program gets it)"
load
"${mpirun[@]}" -np 2 "$rank" "${args[@]}" --malloc default | tee "$tmp/default" |
  sed 's/^summary:/summary_default_malloc:/'
echo
echo "== 2 ranks, dltune's rank settings on every rank (the like-for-like comparison)"
load
"${mpirun[@]}" -np 2 "$rank" "${args[@]}" | tee "$tmp/fair" | grep -v '^summary:'
# The default-malloc run's like-for-like ratios, renamed *_default_malloc.
extra=$(grep '^summary:' "$tmp/default" | tr ' ' '\n' |
  grep -E '^(min_ratio_vs_native|ratio_32MiB|ratio_64MiB)=' | sed 's/=/_default_malloc=/' | tr '\n' ' ')
echo
echo "the flattering figure (closest to what this benchmark used to report): native with glibc's"
echo "default malloc settings against dltune on its node-shared buffer, from the default-malloc run:"
echo "  $(grep '^summary:' "$tmp/default" | tr ' ' '\n' | grep -E '_shared_buffer=' | tr '\n' ' ')"
echo "summary: $(grep '^summary:' "$tmp/fair" | sed 's/^summary: //') ${extra% }"
