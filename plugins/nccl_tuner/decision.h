// The NCCL tuner plugin's decision logic, free of any NCCL or plugin machinery so that it is
// unit-tested without a GPU (the aws-ofi-nccl shape: a thin shim over pure, tested logic).
//
// A Decision holds rules from a dltune Plan: for a collective and a half-open byte range,
// the NCCL algorithm and (optionally) protocol dltune measured to be fastest. apply() lowers
// that entry of the cost table NCCL passes so NCCL picks it, and leaves the table alone where
// dltune has no measurement or the plan's choice is not available to NCCL for this call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "recipes/plan.h"

namespace dltune::plugins {

struct NcclRule {
  int coll = 0;            // NcclFunc
  uint64_t min_bytes = 0;  // inclusive
  uint64_t max_bytes = 0;  // exclusive
  int algo = 0;            // NcclAlgo
  int proto = -1;          // NcclProto, or -1: the cheapest protocol NCCL offers for `algo`
};

// Parses a plan's NCCL algorithm name (common/collectives.h parse_choice):
// "nccl_<algo>[_<proto>]" with algo one of tree, ring, collnet_direct, collnet_chain, nvls,
// nvls_tree, pat and proto one of ll, ll128, simple (e.g. "nccl_ring_ll128", "nccl_tree"), or
// the NCCL communicator's choice name of the same ("nccl:ring/ll128", "nccl:tree/"). Errors
// say what is expected.
Result<NcclRule> parse_nccl_algo(const std::string& name);

class Decision {
 public:
  // The rules of `plan`: each range of each collective whose algorithm is NCCL's; ranges of
  // dltune's host algorithms ("ring", "shm", ...) are skipped. A plan made for another job
  // shape than (n_ranks, n_nodes) yields no rule (note() says why).
  static Decision from_plan(const recipes::Plan& plan, size_t n_ranks, size_t n_nodes);
  // The plan read from its JSON text by recipes::parse_plan (the Plan's one reader), then
  // from_plan(). Errors: parse_plan's (text that is not a Plan).
  static Result<Decision> from_plan_json(const std::string& json, size_t n_ranks, size_t n_nodes);
  static Decision from_rules(std::vector<NcclRule> rules) {
    Decision d;
    d.rules_ = std::move(rules);
    return d;
  }

  // Lowers the cost of the chosen (algo, proto) in cost_table[num_algo][num_proto] (NCCL's
  // layout: an array of num_algo row pointers) to 0 for the rule matching (coll, n_bytes).
  // Returns true when it changed the table; false (table untouched) when no rule matches, the
  // chosen entry is outside the table or marked ignored (-1) by NCCL.
  bool apply(int coll, size_t n_bytes, float** cost_table, int num_algo, int num_proto) const;

  const std::vector<NcclRule>& rules() const { return rules_; }
  // Why the plan yielded no rules, for the one log line ("" when it has rules).
  const std::string& note() const { return note_; }

 private:
  std::vector<NcclRule> rules_;
  std::string note_;
};

}  // namespace dltune::plugins
