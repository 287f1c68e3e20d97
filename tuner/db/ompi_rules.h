// Open MPI 4.1 coll/tuned dynamic rules ("classic" format), written from a stored Plan's
// collectives section, and a strict parser for such files.
//
// The classic format is a stream of numbers ('#' starts a comment):
//   [rule-file-version-2]                 optional; version 2 adds a max-requests column
//   <number of collectives>
//   per collective: <collective id> <number of comm sizes>
//     per comm size: <comm size> <number of message-size rules>
//       per rule: <message size> <algorithm id> <fan-in/out> <segment size> [<max requests>]
// Open MPI uses the rule set of the largest comm size <= the communicator size, and within it the
// last rule whose message size (count * datatype size) <= the message. Algorithm 0 means "Open
// MPI's fixed decision".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "recipes/plan.h"

namespace dltune::tuner::db {

// One size range of a Plan collective: [min_bytes, max_bytes) -> algorithm (+ segment).
struct CollectiveRange {
  uint64_t min_bytes = 0;
  uint64_t max_bytes = 0;
  std::string algo;
  uint64_t segment_bytes = 0;
};
// collective name ("allreduce", "broadcast", ...) -> sorted, contiguous ranges from 0.
using PlanCollectives = std::map<std::string, std::vector<CollectiveRange>>;

// A Plan's collectives by name, each range's algorithm as plans spell it ("nccl_ring_ll128").
// The plan was read by recipes::parse_plan (the Plan's one reader): its ranges are sorted,
// contiguous and cover every size.
PlanCollectives plan_collectives(const recipes::Plan& plan);
// recipes::parse_plan(plan_json), then plan_collectives(). Errors: parse_plan's (invalid_input
// naming the field: an unknown algorithm, ranges that leave gaps, text that is not a plan).
Result<PlanCollectives> parse_plan_collectives(std::string_view plan_json);

// Open MPI 4.1 collective ids (coll_base_functions.h COLLTYPE_T); -1 when unknown.
int ompi_collective_id(std::string_view collective);

struct OmpiChoice {
  int algorithm = 0;           // Open MPI algorithm id (0 = Open MPI's own decision)
  uint64_t segment_bytes = 0;  // segment size column
  std::string ompi_name;       // e.g. "ring"
  std::string note;            // non-empty when the dltune algorithm has no exact equivalent
};
// Maps a dltune algorithm of `collective` to Open MPI 4.1's closest one. Allreduce: rd ->
// recursive_doubling(3), ring -> ring(4) or segmented_ring(5) with a segment, rabenseifner(6),
// tree -> nonoverlapping(2, reduce + bcast, both trees), native -> 0; shm and hier have no
// equivalent and map to the closest (with a note). invalid_input for unknown algorithms.
Result<OmpiChoice> map_to_ompi(std::string_view collective, const CollectiveRange& range);

struct OmpiRule {
  uint64_t msg_bytes = 0;
  int algorithm = 0;
  int fan_in_out = 0;
  uint64_t segment_bytes = 0;
  int max_requests = 0;  // version 2 only
};
struct OmpiCommRules {
  int comm_size = 0;
  std::vector<OmpiRule> rules;
};
struct OmpiCollRules {
  int collective_id = 0;
  std::vector<OmpiCommRules> comm_sizes;
};
struct OmpiRulesFile {
  int version = 1;
  std::vector<OmpiCollRules> collectives;
};

// Builds the rules for a job of `comm_size` ranks from `plan`: one rule per range (adjacent
// ranges with the same choice merged). Collectives Open MPI's tuned component cannot take are
// skipped; every approximation and skip is appended to *notes (one sentence each).
Result<OmpiRulesFile> rules_from_plan(const PlanCollectives& plan, int comm_size,
                                      std::vector<std::string>* notes);

// The rules for several job sizes in one file (coll/tuned keys its rule sets by communicator
// size): `plans` maps a communicator size (>= 1) to the collectives of the plan made for it.
// Each collective lists, ascending, the sizes whose plan sets it. A size whose plan sets nothing
// Open MPI can take is skipped with a note. invalid_input when no size yields a rule, or as
// rules_from_plan().
Result<OmpiRulesFile> rules_from_plans(const std::map<int, PlanCollectives>& plans,
                                       std::vector<std::string>* notes);

// The file text (version 1 unless rules.version is 2), commented for people.
std::string format_ompi_rules(const OmpiRulesFile& rules);

// Parses a classic rules file strictly: every count must match what follows, message sizes
// must increase, collective ids and algorithm ids must be known. invalid_input with
// "line N: ..." otherwise (e.g. a declared rule count larger than the rules that follow).
Result<OmpiRulesFile> parse_ompi_rules(std::string_view text);

}  // namespace dltune::tuner::db
