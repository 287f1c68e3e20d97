#include "launcher/flow/plan_words.h"

#include <cstdio>

#include "common/strings.h"

namespace dltune::launcher {
namespace {

std::string range_text(uint64_t lo, uint64_t hi) {
  if (lo == 0 && hi == recipes::kPlanMaxBytes) return "every size";
  if (lo == 0) return "below " + strings::format_bytes(hi);
  if (hi == recipes::kPlanMaxBytes) return "from " + strings::format_bytes(lo);
  return strings::format_bytes(lo) + " to " + strings::format_bytes(hi);
}

}  // namespace

std::string allreduce_in_words(const recipes::Plan& plan) {
  auto it = plan.collectives.find(recipes::Collective::kAllreduce);
  if (it == plan.collectives.end()) return "";
  std::vector<std::string> parts;
  for (const recipes::SizeRange& r : it->second) {
    std::string algo(recipes::algorithm_name(r.algo));
    if (r.segment_bytes > 0) algo += " (segments " + strings::format_bytes(r.segment_bytes) + ")";
    parts.push_back(algo + " " + range_text(r.min_bytes, r.max_bytes));
  }
  return strings::join(parts, ", ");
}

std::string describe_plan(const recipes::Plan& plan, const std::string& indent) {
  const recipes::TrainingPlan& t = plan.training;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "training: per-rank batch %lld, global %lld, %s scaling, lr x%.2f (warm-up %lld "
                "steps), bucket %s, overlap %s",
                static_cast<long long>(t.per_rank_batch), static_cast<long long>(t.global_batch),
                std::string(recipes::scaling_name(t.scaling)).c_str(), t.lr_scale,
                static_cast<long long>(t.warmup_steps),
                strings::format_bytes(t.bucket_bytes).c_str(), t.overlap ? "on" : "off");
  std::string out = indent + buf + "\n";
  if (plan.parallel.pipelined()) {
    const recipes::ParallelLayout& l = plan.parallel;
    out += indent + "layout: " + std::to_string(l.replicas) + " replica(s) x " +
           std::to_string(l.stages) + " stages, " + std::to_string(l.microbatches) +
           " micro-batches, " + std::string(recipes::schedule_name(l.schedule)) + " schedule\n";
  }
  const std::string allreduce = allreduce_in_words(plan);
  if (!allreduce.empty()) out += indent + "allreduce: " + allreduce + "\n";
  // A cached plan's text came from a database: parse_plan refuses control characters in it, and
  // nothing a terminal would act on is printed anyway.
  if (!plan.provenance.reason.empty()) {
    out += indent + "why: " + strings::printable(plan.provenance.reason, "") + "\n";
  }
  return out;
}

}  // namespace dltune::launcher
