// Writes a report.html of a typical 2-rank tuned run (made-up figures) to argv[1], for the
// headless-browser check of the report (tests/launch/report_check.sh) that needs no ranks.
#include <cmath>
#include <cstdio>
#include <string>

#include "common/paths.h"
#include "launcher/report/report.h"

int main(int argc, char** argv) {
  using namespace dltune::report;
  if (argc != 2) {
    std::fprintf(stderr, "usage: report_sample OUT.html\n");
    return 2;
  }
  ReportData d;
  d.title = "quickstart on 2 rank(s)";
  d.summary = {{"throughput", "4,249 samples/s (global batch 128)"},
               {"plan", "tuned in 19.6 s of a 20 s budget"}};
  for (long s = 0; s < 300; ++s) {
    const double noise = ((s * 37) % 11 - 5) * 0.02;
    d.steps.push_back({s, 2.3 * std::exp(-s / 40.0) + 0.05 + noise * 0.3,
                       4200 + 300 * noise + (s % 50 == 0 ? -2500 : 0)});
  }
  d.evals = {{100, 0.91}, {200, 0.975}, {300, 0.99}};
  d.tuning = {{"ring", {{524288, 260}, {1048576, 480}, {2097152, 950}}},
              {"rd", {{524288, 240}, {1048576, 520}, {2097152, 1100}}},
              {"shm", {{524288, 150}, {1048576, 300}, {2097152, 640}}}};
  d.job_sizes = {{1048576, 1, "shm", 300}, {667688, 1, "shm", 200}};
  d.step_breakdown = {{"compute", 24.1}, {"exposed communication", 3.2}, {"other", 2.8}};
  d.ranks = 2;
  d.throughput_sps = 4249;
  d.baseline_sps = 2300;
  d.predicted_sps = 4100;
  d.scaling_efficiency = 4249 / 4600.0;
  d.winner = "b64 weak bucket=1MiB overlap";
  d.rivals = {{"b64 weak bucket=1MiB no-overlap", 1.12, 1.05, 1.19, 12, ""},
              {"b64 weak bucket=one(1.6MiB) overlap", 1.02, 0.97, 1.07, 12, ""},
              {"b128 weak bucket=1MiB overlap", 1.31, 1.1, 1.6, 3, ""},
              {"b32 weak bucket=1MiB overlap", 1.8, 0, 0, 2, ""},
              {"b256 weak bucket=1MiB overlap", 0, 0, 0, 0, "not measured: budget"}};
  d.regret = 0.03;
  d.collective_regret = 0.01;
  d.budget_note = "1 of 6 candidates not measured";
  return dltune::paths::write_file_atomic(argv[1], render_report_html(d)).ok() ? 0 : 1;
}
