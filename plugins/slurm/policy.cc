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

constexpr std::array<std::pair<std::string_view, Profile>, 4> kProfiles = {{
    {"default", Profile::kDefault},
    {"bind-only", Profile::kBindOnly},
    {"collectives-only", Profile::kCollectivesOnly},
    {"tuned", Profile::kTuned},
}};

// A positive decimal number no larger than `max`, or nullopt.
std::optional<uint64_t> parse_number(const std::string& s, uint64_t max) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v == 0 || v > max) return std::nullopt;
  return v;
}

}  // namespace

const char* profile_name(Profile p) {
  for (const auto& [name, profile] : kProfiles) {
    if (profile == p) return name.data();
  }
  return "default";
}

ProfileEffects effects(Profile p) {
  switch (p) {
    case Profile::kBindOnly:
      return {true, false, false};
    case Profile::kCollectivesOnly:
      return {false, true, false};
    case Profile::kTuned:
      return {true, true, true};
    case Profile::kDefault:
      break;
  }
  return {true, true, false};
}

Result<UserRequest> parse_user_option(const char* optarg) {
  UserRequest r;
  if (optarg == nullptr || *optarg == '\0') {
    r.enabled = true;
    return r;
  }
  const std::string_view v(optarg, strnlen(optarg, 65));
  if (v == "off") return r;
  if (token_ok(v, 64)) {
    for (const auto& [name, profile] : kProfiles) {
      if (v == name) {
        r.enabled = true;
        r.profile = profile;
        return r;
      }
    }
  }
  return invalid_input("--dltune takes one of default, bind-only, collectives-only, tuned or off");
}

SiteConfig parse_plugstack_args(int argc, char** argv) {
  SiteConfig c;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i] ? std::string(argv[i], strnlen(argv[i], 4096)) : "";
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (key == "site_db" && !value.empty() && value[0] == '/') {
      c.site_db = value;
    } else if (key == "default" && (value == "on" || value == "off")) {
      c.default_on = value == "on";
    } else if (key == "dltune" && !value.empty() && value[0] == '/' &&
               value.find("/../") == std::string::npos) {
      c.dltune_bin = value;
    } else if (auto t = parse_number(value, 3600); key == "tune_timeout" && t) {
      c.tune_timeout_s = static_cast<int>(*t);
    } else if (auto b = parse_number(value, uint64_t{1} << 40); key == "tune_max_bytes" && b) {
      c.tune_max_bytes = *b;
    } else {
      // Printable and short in the log whatever the line holds.
      std::string shown;
      for (char ch : a.substr(0, 60)) shown += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
      c.ignored.push_back("'" + shown + (a.size() > 60 ? "...'" : "'"));
    }
  }
  return c;
}

std::string ignored_arguments_line(const SiteConfig& site) {
  if (site.ignored.empty()) return "";
  std::string list;
  for (const std::string& a : site.ignored) list += (list.empty() ? "" : ", ") + a;
  return "plugstack argument" + std::string(site.ignored.size() > 1 ? "s " : " ") + list +
         " ignored (expected site_db=/absolute/path, default=on|off, dltune=/absolute/path, "
         "tune_timeout=SECONDS or tune_max_bytes=N); the other settings on the line apply";
}

bool applies(const std::optional<UserRequest>& user, const SiteConfig& site) {
  if (user) return user->enabled;
  return site.default_on;
}

JobRequest resolve(const std::optional<UserRequest>& user, bool tune_flag, const SiteConfig& site) {
  JobRequest r;
  if (user && !user->enabled) return r;  // --dltune=off
  r.enabled = user.has_value() || tune_flag || site.default_on;
  if (!r.enabled) return r;
  if (user) r.profile = user->profile;
  r.tune = tune_flag || effects(r.profile).tune;
  return r;
}

bool is_allowed_variable(const std::string& name) {
  return std::find(kAllowed.begin(), kAllowed.end(), name) != kAllowed.end();
}

Result<TaskSettings> settings_for_task(const topology::Topology& topo, const TaskContext& ctx,
                                       const std::string& plan_path,
                                       const std::string& ompi_rules_path, Profile profile) {
  if (ctx.local_tasks < 1 || ctx.local_task_id < 0 || ctx.local_task_id >= ctx.local_tasks) {
    return invalid_input("local task " + std::to_string(ctx.local_task_id) + " of " +
                         std::to_string(ctx.local_tasks) + " is out of range");
  }
  const ProfileEffects fx = effects(profile);
  TaskSettings s;
  if (fx.placement) {
    const topology::Placement placement =
        topology::place(topo, ctx.local_tasks, topology::BindPolicy::kAuto);
    const topology::RankPlacement& rank = placement.ranks[static_cast<size_t>(ctx.local_task_id)];
    s.cpus = rank.cpus;
    s.env = topology::rank_env(topo, rank);
    if (!rank.cpuset.empty()) s.env.push_back({"DLTUNE_CPUS", rank.cpuset});
  }
  s.env.push_back({"DLTUNE_LOCAL_RANK", std::to_string(ctx.local_task_id)});
  s.env.push_back({"DLTUNE_LOCAL_SIZE", std::to_string(ctx.local_tasks)});
  if (fx.collectives && !plan_path.empty()) {
    s.env.push_back({"DLTUNE_PLAN", plan_path});
  }
  if (fx.collectives && !ompi_rules_path.empty()) {
    s.env.push_back({"OMPI_MCA_coll_tuned_use_dynamic_rules", "1"});
    s.env.push_back({"OMPI_MCA_coll_tuned_dynamic_rules_filename", ompi_rules_path});
  }
  // Defence in depth: whatever topology/ computes, only allow-listed names leave here.
  std::erase_if(s.env, [](const auto& kv) { return !is_allowed_variable(kv.first); });
  return s;
}

}  // namespace dltune::plugins::slurm
