// One run of a user's program (program_run.h). The run is a `dltune run` child rather than
// the local backend called in this process: libpmix's server starts once per process, and a
// tuning runs the program many times. What the child gets:
//
//   dltune run -n RANKS --backend local | -H HOST:RPN,... | --backend slurm --nodes N
//              --bind BINDING --timeout T
//              -x OMP_NUM_THREADS=t -x OPENBLAS_NUM_THREADS=t -x MKL_NUM_THREADS=t
//              -x DLTUNE_METRICS=OUT/metrics.jsonl [-x DLTUNE_TRIAL_STEPS=s -x ...SECONDS=x]
//              [-x NAME=VALUE for the recipe's env, DLTUNE_BUCKET_MB, DLTUNE_BATCH]
//              --output-filename OUT/output[:nocopy] [--tag-output] [--timestamp-output]
//              --outcome-file OUT/outcome.json [--plan PLAN] -- COMMAND...
//
// in the recipe's directory. Over hosts, the output files and the metrics file are written on
// each rank's host: rank 0's must reach this machine (a file system the hosts share). Under
// Slurm, `dltune run` gathers the ranks' output itself (srun --label). The threads are given
// with -x (which wins over what `dltune run` derives from the binding) because they are a tuned
// value, not the binding's consequence. The throughput is the last line of rank 0's stdout the
// recipe's pattern matches, or the last line of OUT/metrics.jsonl with the recipe's metrics key.
#include "launcher/cli/program_run.h"

#include <chrono>
#include <cstdio>
#include <regex>

#include "common/paths.h"
#include "common/strings.h"
#include "launcher/backend/host_list.h"
#include "launcher/backend/launch_spec.h"
#include "launcher/backend/rank_program.h"
#include "launcher/flow/text_format.h"

namespace dltune::cli {
namespace {

// Seconds as a person writes them: 120, 7.5 ("%g").
std::string seconds_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string rank_file(const ProgramRun& run, int rank, const char* stream) {
  return run.out_dir + "/output/1/rank." + std::to_string(rank) + "/" + stream;
}

// The rank a failure's sentence names ("rank 1 (pid 123) exited with code 2"), else 0.
int failed_rank(const std::string& message) {
  static const std::regex kRank("rank ([0-9]+)");
  std::smatch m;
  if (std::regex_search(message, m, kRank)) {
    auto r = strings::parse_int(m[1].str());
    if (r && *r >= 0 && *r < (int64_t{1} << 20)) return static_cast<int>(*r);
  }
  return 0;
}

// The last lines of a rank's stderr and stdout, labelled.
std::string rank_tail(const ProgramRun& run, int rank) {
  std::string tail;
  for (const char* stream : {"stderr", "stdout"}) {
    auto text = paths::read_file(rank_file(run, rank, stream));
    if (!text || text->empty()) continue;
    tail += "[rank " + std::to_string(rank) + " " + stream + "]\n" + last_lines(*text, 8);
  }
  return tail;
}

void read_throughput(const ProgramRun& run, ProgramRunResult* r) {
  const recipes::ProgramThroughput& t = run.recipe->throughput;
  Result<double> sps = not_found("");
  // Over hosts, rank 0's files are written on its host (its output file always, by `dltune
  // run --output-filename`): missing here, the run directory is not on a file system this
  // machine shares with that host.
  const std::string file = rank_file(run, 0, "stdout");
  if (!run.hosts.empty() && !paths::exists(file)) {
    r->throughput_error = file + " is not on this machine: over -H hosts, rank 0 (on " +
                          run.hosts[0] + ") writes its output and metrics there; launch from " +
                          "a directory the hosts share with this machine";
    return;
  }
  if (!t.metrics_key.empty()) {
    auto text = paths::read_file(run.out_dir + "/metrics.jsonl");
    sps = text ? tuner::throughput_from_metrics(t.metrics_key, *text)
               : Result<double>(not_found("wrote no metrics file ($DLTUNE_METRICS)"));
  } else {
    auto text = paths::read_file(rank_file(run, 0, "stdout"));
    sps = tuner::throughput_from_output(t.pattern, text ? *text : std::string());
  }
  if (sps) {
    r->samples_per_s = *sps;
  } else {
    r->throughput_error = sps.error().message();
  }
}

}  // namespace

std::string last_lines(const std::string& text, size_t lines) {
  std::vector<std::string> all = strings::split(text, '\n');
  while (!all.empty() && strings::trim(all.back()).empty()) all.pop_back();
  const size_t from = all.size() > lines ? all.size() - lines : 0;
  std::string out;
  for (size_t i = from; i < all.size(); ++i) {
    std::string line = strings::printable(all[i], "");
    if (line.size() > 200) line = line.substr(0, 197) + "...";
    out += line + "\n";
  }
  return out;
}

Result<std::vector<std::string>> program_run_argv(const ProgramRun& run) {
  auto self = sibling_program("dltune");
  if (!self) return self.error();
  const recipes::ProgramValues& v = run.values;
  auto command = recipes::program_command(*run.recipe, v);
  if (!command) return command.error();
  auto env = recipes::program_env(*run.recipe, v);
  if (!env) return env.error();
  std::vector<std::string> a = {*self, "run", "-n", std::to_string(v.ranks)};
  if (run.slurm_nodes > 0) {
    a.insert(a.end(), {"--backend", "slurm", "--nodes", std::to_string(run.slurm_nodes)});
  } else if (run.hosts.empty()) {
    a.insert(a.end(), {"--backend", "local"});
  } else {
    a.insert(a.end(), {"-H", launcher::host_option(run.hosts, v.ranks_per_node)});
  }
  a.insert(a.end(), {"--bind", run.binding});
  if (run.timeout_s > 0) a.insert(a.end(), {"--timeout", seconds_text(run.timeout_s)});
  const std::string t = std::to_string(v.threads_per_rank);
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}) {
    a.insert(a.end(), {"-x", std::string(name) + "=" + t});
  }
  a.insert(a.end(), {"-x", "DLTUNE_METRICS=" + run.out_dir + "/metrics.jsonl"});
  if (run.trial_steps > 0) {
    a.insert(a.end(), {"-x", "DLTUNE_TRIAL_STEPS=" + std::to_string(run.trial_steps)});
  }
  if (run.trial_seconds > 0) {
    a.insert(a.end(),
             {"-x", "DLTUNE_TRIAL_SECONDS=" + launcher::text::fixed(run.trial_seconds, 1)});
  }
  for (const auto& [name, value] : *env) a.insert(a.end(), {"-x", name + "=" + value});
  a.insert(a.end(),
           {"--output-filename", run.out_dir + "/output" + (run.pass_through ? "" : ":nocopy")});
  if (run.tag_output) a.push_back("--tag-output");
  if (run.timestamp_output) a.push_back("--timestamp-output");
  a.insert(a.end(), {"--outcome-file", run.out_dir + "/outcome.json"});
  if (!run.plan_file.empty()) a.insert(a.end(), {"--plan", run.plan_file});
  a.insert(a.end(), run.run_options.begin(), run.run_options.end());  // the user's -x win
  a.push_back("--");
  a.insert(a.end(), command->begin(), command->end());
  return a;
}

