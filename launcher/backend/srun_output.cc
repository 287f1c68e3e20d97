#include "launcher/backend/srun_output.h"

#include <cctype>
#include <cstring>

#include "common/log.h"
#include "common/strings.h"

namespace dltune::launcher {
namespace {

// srun's and slurmstepd's lines about tearing a failed step down: noise beside the task
// failure that caused it.
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

std::pair<int, std::string_view> split_srun_label(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  size_t j = i;
  while (j < line.size() && j - i < 9 && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
  if (j == i || j >= line.size() || line[j] != ':') return {-1, line};
  std::string_view rest = line.substr(j + 1);
  if (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
  return {std::stoi(std::string(line.substr(i, j - i))), rest};
}

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

std::string SrunTaskFailure::describe(const PlanEnv* plan_env) const {
  const std::string who =
      (plan_env ? rank_label(*plan_env, rank) : "rank " + std::to_string(rank)) + " on " + host;
  if (exit_code >= 0) return who + " exited with code " + std::to_string(exit_code);
  const int st = exit_status();
  return st > 128 ? who + " was killed by signal " + std::to_string(st - 128) + " (" + signal + ")"
                  : who + " was killed (" + signal + ")";
}

int SrunTaskFailure::exit_status() const {
  if (exit_code >= 0) return exit_code;
  for (int sig = 1; sig < 65; ++sig) {
    const char* name = strsignal(sig);
    if (name != nullptr && signal == name) return 128 + sig;
  }
  return 1;
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

std::optional<std::string> filter_srun_line(SrunFailures& w, bool is_stderr,
                                            std::string_view line) {
  if (is_stderr) {
    if (auto at = line.find("MPI_ABORT was invoked on rank "); at != std::string_view::npos) {
      std::string_view rest = line.substr(at + 30);
      w.aborted = {"rank " + std::string(rest.substr(0, rest.find(' '))) + " called MPI_Abort", 1};
    } else if (w.aborted && strings::starts_with(line, "with errorcode ") &&
               w.aborted->first.find("error code") == std::string::npos) {
      std::string_view code = line.substr(15);
      if (!code.empty() && code.back() == '.') code.remove_suffix(1);
      w.aborted->first += " (error code " + std::string(code) + ")";
      auto n = strings::parse_int(code);
      if (n && (*n & 0xff) != 0) w.aborted->second = static_cast<int>(*n & 0xff);
    }
    if (auto f = parse_srun_failure(line)) {
      w.tasks.push_back(*f);
      DLTUNE_LOG(kDebug, "launch") << line;
      return std::nullopt;
    }
    if (is_srun_teardown_noise(line)) {
      DLTUNE_LOG(kDebug, "launch") << line;
      return std::nullopt;
    }
  }
  return std::string(line);
}

void name_failure(LaunchOutcome& out, const SrunFailures& w, const PlanEnv& pe) {
  if (w.aborted) {
    out.message = w.aborted->first;
    out.exit_code = w.aborted->second;
    // srun's status line for the aborting task gives its node.
    const std::string who = out.message.substr(0, out.message.find(" called"));
    for (const auto& f : w.tasks) {
      if ("rank " + std::to_string(f.rank) == who) {
        out.message.replace(0, who.size(), rank_label(pe, f.rank) + " on " + f.host);
        out.host = f.host;
        break;
      }
    }
  } else if (strings::starts_with(out.message, "srun ")) {
    if (auto first = first_failure(w.tasks)) {
      out.message = first->describe(&pe);
      out.exit_code = first->exit_status();
      out.host = first->host;
    }
  }
}

}  // namespace dltune::launcher
