#include "launcher/backend/slurm_backend.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/env.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/strings.h"
#include "launcher/backend/capture.h"
#include "launcher/backend/env_block.h"
#include "launcher/backend/plan_env.h"
#include "launcher/backend/rank_env.h"
#include "launcher/backend/rank_output.h"
#include "launcher/backend/srun_output.h"
#include "launcher/backend/supervisor.h"
#include "launcher/backend/temp_dir.h"

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

// srun's --cpu-bind=mask_cpu list: one hexadecimal CPU mask per local task.
std::string cpu_masks(const std::vector<std::vector<int>>& local_cpus) {
  std::string out;
  for (const std::vector<int>& cpus : local_cpus) {
    std::vector<uint8_t> nibbles;
    for (int c : cpus) {
      if (c < 0) continue;
      const size_t at = static_cast<size_t>(c) / 4;
      if (nibbles.size() <= at) nibbles.resize(at + 1, 0);
      nibbles[at] = static_cast<uint8_t>(nibbles[at] | (1u << (c % 4)));
    }
    std::string hex;
    for (auto it = nibbles.rbegin(); it != nibbles.rend(); ++it) hex += "0123456789abcdef"[*it];
    out += (out.empty() ? "0x" : ",0x") + (hex.empty() ? std::string("0") : hex);
  }
  return out;
}

