// Plan collectives -> Open MPI 4.1 coll/tuned rules: the Plan's collectives section (as
// recipes::parse_plan reads it), mapping dltune algorithms to Open MPI algorithm ids, and building
// the rule tables.
#include "tuner/db/ompi_rules.h"

#include <algorithm>
#include <string>

#include "tuner/db/records.h"

namespace dltune::tuner::db {
namespace {

struct Mapping {
  const char* collective;
  const char* algo;
  int id;
  const char* ompi_name;
  const char* note;  // "" when the mapping is exact
};

// dltune algorithm -> Open MPI 4.1 coll/tuned algorithm id. "ring" with a segment size becomes
// allreduce's segmented_ring (5) in map_to_ompi.
constexpr Mapping kMappings[] = {
    {"allreduce", "native", 0, "ignore (Open MPI's fixed decision)", ""},
    {"allreduce", "rd", 3, "recursive_doubling", ""},
    {"allreduce", "ring", 4, "ring", ""},
    {"allreduce", "rabenseifner", 6, "rabenseifner", ""},
    {"allreduce", "tree", 2, "nonoverlapping",
     "tree maps to nonoverlapping (a tree reduce followed by a tree broadcast)"},
    {"allreduce", "hier", 6, "rabenseifner",
     "hier (two-level) has no coll/tuned equivalent; using rabenseifner, the closest "
     "bandwidth-optimal flat algorithm (coll/han is Open MPI's hierarchical component)"},
    {"allreduce", "shm", 3, "recursive_doubling",
     "shm (reduction in node-shared memory) has no coll/tuned equivalent; using "
     "recursive_doubling, the closest latency-optimal algorithm (coll/sm is Open MPI's own)"},
    {"allreduce", "cma", 6, "rabenseifner",
     "cma (single-copy reduce-scatter + allgather between a node's processes) has no coll/tuned "
     "equivalent; using rabenseifner, the same pattern (btl/vader copies its large messages "
     "with cross-memory attach itself)"},
    {"broadcast", "native", 0, "ignore (Open MPI's fixed decision)", ""},
    {"broadcast", "tree", 6, "binomial", ""},
    {"broadcast", "rd", 6, "binomial", ""},
    {"broadcast", "ring", 9, "scatter_allgather_ring", ""},
    {"broadcast", "rabenseifner", 8, "scatter_allgather", ""},
    {"broadcast", "hier", 7, "knomial",
     "hier (two-level) has no coll/tuned equivalent; using the knomial tree"},
    {"broadcast", "shm", 1, "basic_linear",
     "shm has no coll/tuned equivalent; using basic_linear (one copy per peer)"},
    {"allgather", "native", 0, "ignore (Open MPI's fixed decision)", ""},
    {"allgather", "ring", 4, "ring", ""},
    {"allgather", "rd", 3, "recursive_doubling", ""},
    {"allgather", "tree", 2, "bruck", "tree has no allgather form in coll/tuned; using bruck"},
    {"allgather", "hier", 4, "ring", "hier has no coll/tuned equivalent; using ring"},
    {"allgather", "shm", 1, "linear", "shm has no coll/tuned equivalent; using linear"},
};

bool same_choice(const OmpiRule& a, const OmpiRule& b) {
  return a.algorithm == b.algorithm && a.segment_bytes == b.segment_bytes &&
         a.fan_in_out == b.fan_in_out;
}

}  // namespace

PlanCollectives plan_collectives(const recipes::Plan& plan) {
  PlanCollectives out;
  for (const auto& [c, ranges] : plan.collectives) {
    std::vector<CollectiveRange>& v = out[std::string(recipes::collective_name(c))];
    for (const recipes::SizeRange& r : ranges) {
      v.push_back(
          {r.min_bytes, r.max_bytes, recipes::choice_name(r.algo, r.protocol), r.segment_bytes});
    }
  }
  return out;
}

Result<PlanCollectives> parse_plan_collectives(std::string_view plan_json) {
  auto plan = recipes::parse_plan(plan_json);
  if (!plan) return std::move(plan).error().wrap("plan");
  return plan_collectives(*plan);
}

int ompi_collective_id(std::string_view c) {
  if (c == "allgather") return 0;
  if (c == "allreduce") return 2;
  if (c == "alltoall") return 3;
  if (c == "barrier") return 6;
  if (c == "broadcast" || c == "bcast") return 7;
  if (c == "reduce") return 11;
  if (c == "reduce_scatter") return 12;
  return -1;
}

Result<OmpiChoice> map_to_ompi(std::string_view collective, const CollectiveRange& range) {
  const std::string_view coll = collective == "bcast" ? "broadcast" : collective;
  for (const Mapping& m : kMappings) {
    if (coll != m.collective || range.algo != m.algo) continue;
    OmpiChoice c{m.id, 0, m.ompi_name, m.note};
    if (coll == "allreduce" && range.algo == "ring" && range.segment_bytes > 0) {
      c = {5, range.segment_bytes, "segmented_ring", ""};
    } else if (coll == "broadcast" && m.id != 0) {
      c.segment_bytes = range.segment_bytes;  // every coll/tuned bcast takes a segment size
    }
    return c;
  }
  return invalid_input("no Open MPI mapping for " + std::string(collective) + " algorithm " +
                       quote_for_error(range.algo));
}

Result<OmpiRulesFile> rules_from_plan(const PlanCollectives& plan, int comm_size,
                                      std::vector<std::string>* notes) {
  if (comm_size < 1) return invalid_input("comm size must be at least 1");
  OmpiRulesFile file;
  for (const auto& [name, ranges] : plan) {
    const int id = ompi_collective_id(name);
    if (id < 0) {
      notes->push_back(name + ": not a collective Open MPI's coll/tuned rules can set; skipped");
      continue;
    }
    OmpiCommRules comm{comm_size, {}};
    for (const CollectiveRange& r : ranges) {
      auto choice = map_to_ompi(name, r);
      if (!choice) return std::move(choice).error().wrap("plan.collectives." + name);
      const std::string note = name + ": " + choice->note;
      if (!choice->note.empty() && std::find(notes->begin(), notes->end(), note) == notes->end()) {
        notes->push_back(note);
      }
      const OmpiRule rule{r.min_bytes, choice->algorithm, 0, choice->segment_bytes, 0};
      if (!comm.rules.empty() && same_choice(comm.rules.back(), rule)) continue;
      comm.rules.push_back(rule);
    }
    file.collectives.push_back({id, {std::move(comm)}});
  }
  if (file.collectives.empty()) {
    return invalid_input("the plan has no collective Open MPI can be told about");
  }
  return file;
}

Result<OmpiRulesFile> rules_from_plans(const std::map<int, PlanCollectives>& plans,
                                       std::vector<std::string>* notes) {
  std::map<int, OmpiCollRules> by_id;  // ascending collective ids, as rules_from_plan gives them
  for (const auto& [size, plan] : plans) {
    const bool any = std::any_of(plan.begin(), plan.end(),
                                 [](const auto& c) { return ompi_collective_id(c.first) >= 0; });
    if (!any) {
      notes->push_back("comm size " + std::to_string(size) +
                       ": its plan sets no collective Open MPI can be told about; skipped");
      continue;
    }
    std::vector<std::string> size_notes;
    auto one = rules_from_plan(plan, size, &size_notes);
    if (!one) return std::move(one).error().wrap("comm size " + std::to_string(size));
    for (const std::string& n : size_notes) {
      if (std::find(notes->begin(), notes->end(), n) == notes->end()) notes->push_back(n);
    }
    for (OmpiCollRules& c : one->collectives) {
      OmpiCollRules& merged = by_id[c.collective_id];
      merged.collective_id = c.collective_id;
      for (OmpiCommRules& cs : c.comm_sizes) merged.comm_sizes.push_back(std::move(cs));
    }
  }
  OmpiRulesFile file;
  for (auto& [id, c] : by_id) file.collectives.push_back(std::move(c));
  if (file.collectives.empty()) {
    return invalid_input("no plan sets a collective Open MPI can be told about");
  }
  return file;
}

}  // namespace dltune::tuner::db
