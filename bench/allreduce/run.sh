#!/usr/bin/env bash
# bench/allreduce: every dltune allreduce algorithm against Open MPI 4.1's default
# MPI_Allreduce ("native"), measured interleaved in the same run (round-robin within each
# size, rotating order), 4 B to 64 MiB, f32 sum in place.
#   bench/allreduce/run.sh [BUILD_DIR]    (default: build)
# Prints the 4-rank table first (oversubscribed on this 2-core machine), then the 2-rank
# table; the last line is the 2-rank summary:
#   summary: min_ratio_vs_native=R ratio_32MiB=R ratio_64MiB=R shm_bound_fraction_16_64MiB=F
# (ratios: native time / best dltune time, paired per round; the fraction: memory-bandwidth
# bound / shm time, worst of 16, 32 and 64 MiB). ROUNDS (default 9) sets samples per size.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
rank="$build/bin/dltune-bench-rank"
[ -x "$rank" ] || { echo "bench/allreduce: $rank not built (cmake --build $build --target dltune-bench-rank)" >&2; exit 2; }
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1)
args=(--algo all --min-bytes 4 --max-bytes 64MiB --rounds "${ROUNDS:-9}" --summary)
load() { echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"; }
echo "== 4 ranks (oversubscribed: 4 ranks on $(nproc) cores)"
load
"${mpirun[@]}" -np 4 "$rank" "${args[@]}" | sed 's/^summary:/summary_4ranks:/'
echo
echo "== 2 ranks"
load
"${mpirun[@]}" -np 2 "$rank" "${args[@]}"