// A boot id as the kernel prints it: a UUID, 8-4-4-4-12 hexadecimal digits.
bool is_boot_id(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

std::string self_dir() {
  char buf[PATH_MAX + 1] = {};
  const ssize_t n = readlink("/proc/self/exe", buf, PATH_MAX);
  if (n <= 0) return ".";
  const std::string exe(buf, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

// The address Slurm reaches `node` at (its NodeAddr), else the name itself.
std::string node_addr(const std::string& node) {
  auto scontrol = find_program("scontrol");
  if (!scontrol) return node;
  auto out = capture_output({*scontrol, "show", "node", "-o", node});
  if (!out) return node;
  const size_t at = out->find("NodeAddr=");
  if (at == std::string::npos) return node;
  const size_t end = out->find_first_of(" \n", at);
  return out->substr(at + 9, end == std::string::npos ? std::string::npos : end - at - 9);
}

// An IP address for `name` (an address already, or the first IPv4 one it resolves to).
std::string ip_of(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* res = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &res) == 0) {
    freeaddrinfo(res);
    return name;
  }
  hints.ai_flags = 0;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return name;
  char buf[INET6_ADDRSTRLEN] = {};
  getnameinfo(res->ai_addr, res->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(res);
  return buf[0] != '\0' ? buf : name;
}

// `list` (a Slurm hostlist, "n[1-3],m2") expanded by `scontrol show hostnames`, in order.
Result<std::vector<std::string>> expand_hostlist(const std::string& list) {
  auto scontrol = find_program("scontrol");
  if (!scontrol) return scontrol.error();
  auto out = capture_output({*scontrol, "show", "hostnames", list});
  if (!out) return std::move(out).error().wrap("scontrol show hostnames");
  std::vector<std::string> hosts;
  for (const std::string& raw : strings::split(*out, '\n')) {
    std::string h = strings::trim(raw);
    if (!h.empty()) hosts.push_back(std::move(h));
  }
  return hosts;
}

// The first node of `list` that is not in `exclude`: with none excluded, first_host(); else the
// list expanded.
Result<std::string> first_node_left(const std::string& list,
                                    const std::vector<std::string>& exclude) {
  if (exclude.empty()) return first_host(list);
  auto hosts = expand_hostlist(list);
  if (!hosts) return hosts.error();
  for (const std::string& h : *hosts) {
    if (std::find(exclude.begin(), exclude.end(), h) == exclude.end()) return h;
  }
  return invalid_input("every node of " + list + " is excluded");
}

// Slurm's KillWait (scontrol show config), its default 30 s when scontrol does not say within
// 2 s (it is asked while the launcher's loop waits: a failed task's line has just come).
int slurm_kill_wait_s() {
  constexpr int kDefault = 30;
  auto scontrol = find_program("scontrol");
  if (!scontrol) return kDefault;
  auto out = capture_output({*scontrol, "show", "config"}, 2000);
  if (!out) return kDefault;
  return parse_kill_wait(*out).value_or(kDefault);
}

// The most the one-task step that finds a free port on rank 0's node may take.
constexpr int kRendezvousTimeoutMs = 60000;

// MASTER_ADDR / MASTER_PORT for the job: rank 0 runs on the allocation's first node that is not
// excluded (srun's block distribution), so its address, and a port free there: found here when
// this is that node, else by dltune-rank-env in a one-task step on it. The user's values win.
Result<EnvList> slurm_rendezvous(const std::string& srun, const std::string& rank_env,
                                 const std::vector<std::string>& exclude) {
  const char* user_addr = std::getenv("MASTER_ADDR");  // NOLINT: PyTorch's variable
  const char* user_port = std::getenv("MASTER_PORT");  // NOLINT: as above
  if (user_addr != nullptr && *user_addr != '\0' && user_port != nullptr && *user_port != '\0') {
    return EnvList{};
  }
  std::string host, addr;
  if (user_addr != nullptr && *user_addr != '\0') {
    addr = user_addr;
  } else {
    const char* list = std::getenv("SLURM_JOB_NODELIST");       // NOLINT: Slurm's
    if (list == nullptr) list = std::getenv("SLURM_NODELIST");  // NOLINT: Slurm's
    if (list == nullptr)
      return invalid_input("SLURM_JOB_NODELIST is not set: not in an allocation");
    auto first = first_node_left(list, exclude);
    if (!first) return std::move(first).error().wrap("SLURM_JOB_NODELIST");
    host = *first;
    addr = ip_of(node_addr(host));
  }
  EnvList env = {{"MASTER_ADDR", addr}};
  if (user_port != nullptr && *user_port != '\0') return env;
  // A port free on every address (PyTorch's store listens on all of them) of rank 0's node:
  // this one when `addr` is one of its addresses, else asked of that node.
  Result<int> port = io_error("not asked");
  if (free_tcp_port(addr).ok()) {
    port = free_tcp_port("0.0.0.0");
  } else if (!host.empty()) {
    std::vector<std::string> ask = {srun,      "--nodes=1",   "--ntasks=1", "--nodelist=" + host,
                                    "--quiet", "--input=none"};
    if (!exclude.empty()) ask.push_back("--overlap");  // as srun_command() says
    ask.insert(ask.end(), {rank_env, "--free-port", "0.0.0.0"});
    auto out = capture_output(ask, kRendezvousTimeoutMs);
    auto n = out ? strings::parse_int(strings::trim(*out)) : Result<int64_t>(out.error());
    if (n && *n > 0 && *n < 65536) port = static_cast<int>(*n);
  }
  if (!port) {
    return io_error("no free port for MASTER_PORT on " + (host.empty() ? addr : host) +
                    " (set MASTER_PORT yourself)");
  }
  env.emplace_back("MASTER_PORT", std::to_string(*port));
  return env;
}

}  // namespace

std::vector<std::string> srun_command(const std::string& srun_path,
                                      const std::string& rank_env_path, const LaunchSpec& spec) {
  std::vector<std::string> argv = {srun_path, "--mpi=pmix", "--kill-on-bad-exit=1",
                                   "--ntasks=" + std::to_string(spec.nranks), "--input=0"};
  if (spec.nodes > 0) {
    argv.push_back("--nodes=" + std::to_string(spec.nodes));
    // The job's shape exactly: srun would otherwise fill the first node's CPUs first.
    if (spec.nranks % spec.nodes == 0) {
      argv.push_back("--ntasks-per-node=" + std::to_string(spec.nranks / spec.nodes));
    }
  }
  if (!spec.exclude.empty()) {
    argv.push_back("--exclude=" + strings::join(spec.exclude, ","));
    // A step that ran on a lost node holds its CPUs on the other nodes until Slurm times the
    // node out (SlurmdTimeout): the next steps share them instead of waiting that long.
    argv.push_back("--overlap");
  }
  if (spec.output.per_rank()) argv.push_back("--label");
  if (!spec.local_cpus.empty()) {
    argv.push_back("--cpu-bind=mask_cpu:" + cpu_masks(spec.local_cpus));
  } else if (const char* bind = srun_cpu_bind(spec.bind)) {
    argv.push_back(bind);
  }
  argv.push_back("--");
  argv.push_back(rank_env_path);
  argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
  return argv;
}

bool in_slurm_allocation() {
  const char* job = std::getenv("SLURM_JOB_ID");  // NOLINT: Slurm's
  return job != nullptr && *job != '\0';
}

int allocation_nodes() {
  for (const char* name : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}) {
    const char* v = std::getenv(name);  // NOLINT: Slurm's
    if (v == nullptr) continue;
    auto n = strings::parse_int(v);
    if (n && *n > 0 && *n < (1 << 20)) return static_cast<int>(*n);
  }
  return 0;
}

