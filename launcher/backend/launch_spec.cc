#include "launcher/backend/launch_spec.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env.h"
#include "common/json_input.h"
#include "common/strings.h"

namespace dltune::launcher {

Result<Backend> parse_backend(const std::string& text) {
  if (text == "local") return Backend::kLocal;
  if (text == "slurm") return Backend::kSlurm;
  return invalid_input("unknown backend '" + text + "'; use local or slurm");
}

Result<Backend> default_backend() {
  if (auto name = env::get_if_set(env::kBackend)) {
    auto b = parse_backend(*name);
    if (!b) return std::move(b).error().wrap("DLTUNE_BACKEND");
    return b;
  }
  const char* job = std::getenv("SLURM_JOB_ID");
  return (job != nullptr && *job != '\0') ? Backend::kSlurm : Backend::kLocal;
}

namespace {

Result<std::string> check_executable(const std::string& path, const std::string& program) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return not_found("program '" + program + "' does not exist");
  if (S_ISDIR(st.st_mode)) return invalid_input("program '" + program + "' is a directory");
  if (access(path.c_str(), X_OK) != 0) {
    return invalid_input("program '" + program + "' is not executable");
  }
  return path;
}

}  // namespace

Result<std::string> find_program(const std::string& program) {
  if (program.empty()) return invalid_input("the program name is empty");
  if (program.find('/') != std::string::npos) return check_executable(program, program);
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& dir : strings::split(path, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return not_found("program '" + program + "' was not found in PATH");
}

Result<std::vector<std::pair<std::string, std::string>>> parse_exports(
    const std::vector<std::string>& exports) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& x : exports) {
    const size_t eq = x.find('=');
    const std::string name = x.substr(0, eq);
    const bool valid =
        !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
        std::all_of(name.begin(), name.end(),
                    [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!valid) {
      return invalid_input("-x " + x + ": expected NAME=VALUE or NAME, NAME letters, digits and _");
    }
    if (eq != std::string::npos) {
      out.emplace_back(name, x.substr(eq + 1));
      continue;
    }
    const char* value = std::getenv(name.c_str());  // NOLINT: the user's variable, by name
    if (value == nullptr) {
      return invalid_input("-x " + name + ": " + name +
                           " is not set here; give its value with -x " + name + "=VALUE");
    }
    out.emplace_back(name, value);
  }
  return out;
}

Status validate_spec(const LaunchSpec& spec) {
  if (spec.argv.empty()) {
    return invalid_input("no program given; usage: dltune run -n N -- PROGRAM [ARGS...]");
  }
  if (spec.nranks < 1) {
    return invalid_input("the number of ranks must be at least 1, got " +
                         std::to_string(spec.nranks));
  }
  if (spec.nranks > 4096) {
    return invalid_input("at most 4096 ranks can be launched, got " + std::to_string(spec.nranks));
  }
  if (spec.timeout_s < 0) return invalid_input("the timeout must not be negative");
  DLTUNE_TRY(find_program(spec.argv[0]));
  return ok_status();
}

std::string outcome_to_json(const LaunchOutcome& o) {
  nlohmann::json j = {
      {"exit_code", o.exit_code}, {"message", o.message}, {"interrupted", o.interrupted}};
  if (!o.host.empty()) j["host"] = o.host;
  return j.dump();
}

Result<LaunchOutcome> outcome_from_json(std::string_view text) {
  auto j = parse_json_bounded(text);
  if (!j) return std::move(j).error().wrap("a run's outcome");
  if (!j->is_object() || !(*j)["exit_code"].is_number_integer() || !(*j)["message"].is_string() ||
      !(*j)["interrupted"].is_boolean() || (*j)["exit_code"].get<int64_t>() < 0 ||
      (*j)["exit_code"].get<int64_t>() > 255 ||
      (j->contains("host") && !(*j)["host"].is_string())) {
    return invalid_input(
        "a run's outcome: expected {\"exit_code\": 0-255, \"message\", \"interrupted\", "
        "\"host\" (optional)}");
  }
  LaunchOutcome o;
  o.exit_code = (*j)["exit_code"].get<int>();
  o.message = (*j)["message"].get<std::string>();
  o.interrupted = (*j)["interrupted"].get<bool>();
  if (j->contains("host")) o.host = (*j)["host"].get<std::string>();
  return o;
}

}  // namespace dltune::launcher
