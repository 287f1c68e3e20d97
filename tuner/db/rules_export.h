// `dltune db rules`: the stored plans that a runtime's rules are made from, and the rules in
// each runtime's format (Open MPI coll/tuned file, MPICH selection JSON, MVAPICH2 strings,
// NCCL environment: ompi_rules.h, runtime_formats.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "tuner/db/lookup.h"
#include "tuner/db/store.h"

namespace dltune::tuner::db {

enum class RulesFormat { kOmpi, kMpich, kMvapich, kNcclEnv };

// "ompi", "mpich", "mvapich", "nccl-env". invalid_input naming the accepted ones otherwise.
Result<RulesFormat> parse_rules_format(std::string_view name);
// Whether the format keys its rules by communicator size and so can hold every job shape at
// once (ompi, mpich), rather than one shape's settings (mvapich, nccl-env).
bool format_covers_sizes(RulesFormat format);

struct RulesOutput {
  std::string text;                  // the file / the lines to source
  std::vector<std::string> notes;    // approximations and skipped collectives
  std::vector<std::string> sources;  // one per plan used: "2x1 plan from PATH (fingerprint F)"
};

// The rules of the plans matching `filter`, searched in the user database then each site
// database. With filter.shape: the newest plan of that shape in the first database holding
// one. Without (formats that cover sizes only): for every communicator size, the newest plan
// whose job has that many ranks, the user database's before a site's; when two shapes of one
// size (1x4, 2x2) both have plans, the newest wins and a note says so.
// Errors: invalid_input for a per-shape format without filter.shape, or a plan that cannot be
// exported; not_found when no database holds a matching plan (the message says how to make one).
Result<RulesOutput> export_rules(const Layers& layers, const Filter& filter, RulesFormat format);

}  // namespace dltune::tuner::db