Result<ProgramRunResult> run_program(const ProgramRun& run) {
  auto argv = program_run_argv(run);
  if (!argv) return argv.error();
  DLTUNE_TRY(paths::make_dirs(run.out_dir));
  ProgramRunResult r;
  const auto t0 = std::chrono::steady_clock::now();
  auto rc = run_to_completion(*argv, "launch", run.recipe->source_dir,
                              run.pass_through ? "" : run.out_dir + "/dltune-run.log");
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!rc) return rc.error();
  r.exit_code = *rc;
  auto text = paths::read_file(run.out_dir + "/outcome.json");
  auto outcome =
      text ? launcher::outcome_from_json(*text) : Result<launcher::LaunchOutcome>(text.error());
  if (outcome && outcome->exit_code == *rc) {
    r.message = outcome->message;
    r.interrupted = outcome->interrupted;
  } else {
    r.interrupted = forwarded_signal() != 0;
    if (*rc != 0) r.message = "dltune run exited with code " + std::to_string(*rc);
  }
  if (r.exit_code == 0) {
    read_throughput(run, &r);
  }
  if (r.exit_code != 0 || r.samples_per_s <= 0) {
    r.output_tail = rank_tail(run, failed_rank(r.message));
  }
  return r;
}

tuner::ProgramTrialResult trial_result(const ProgramRunResult& r, double timeout_s) {
  tuner::ProgramTrialResult t;
  t.wall_s = r.wall_s;
  t.samples_per_s = r.samples_per_s;
  if (r.exit_code != 0 && timeout_s > 0 && r.wall_s >= timeout_s) {
    // `dltune run --timeout` stopped it: say so in the recipe's words.
    t.failed = true;
    t.reason = "ran past program.trial_timeout (" + seconds_text(timeout_s) + " s)" +
               (r.message.empty() ? "" : ": " + r.message);
  } else if (r.exit_code != 0) {
    t.failed = true;
    t.reason = r.message.empty() ? "exited with code " + std::to_string(r.exit_code) : r.message;
  } else if (r.samples_per_s <= 0) {
    t.failed = true;
    t.reason = r.throughput_error;
  }
  if (t.failed) t.output_tail = r.output_tail;
  return t;
}

}  // namespace dltune::cli
