#include "launcher/slurm_backend.h"

#include <cctype>
#include <optional>

#include <sys/wait.h>

#include "common/env.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/strings.h"
#include "launcher/env_block.h"
#include "launcher/supervisor.h"
#include "launcher/temp_dir.h"

extern char** environ;

namespace dltune::launcher {
namespace {

const char* srun_cpu_bind(topology::BindPolicy policy) {
  switch (policy) {
    case topology::BindPolicy::kNone:
      return "--cpu-bind=none";
    case topology::BindPolicy::kCore:
      return "--cpu-bind=cores";
    case topology::BindPolicy::kNuma:
      return "--cpu-bind=ldoms";
    case topology::BindPolicy::kAuto:
      return nullptr;  // the site's default
  }
  return nullptr;
}

// "  3: text" (srun --label) -> "[3] text"; other lines unchanged.
std::string relabel(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  size_t j = i;
  while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
  if (j == i || j + 1 >= line.size() + 1 || j >= line.size() || line[j] != ':') {
    return std::string(line);
  }
  std::string rest(line.substr(j + 1));
  if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
  return "[" + std::string(line.substr(i, j - i)) + "] " + rest;
}

bool is_srun_teardown_noise(std::string_view line) {
  return strings::starts_with(line, "srun: Job step aborted") ||
         strings::starts_with(line, "srun: launch/slurm: _step_signal") ||
         strings::starts_with(line, "srun: forcing job termination") ||
         strings::starts_with(line, "srun: Force Terminated") ||
         (strings::starts_with(line, "slurmstepd") &&
          line.find("error: *** STEP") != std::string_view::npos &&
          line.find("CANCELLED") != std::string_view::npos);
}

}  // namespace

std::optional<SrunTaskFailure> first_failure(const std::vector<SrunTaskFailure>& lines) {
  for (const auto& f : lines) {
    if (f.exit_code < 0 && f.signal != "Terminated") return f;
  }
  for (const auto& f : lines) {
    if (f.exit_code >= 0) return f;
  }
  if (!lines.empty()) return lines.front();
  return std::nullopt;
}

std::vector<std::string> srun_command(const std::string& srun_path, const LaunchSpec& spec) {
  std::vector<std::string> argv = {srun_path, "--mpi=pmix", "--kill-on-bad-exit=1",
                                   "--ntasks=" + std::to_string(spec.nranks)};
  if (spec.tag_output) argv.push_back("--label");
  if (const char* bind = srun_cpu_bind(spec.bind)) argv.push_back(bind);
  argv.push_back("--");
  argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
  return argv;
}

std::string SrunTaskFailure::describe() const {
  const std::string who = "rank " + std::to_string(rank) + " on " + host;
  if (exit_code >= 0) return who + " exited with code " + std::to_string(exit_code);
  return who + " was killed (" + signal + ")";
}

std::optional<SrunTaskFailure> parse_srun_failure(std::string_view line) {
  constexpr std::string_view kPrefix = "srun: error: ";
  if (!strings::starts_with(line, kPrefix)) return std::nullopt;
  std::string_view rest = line.substr(kPrefix.size());
  const size_t c1 = rest.find(": task");
  if (c1 == std::string_view::npos) return std::nullopt;
  SrunTaskFailure f;
  f.host = std::string(rest.substr(0, c1));
  rest = rest.substr(c1 + 6);
  if (!rest.empty() && rest[0] == 's') rest.remove_prefix(1);  // "tasks"
  while (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
  size_t k = 0;
  while (k < rest.size() && std::isdigit(static_cast<unsigned char>(rest[k]))) ++k;
  if (k == 0) return std::nullopt;
  f.rank = std::stoi(std::string(rest.substr(0, k)));
  const size_t c2 = rest.find(": ");
  if (c2 == std::string_view::npos) return std::nullopt;
  const std::string status = strings::trim(rest.substr(c2 + 2));
  constexpr std::string_view kExited = "Exited with exit code ";
  if (strings::starts_with(status, kExited)) {
    auto code = strings::parse_int(std::string_view(status).substr(kExited.size()));
    if (!code) return std::nullopt;
    f.exit_code = static_cast<int>(*code);
  } else {
    f.signal = status;
  }
  return f;
}

Result<LaunchOutcome> run_slurm(const LaunchSpec& spec) {
  DLTUNE_TRY(validate_spec(spec));
  auto srun = find_program("srun");
  if (!srun) {
    return unsupported(
        "srun was not found in PATH; the slurm backend needs Slurm's client "
        "commands (or use --backend local)");
  }
  EnvBlock env(environ);
  std::optional<TempDir> plan_dir;
  if (!spec.plan_blob.empty()) {
    auto dir = TempDir::create_in_tmp("dltune-plan-");
    if (!dir) return std::move(dir).error();
    plan_dir = std::move(*dir);
    const std::string plan_path = plan_dir->path() + "/plan.json";
    DLTUNE_TRY_CTX(paths::write_file_atomic(plan_path, spec.plan_blob), "writing the plan");
    env.set(std::string(env::kPlan.name), plan_path);
  }
  env.set("OMPI_MCA_pml", "ob1", false);
  for (const auto& [k, v] : spec.extra_env) env.set(k, v);

  Supervisor::Options opts{false, spec.kill_grace_ms, spec.timeout_s, SIGTERM};
  Supervisor sup(opts);
  DLTUNE_TRY(sup.install_signal_handling());
  std::vector<SrunTaskFailure> failures;
  // Open MPI's MPI_Abort banner names the rank that aborted, which srun does not: its task
  // status lines only list the tasks it killed afterwards.
  std::optional<std::string> aborted;  // "rank N called MPI_Abort (error code E)"
  sup.set_line_filter(
      [&failures, &aborted, tag = spec.tag_output](
          int, bool is_stderr, std::string_view line) -> std::optional<std::string> {
        if (is_stderr) {
          if (auto at = line.find("MPI_ABORT was invoked on rank "); at != std::string_view::npos) {
            std::string_view rest = line.substr(at + 30);
            aborted = "rank " + std::string(rest.substr(0, rest.find(' '))) + " called MPI_Abort";
          } else if (aborted && strings::starts_with(line, "with errorcode ") &&
                     aborted->find("error code") == std::string::npos) {
            std::string_view code = line.substr(15);
            if (!code.empty() && code.back() == '.') code.remove_suffix(1);
            *aborted += " (error code " + std::string(code) + ")";
          }
          if (auto f = parse_srun_failure(line)) {
            failures.push_back(*f);
            DLTUNE_LOG(kDebug, "launch") << line;
            return std::nullopt;
          }
          if (is_srun_teardown_noise(line)) {
            DLTUNE_LOG(kDebug, "launch") << line;
            return std::nullopt;
          }
        }
        return tag ? relabel(line) : std::string(line);
      });
  // srun's task-status lines may still be in the pipe when srun is reaped: the failed rank
  // is named after run(), from all of them.
  sup.set_exit_judge([](int, int status) -> std::string {
    return Supervisor::default_exit_judgement("srun", "", status);
  });
  auto argv = srun_command(*srun, spec);
  DLTUNE_LOG(kInfo, "launch") << "running " << strings::join(argv, " ");
  auto index = sup.spawn({*srun, argv, env.data(), {}, "srun", ""});
  if (!index) return std::move(index).error().wrap("starting srun");
  LaunchOutcome out = sup.run();
  if (out.exit_code == 1 && aborted) {
    out.message = *aborted;
  } else if (out.exit_code == 1 && strings::starts_with(out.message, "srun ")) {
    if (auto first = first_failure(failures)) out.message = first->describe();
  }
  return out;
}

}  // namespace dltune::launcher