Result<int> count_boot_ids(std::string_view output, int nodes) {
  std::set<std::string> ids;
  int lines = 0;
  for (const std::string& raw : strings::split(output, '\n')) {
    std::string line = strings::trim(raw);
    if (line.empty()) continue;
    if (!is_boot_id(line)) {
      return invalid_input("not a boot id: '" + line.substr(0, 64) + "'");
    }
    for (char& c : line) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ids.insert(line);
    ++lines;
  }
  if (lines != nodes) {
    return invalid_input(std::to_string(lines) + " boot id(s) from " + std::to_string(nodes) +
                         " node(s)");
  }
  return static_cast<int>(ids.size());
}

Result<int> count_node_machines(int nodes, int timeout_ms) {
  if (nodes <= 1) return 1;
  if (!in_slurm_allocation()) return unsupported("not in a Slurm allocation");
  auto srun = find_program("srun");
  if (!srun) return unsupported("srun was not found in PATH");
  const std::string n = std::to_string(nodes);
  auto out = capture_output({*srun, "--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1",
                             "--quiet", "--input=none", "cat", "/proc/sys/kernel/random/boot_id"},
                            timeout_ms);
  if (!out) return std::move(out).error();
  return count_boot_ids(*out, nodes);
}

Result<std::vector<std::string>> job_nodes(int nodes, const std::vector<std::string>& exclude) {
  const char* list = std::getenv("SLURM_JOB_NODELIST");       // NOLINT: Slurm's
  if (list == nullptr) list = std::getenv("SLURM_NODELIST");  // NOLINT: Slurm's
  if (list == nullptr) return unsupported("not in a Slurm allocation");
  auto hosts = expand_hostlist(list);
  if (!hosts) return hosts.error();
  std::vector<std::string> out;
  for (const std::string& h : *hosts) {
    if (static_cast<int>(out.size()) == nodes) break;
    if (std::find(exclude.begin(), exclude.end(), h) == exclude.end()) out.push_back(h);
  }
  return out;
}

namespace {
// One `KEY=VALUE` field of `scontrol show job -o` output ("" when absent).
std::string job_field(const std::string& line, const std::string& key) {
  for (const std::string& f : strings::split(line, ' '))
    if (f.size() > key.size() && f.compare(0, key.size() + 1, key + "=") == 0)
      return strings::trim(f.substr(key.size() + 1));
  return "";
}
}  // namespace

