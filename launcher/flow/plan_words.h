// A plan in words, for a person: the dry run, the launch's messages and the summary say it the
// same way.
#pragma once

#include <string>

#include "recipes/plan.h"

namespace dltune::launcher {

// The plan's allreduce choices in words: "rabenseifner below 1 MiB, shm from 1 MiB", "ring
// every size"; "" when it has none.
std::string allreduce_in_words(const recipes::Plan& plan);

// The plan in words: its training line and its allreduce ranges, one per line, each
// indented by `indent`.
std::string describe_plan(const recipes::Plan& plan, const std::string& indent);

}  // namespace dltune::launcher
