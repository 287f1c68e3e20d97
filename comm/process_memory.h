// How a rank process's allocator treats large blocks, for the collectives' sake.
#pragma once

namespace dltune::comm {

// Makes glibc's malloc serve every block from its heap and keep freed memory for reuse,
// instead of mapping each large block afresh and unmapping it on free (glibc's default for
// blocks over 128 KiB .. 32 MiB). Open MPI 4.1's default allreduce mallocs and frees a
// temporary as large as the message on every call; with the default, every call page-faults
// the whole temporary in again (slow on this kind of virtual machine) and the churn slows the
// other code of the node for a while after it. Measured with 2 ranks at 64 MiB: the native
// allreduce takes 14 ms instead of 197 ms, and the shared-memory allreduce measured between
// native calls keeps its 3.3 ms instead of a p90 of 75 ms.
// Call it first thing in main(), before other threads exist, in the rank programs whose
// measurements must describe each other: the tuner's (dltune-tune-rank) and the engine's
// (dltune-worker). The price is memory the process never gives back, which a rank that
// allocates its working set once does not pay. Returns false when glibc refused a setting.
bool keep_freed_memory();

}  // namespace dltune::comm