Result<std::string> grow_allocation(int timeout_ms) {
  const char* id = std::getenv("SLURM_JOB_ID");  // NOLINT: Slurm's
  if (!in_slurm_allocation()) return unsupported("not in a Slurm allocation");
  auto salloc = find_program("salloc");
  if (!salloc) return unsupported("salloc was not found in PATH");
  auto scontrol = find_program("scontrol");
  if (!scontrol) return unsupported("scontrol was not found in PATH");
  auto before = job_nodes(1 << 20, {});
  if (!before) return std::move(before).error().wrap("the allocation's nodes");
  // scontrol writes its resize scripts (slurm_job_N_resize.sh) into its working directory:
  // a scratch one, not the user's.
  auto scratch = TempDir::create_in_tmp("dltune-grow-");
  if (!scratch) return std::move(scratch).error();
  const int wait_s = std::max(1, (timeout_ms + 999) / 1000);
  auto got = capture_output(
      {*salloc, "--quiet", "--nodes=1", "--ntasks=1", "--immediate=" + std::to_string(wait_s),
       "--dependency=expand:" + std::string(id), "--exclude=" + strings::join(*before, ","),
       "--chdir=" + scratch->path(), "--", "/bin/sh", "-c",
       "exec \"$0\" update JobId=\"$SLURM_JOB_ID\" NumNodes=0", *scontrol},
      timeout_ms + 5000, /*with_stderr=*/true);
  if (!got) {
    Error e = std::move(got).error().wrap("salloc --dependency=expand:" + std::string(id));
    const std::string hint = grow_refusal_hint(e.message());
    return hint.empty() ? e : Error(e.kind(), e.message() + " (" + hint + ")");
  }
  // The node moves to this job as the new one gives it up; scontrol shows it within moments.
  for (int tries = 0; tries < 50; ++tries) {
    auto shown = capture_output({*scontrol, "show", "job", "-o", id}, 5000);
    if (!shown) return std::move(shown).error().wrap("scontrol show job " + std::string(id));
    const std::string list = job_field(*shown, "NodeList");
    const std::string count = job_field(*shown, "NumNodes");
    auto hosts = list.empty() ? Result<std::vector<std::string>>(std::vector<std::string>())
                              : expand_hostlist(list);
    if (!hosts) return hosts.error();
    for (const std::string& h : *hosts) {
      if (std::find(before->begin(), before->end(), h) != before->end()) continue;
      // What the resize script scontrol writes would set: later steps and job_nodes() see
      // the grown allocation.
      for (const char* k : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) setenv(k, list.c_str(), 1);
      const std::string n = count.empty() ? std::to_string(hosts->size()) : count;
      for (const char* k : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}) setenv(k, n.c_str(), 1);
      return h;
    }
    usleep(100 * 1000);
  }
  return io_error("salloc granted a node, but job " + std::string(id) +
                  " still lists only its own after 5 s (scontrol show job " + id + ")");
}

std::string grow_refusal_hint(std::string_view salloc_error) {
  if (salloc_error.find("not supported on this system") == std::string_view::npos) return "";
  return "Slurm grows a job only where slurm.conf has SchedulerParameters=permit_job_expansion";
}

Result<bool> node_answers(const std::string& node, int timeout_ms) {
  if (!in_slurm_allocation()) return unsupported("not in a Slurm allocation");
  auto srun = find_program("srun");
  if (!srun) return unsupported("srun was not found in PATH");
  // --overlap: the failed step's CPUs may not all be released yet on a node that is fine.
  auto out = capture_output({*srun, "--nodes=1", "--ntasks=1", "--nodelist=" + node, "--overlap",
                             "--quiet", "--input=none", "cat", "/proc/sys/kernel/random/boot_id"},
                            timeout_ms);
  return out.ok() && is_boot_id(strings::trim(*out));
}

std::optional<int> parse_kill_wait(std::string_view scontrol_config) {
  for (const std::string& raw : strings::split(scontrol_config, '\n')) {
    const std::string line = strings::trim(raw);
    const size_t eq = line.find('=');
    if (eq == std::string::npos || strings::trim(line.substr(0, eq)) != "KillWait") continue;
    std::string value = strings::trim(line.substr(eq + 1));
    if (value.ends_with(" sec")) value = strings::trim(value.substr(0, value.size() - 4));
    auto n = strings::parse_int(value);
    if (n && *n >= 0 && *n <= 65535) return static_cast<int>(*n);
    return std::nullopt;
  }
  return std::nullopt;
}

