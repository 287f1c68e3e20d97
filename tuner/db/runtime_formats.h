// A plan's collective choices in the formats of other runtimes than Open MPI (whose
// coll/tuned rules are in ompi_rules.h): MPICH's collective selection JSON, MVAPICH2's tuning
// strings, and NCCL's environment. Each function takes the "collectives" section of a plan
// (parse_plan_collectives()) and appends to *notes one sentence per approximation or skipped
// collective.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "tuner/db/ompi_rules.h"

namespace dltune::tuner::db {

// MPICH 4.x: the JSON file MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE names. Its grammar is a
// tree of objects whose keys are conditions, tried in order, the first match descending:
// "collective=NAME", "comm_type=intra|inter", "comm_size<N" / "comm_size=pow2" /
// "comm_size=any", "avg_msg_size<N" / "total_msg_size<N" / "...=any", "is_op_built_in=yes|no",
// "is_commutative=yes|no", "count<pow2" / "count=any", "comm_hierarchy=parent|any",
// "is_sendbuf_inplace=yes|no"; a leaf is "algorithm=MPIR_<Coll>_<kind>_<name>": {}.
//
// `plans` maps a communicator size to the collectives of the plan made for it (one entry for
// one job shape). A communicator of size s uses the plan of the largest size <= s (the
// smallest plan's below it), as Open MPI's rules do. MPICH replaces its whole table with the
// file and asserts when a collective finds no algorithm, so every collective MPICH 4.0 selects
// for gets an entry: the plan's allreduce, broadcast and allgather as mapped below, every other
// one a single general algorithm. Algorithms MPICH 4.0 lacks map to the closest it has (ring
// and native allreduce -> reduce_scatter_allgather, tree allreduce -> recursive_doubling,
// hier / shm -> the node-aware smp algorithm where MPICH has one), each with a note; an
// algorithm with a precondition (a built-in commutative op, a power-of-two size) is guarded by
// that condition with a fallback. invalid_input when no plan is given or an algorithm is
// unknown to dltune. The text is the JSON, indented.
Result<std::string> mpich_rules_json(const std::map<int, PlanCollectives>& plans,
                                     std::vector<std::string>* notes);

// MVAPICH2 2.3: environment variables for one job shape, as `export NAME='VALUE'` lines:
// MV2_INTER_ALLREDUCE_TUNING="ALGO:MIN-MAX,...,ALGO:MIN-+" (byte ranges, MAX inclusive, '+'
// open-ended; ALGO 1 = point-to-point recursive doubling, 2 = point-to-point reduce-scatter +
// allgather), with MV2_USE_INDEXED_TUNING=0 and MV2_USE_INDEXED_ALLREDUCE_TUNING=0, without
// which MVAPICH2 ignores a multi-range string. Only allreduce is exported (other collectives get
// a note); rd -> 1, rabenseifner -> 2, ring / hier -> 2 and tree / shm / native -> 1 with a note.
// invalid_input when the plan sets no allreduce or names an unknown algorithm.
Result<std::string> mvapich_tuning_env(const PlanCollectives& plan,
                                       std::vector<std::string>* notes);

// NCCL (2.24 or newer): NCCL_ALGO and NCCL_PROTO for one job shape, as `export NAME='VALUE'`
// lines, in NCCL's per-function grammar "func:Algo[,Algo...][;func:...]" (functions allreduce,
// broadcast, reduce, allgather, reducescatter; algorithms Tree, Ring, CollnetDirect,
// CollnetChain, NVLS, NVLSTree, PAT; protocols LL, LL128, Simple). A plan's GPU algorithms are
// named "nccl_<algo>[_<proto>]" (nccl_ring_ll128); host algorithms (ring, rd, ...) are not
// NCCL's and are skipped with a note. NCCL's variables cannot tie a choice to a message size:
// a collective whose ranges use several algorithms allows all of them (noted; dltune's NCCL
// tuner plugin applies per-size choices). invalid_input when no range is an NCCL one.
Result<std::string> nccl_env(const PlanCollectives& plan, std::vector<std::string>* notes);

}  // namespace dltune::tuner::db
