#include "plugins/slurm/policy.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

namespace dltune::plugins::slurm {
namespace {

constexpr std::array<std::string_view, 16> kAllowed = {
    "CUDA_DEVICE_ORDER",
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "NCCL_TUNER_PLUGIN",
    "UCX_NET_DEVICES",
    "FI_PROVIDER",
    "OMPI_MCA_btl_openib_if_include",
    "OMPI_MCA_btl_tcp_if_include",
    "OMPI_MCA_coll_tuned_use_dynamic_rules",
    "OMPI_MCA_coll_tuned_dynamic_rules_filename",
    "DLTUNE_PLAN",
    "DLTUNE_LOCAL_RANK",
    "DLTUNE_LOCAL_SIZE",
    "DLTUNE_CPUS",
};

bool token_ok(std::string_view s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

}  // namespace

Result<UserRequest> parse_user_option(const char* optarg) {
  UserRequest r;
  if (optarg == nullptr || *optarg == '\0') {
    r.enabled = true;
    r.profile = "default";
    return r;
  }
  const std::string_view v(optarg, strnlen(optarg, 65));
  if (!token_ok(v, 64) || v.find("..") != std::string_view::npos) {
    return invalid_input(
        "--dltune takes a profile name of 1-64 letters, digits, '.', '_' or '-', or 'off'");
  }
  if (v == "off") return r;
  r.enabled = true;
  r.profile = std::string(v);
  return r;
}

Result<SiteConfig> parse_plugstack_args(int argc, char** argv) {
  SiteConfig c;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i] ? argv[i] : "";
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (key == "site_db" && !value.empty() && value[0] == '/') {
      c.site_db = value;
    } else if (key == "default" && (value == "on" || value == "off")) {
      c.default_on = value == "on";
    } else {
      return invalid_input("plugstack argument '" + a +
                           "' is not one of site_db=/absolute/path, default=on|off");
    }
  }
  return c;
}

bool applies(const std::optional<UserRequest>& user, const SiteConfig& site) {
  if (user) return user->enabled;
  return site.default_on;
}

bool is_allowed_variable(const std::string& name) {
  return std::find(kAllowed.begin(), kAllowed.end(), name) != kAllowed.end();
}

Result<TaskSettings> settings_for_task(const topology::Topology& topo, const TaskContext& ctx,
                                       const std::string& plan_path,
                                       const std::string& ompi_rules_path) {
  if (ctx.local_tasks < 1 || ctx.local_task_id < 0 || ctx.local_task_id >= ctx.local_tasks) {
    return invalid_input("local task " + std::to_string(ctx.local_task_id) + " of " +
                         std::to_string(ctx.local_tasks) + " is out of range");
  }
  const topology::Placement placement =
      topology::place(topo, ctx.local_tasks, topology::BindPolicy::kAuto);
  const topology::RankPlacement& rank = placement.ranks[static_cast<size_t>(ctx.local_task_id)];
  TaskSettings s;
  s.cpus = rank.cpus;
  s.env = topology::rank_env(topo, rank);
  s.env.push_back({"DLTUNE_LOCAL_RANK", std::to_string(ctx.local_task_id)});
  s.env.push_back({"DLTUNE_LOCAL_SIZE", std::to_string(ctx.local_tasks)});
  if (!rank.cpuset.empty()) s.env.push_back({"DLTUNE_CPUS", rank.cpuset});
  if (!plan_path.empty()) {
    s.env.push_back({"DLTUNE_PLAN", plan_path});
  }
  if (!ompi_rules_path.empty()) {
    s.env.push_back({"OMPI_MCA_coll_tuned_use_dynamic_rules", "1"});
    s.env.push_back({"OMPI_MCA_coll_tuned_dynamic_rules_filename", ompi_rules_path});
  }
  // Defence in depth: whatever topology/ computes, only allow-listed names leave here.
  std::erase_if(s.env, [](const auto& kv) { return !is_allowed_variable(kv.first); });
  return s;
}

}  // namespace dltune::plugins::slurm