Status rerun_in_allocation(int nodes, int ntasks, bool keep_on_node_failure, int nodes_max) {
  auto salloc = find_program("salloc");
  if (!salloc) {
    return unsupported(
        "salloc was not found in PATH; run inside a Slurm allocation or use "
        "--backend local");
  }
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::string> argv = {*salloc, "--quiet"};
  // The allocation outlives a failed node, which the job's restarts then leave out: by
  // default Slurm ends the whole allocation when one of its nodes fails.
  if (keep_on_node_failure) argv.push_back("--no-kill");
  if (nodes > 0 && nodes_max > nodes) {
    argv.push_back("--nodes=" + std::to_string(nodes) + "-" + std::to_string(nodes_max));
  } else if (nodes > 0) {
    argv.push_back("--nodes=" + std::to_string(nodes));
  }
  argv.push_back("--ntasks=" + std::to_string(ntasks));
  argv.push_back("--");
  argv.push_back(self_dir() + "/" + "dltune");
  const std::vector<std::string> own = strings::split(cmdline, '\0');
  if (own.size() < 2) return io_error("cannot read this command's arguments");
  for (size_t i = 1; i < own.size(); ++i) {
    if (i + 1 == own.size() && own[i].empty()) break;  // the terminating NUL
    argv.push_back(own[i]);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  DLTUNE_LOG(kInfo, "launch") << "not in an allocation: " << strings::join(argv, " ");
  execv(args[0], args.data());
  return errno_error("running " + *salloc);
}

namespace {

// A note for the user: through spec.warn where the caller gave one, else the log.
void warn_user(const LaunchSpec& spec, const std::string& n) {
  if (spec.warn) {
    spec.warn(n);
  } else {
    DLTUNE_LOG(kWarn, "launch") << n;
  }
}

// The plan's environment for the ranks (its stages name a failed rank's stage), its notes
// passed on to the user; empty without a plan.
PlanEnv plan_env_of(const LaunchSpec& spec) {
  PlanEnv pe;
  if (!spec.plan) return pe;
  const int per_node = spec.nodes > 0 && spec.nranks % spec.nodes == 0
                           ? spec.nranks / spec.nodes
                           : spec.nranks / std::max(1, allocation_nodes());
  pe = plan_env_for(*spec.plan, spec.nranks, per_node);
  for (const std::string& n : notes_for(pe, spec.argv)) warn_user(spec, "--plan: " + n);
  return pe;
}

// The plan's and recipe's files the ranks read (DLTUNE_PLAN, DLTUNE_RECIPE; srun's PMIx server
// has no job data of dltune's), written to `plan_dir` and named in `env`; and the plan's CPU
// binding into spec.local_cpus where srun can apply it. Errors: creating or writing the files.
Status apply_plan(LaunchSpec& spec, const PlanEnv& pe, EnvBlock& env,
                  std::optional<TempDir>& plan_dir) {
  if (!spec.plan_blob.empty() || !spec.recipe_blob.empty()) {
    auto dir = TempDir::create_in_tmp("dltune-plan-");
    if (!dir) return std::move(dir).error();
    plan_dir = std::move(*dir);
    auto files = write_plan_files(pe, spec.plan_blob, spec.recipe_blob, plan_dir->path());
    if (!files) return std::move(files).error();
    for (const auto& [k, v] : *files) env.set(k, v, k == "DLTUNE_PLAN" || k == "DLTUNE_RECIPE");
  }
  if (spec.plan_blob.empty()) return {};
  // The plan's CPU binding through srun; its GPU and NIC variables need the nodes' topology,
  // which the SPANK plugin (srun --dltune) applies on each node.
  if (!spec.bind_from_user && !pe.placement.empty() && spec.nodes == 0) {
    warn_user(spec,
              "--plan: its CPU binding is applied under Slurm with --nodes only (which fixes how "
              "many ranks each node runs)");
  }
  if (!spec.bind_from_user && !pe.placement.empty() && spec.nodes > 0) {
    for (const auto& rp : pe.placement) spec.local_cpus.push_back(rp.cpus);
    if (std::any_of(spec.local_cpus.begin(), spec.local_cpus.end(),
                    [](const auto& c) { return c.empty(); })) {
      spec.local_cpus.clear();
    }
  }
  return {};
}

}  // namespace

Result<LaunchOutcome> run_slurm(const LaunchSpec& spec_in) {
  LaunchSpec spec = spec_in;
  DLTUNE_TRY(validate_spec(spec));
  auto srun = find_program("srun");
  if (!srun) {
    return unsupported(
        "srun was not found in PATH; the slurm backend needs Slurm's client "
        "commands (or use --backend local)");
  }
  const std::string rank_env = self_dir() + "/dltune-rank-env";
  if (access(rank_env.c_str(), X_OK) != 0) {
    return not_found(rank_env + " is missing: build the 'dltune-rank-env' target");
  }
  EnvBlock env(environ);
  auto rendezvous = slurm_rendezvous(*srun, rank_env, spec.exclude);
  if (!rendezvous) return std::move(rendezvous).error().wrap("PyTorch's rendezvous");
  for (const auto& [k, v] : *rendezvous) env.set(k, v);
  std::optional<TempDir> plan_dir;  // kept until srun ends: the ranks read its files
  const PlanEnv pe = plan_env_of(spec);
  DLTUNE_TRY(apply_plan(spec, pe, env, plan_dir));
  env.set("OMPI_MCA_pml", "ob1", false);
  for (const auto& [k, v] : spec.extra_env) env.set(k, v);

  Supervisor::Options opts{false, spec.kill_grace_ms, spec.timeout_s, SIGTERM};
  Supervisor sup(opts);
  DLTUNE_TRY(sup.install_signal_handling());
  SrunFailures failures;
  auto output = RankOutput::open(spec.output);
  if (!output) return std::move(output).error();
  // The failure srun is stopped with when it overstays (set with the first failed task's
  // deadline: KillWait is asked of Slurm then, not at every launch).
  std::string overstayed;
  sup.set_line_filter([&](int, bool is_stderr,
                          std::string_view line) -> std::optional<std::string> {
    const size_t known = failures.tasks.size();
    auto shown = filter_srun_line(failures, is_stderr, line);
    if (failures.tasks.size() > known && overstayed.empty()) {
      const int within_s = slurm_kill_wait_s() + 2 + kSrunEndSlackS;
      overstayed = "srun did not end within " + std::to_string(within_s) + " s of a task's failure";
      sup.stop_unless_ended(std::chrono::seconds(within_s), {overstayed, 1});
    }
    if (!shown || !spec.output.active()) return shown;
    const auto [task, text] = spec.output.per_rank() ? split_srun_label(*shown)
                                                     : std::pair<int, std::string_view>{-1, *shown};
    return output->line(task, is_stderr, text);
  });
  // srun's task-status lines may still be in the pipe when srun is reaped: the failed rank
  // is named after run(), from all of them.
  sup.set_exit_judge([](int, int status) -> std::string {
    return Supervisor::default_exit_judgement("srun", "", status);
  });
  auto argv = srun_command(*srun, rank_env, spec);
  DLTUNE_LOG(kInfo, "launch") << "running " << strings::join(argv, " ");
  auto index = sup.spawn({*srun, argv, env.data(), {}, "srun", "", /*stdin_from_launcher=*/true});
  if (!index) return std::move(index).error().wrap("starting srun");
  LaunchOutcome out = sup.run();
  if (out.exit_code == 0 || out.interrupted) return out;
  if (!overstayed.empty() && out.message == overstayed) {
    warn_user(spec, overstayed + " (Slurm's KillWait + 2 s + " + std::to_string(kSrunEndSlackS) +
                        " s): stopped it; a node of the job may be gone, its step daemon with it");
  }
  name_failure(out, failures, pe);
  return out;
}

}  // namespace dltune::launcher
