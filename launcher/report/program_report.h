// report.html of a program recipe's launch (issue 39 item 3): what ran and how fast, the plan
// and why, and what every candidate of the tuning gave (its best samples/s as a bar, each trial
// in a table with the reason a failed one failed), on one self-contained page with no scripts,
// as the engine's report (report.h) is.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dltune::report {

// The page for `summary`, the launch's summary.json (launcher/cli/launch_program.cc summarize():
// recipe, throughput_sps, run_seconds, exit_code, plan_source, values, reason, run_dir, output,
// and "trials" when it tuned: candidate, round, steps, samples_per_s, wall_s, failed, reason).
// Missing or mistyped fields show as "unknown"; text from the summary is escaped.
std::string render_program_report_html(const nlohmann::json& summary);

}  // namespace dltune::report
