// The candidates of a program recipe's search, the plan that records the chosen one, and the
// database rows of its trials (tuner/program_tuning.h).
//
// How it works. axes_of() turns the recipe and the machine into four lists: per-rank batches,
// ranks per node, threads per rank and bucket sizes, each a single "unset" (0) or fixed value
// when the search does not vary it; threads follow the ranks per node (the cores shared among
// them) unless the search lists them. program_candidates() takes every combination of those
// whose ranks x threads fit a node's cores, in the order batch, ranks per node, threads,
// bucket. values_from_plan() runs the same expansion and picks the candidate that holds the
// plan's searched values, so that a plan read back from the database runs exactly as the
// candidate it was tuned as. program_trial_rows() describes each trial's candidate by the
// training fields program_plan() would write for it, so that rows and plan agree.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/log.h"
#include "tuner/program_tuning.h"

namespace dltune::tuner {
namespace {

using recipes::ProgramRecipe;
using recipes::ProgramValues;

constexpr size_t kMaxCandidates = 256;
constexpr double kMiB = 1024.0 * 1024.0;

// The lists a search's candidates combine; a setting the search does not vary has one value
// (0 for batch and bucket: unset). `threads` empty: derived from the ranks per node.
struct Axes {
  std::vector<int64_t> batch;
  std::vector<int64_t> ranks_per_node;
  std::vector<int64_t> threads;
  std::vector<double> bucket_mb;
};

template <typename T>
std::vector<T> unique_in_order(const std::vector<T>& v) {
  std::vector<T> out;
  for (const T& x : v) {
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  }
  return out;
}

int cores_of(const ProgramMachine& m) { return std::max(1, m.cores_per_node); }

bool searches_ranks(const ProgramRecipe& r) {
  return r.search.ranks_auto || !r.search.ranks_per_node.empty();
}

// 1, the NUMA domains, the powers of two up to the cores, and the cores; sorted.
std::vector<int64_t> auto_ranks_per_node(const ProgramMachine& m) {
  const int64_t cores = cores_of(m);
  std::vector<int64_t> v = {1, std::clamp<int64_t>(m.numa_per_node, 1, cores), cores};
  for (int64_t p = 2; p <= cores; p *= 2) v.push_back(p);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

Result<Axes> axes_of(const ProgramRecipe& r, const ProgramMachine& m) {
  if (m.nodes < 1) return invalid_input("a job needs at least one node");
  const recipes::LaunchConfig& l = r.launch;
  if (l.ranks > 0 && l.ranks % m.nodes != 0) {
    return invalid_input("launch.ranks " + std::to_string(l.ranks) + " is not divisible by the " +
                         std::to_string(m.nodes) + " nodes of the job (every node runs as many)");
  }
  Axes a;
  a.batch = r.search.batch.empty() ? std::vector<int64_t>{0} : unique_in_order(r.search.batch);
  a.bucket_mb =
      r.search.bucket_mb.empty() ? std::vector<double>{0} : unique_in_order(r.search.bucket_mb);
  a.threads = unique_in_order(r.search.threads_per_rank);
  if (r.search.ranks_auto) {
    a.ranks_per_node = auto_ranks_per_node(m);
  } else if (!r.search.ranks_per_node.empty()) {
    a.ranks_per_node = unique_in_order(r.search.ranks_per_node);
  } else if (l.ranks > 0) {
    a.ranks_per_node = {l.ranks / m.nodes};
  } else if (l.ranks_per_node > 0) {
    a.ranks_per_node = {l.ranks_per_node};
  } else {
    a.ranks_per_node = {std::max(1, m.numa_per_node)};
  }
  return a;
}

// Threads per rank at `rpn` ranks per node when the search does not list them.
int64_t derived_threads(const ProgramRecipe& r, const ProgramMachine& m, int64_t rpn) {
  if (r.launch.threads_per_rank > 0) return r.launch.threads_per_rank;
  return std::max<int64_t>(1, cores_of(m) / std::max<int64_t>(1, rpn));
}

// Whether rpn ranks of `threads` threads fit the cores (no overflow for any inputs).
bool fits(int64_t rpn, int64_t threads, int cores) {
  return rpn >= 1 && threads >= 1 && rpn <= cores && threads <= cores && rpn * threads <= cores;
}

std::string shape_text(int64_t rpn, int64_t threads) {
  return std::to_string(rpn) + "x" + std::to_string(threads) + "t";
}

// The (ranks per node, threads) pairs that fit, or the error naming what was asked for.
Result<std::vector<std::pair<int64_t, int64_t>>> fitting_shapes(const ProgramRecipe& r,
                                                                const ProgramMachine& m,
                                                                const Axes& a) {
  std::vector<std::pair<int64_t, int64_t>> fit, asked;
  for (int64_t rpn : a.ranks_per_node) {
    const std::vector<int64_t> threads =
        a.threads.empty() ? std::vector<int64_t>{derived_threads(r, m, rpn)} : a.threads;
    for (int64_t t : threads) {
      asked.emplace_back(rpn, t);
      if (fits(rpn, t, cores_of(m))) fit.emplace_back(rpn, t);
    }
  }
  if (!fit.empty()) return fit;
  // Products in long double: the lists may hold values whose product overflows int64.
  auto cores = [](const auto& p) {
    return static_cast<long double>(p.first) * static_cast<long double>(p.second);
  };
  auto by_cores = [&](const auto& x, const auto& y) { return cores(x) < cores(y); };
  const auto lo = *std::min_element(asked.begin(), asked.end(), by_cores);
  const auto hi = *std::max_element(asked.begin(), asked.end(), by_cores);
  auto named = [&](const auto& p) {
    char n[48];
    std::snprintf(n, sizeof n, "%.0Lf", cores(p));
    return shape_text(p.first, p.second) + " (" + n + " cores)";
  };
  std::string what = lo == hi
                         ? "it asks for " + named(hi)
                         : "the smallest asked for is " + named(lo) + ", the largest " + named(hi);
  return invalid_input("no combination of ranks per node and threads per rank fits the " +
                       std::to_string(cores_of(m)) + " cores a node gives the job: " + what);
}

uint64_t bucket_bytes_of(double bucket_mb) {
  if (!(bucket_mb > 0)) return recipes::TrainingPlan{}.bucket_bytes;
  const double b = std::round(bucket_mb * kMiB);
  return static_cast<uint64_t>(std::clamp(b, static_cast<double>(recipes::kMinPlanBucketBytes),
                                          static_cast<double>(recipes::kMaxPlanBucketBytes)));
}

}  // namespace

ProgramMachine program_machine(const topology::Topology& topo) {
  ProgramMachine m;
  m.cores_per_node = std::max<int>(1, static_cast<int>(topo.cores.size()));
  m.numa_per_node = std::max<int>(1, static_cast<int>(topo.numa_nodes.size()));
  return m;
}

Result<std::vector<ProgramCandidate>> program_candidates(const ProgramRecipe& recipe,
                                                         const ProgramMachine& machine) {
  auto axes = axes_of(recipe, machine);
  if (!axes) return axes.error();
  auto shapes = fitting_shapes(recipe, machine, *axes);
  if (!shapes) return shapes.error();
  const size_t n = axes->batch.size() * shapes->size() * axes->bucket_mb.size();
  if (n > kMaxCandidates) {
    return invalid_input("the search has " + std::to_string(n) + " candidates, more than " +
                         std::to_string(kMaxCandidates) + ": shorten its lists");
  }
  std::vector<ProgramCandidate> out;
  for (int64_t batch : axes->batch) {
    for (const auto& [rpn, threads] : *shapes) {
      for (double bucket : axes->bucket_mb) {
        ProgramCandidate c;
        c.values.batch = batch;
        c.values.ranks_per_node = static_cast<int>(rpn);
        c.values.threads_per_rank = static_cast<int>(threads);
        c.values.ranks = static_cast<int>(rpn * machine.nodes);
        c.values.bucket_mb = bucket;
        c.label = program_label(c.values);
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

std::string program_label(const ProgramValues& v) {
  std::vector<std::string> parts;
  if (v.batch > 0) parts.push_back("b" + std::to_string(v.batch));
  if (v.ranks_per_node > 0 && v.threads_per_rank > 0) {
    parts.push_back(shape_text(v.ranks_per_node, v.threads_per_rank));
  } else if (v.ranks_per_node > 0) {
    parts.push_back(std::to_string(v.ranks_per_node) + " ranks/node");
  } else if (v.threads_per_rank > 0) {
    parts.push_back(std::to_string(v.threads_per_rank) + "t");
  }
  if (v.bucket_mb > 0) {
    char b[48];
    std::snprintf(b, sizeof b, "bucket=%gMB", v.bucket_mb);
    parts.push_back(b);
  }
  if (parts.empty()) return "defaults";
  std::string s = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) s += " " + parts[i];
  return s;
}

recipes::Plan program_plan(const ProgramRecipe& recipe, const ProgramCandidate& chosen, int nodes,
                           const recipes::Plan& base, const recipes::Provenance& provenance) {
  const ProgramValues& v = chosen.values;
  recipes::Plan p = base;
  p.placement.clear();
  p.parallel = recipes::ParallelLayout{};
  p.set_job({std::max(1, nodes), std::max(1, v.ranks_per_node), std::max(1, v.threads_per_rank)});
  recipes::TrainingPlan t;  // weak scaling, lr_scale 1, no warm-up: the program's own
  t.per_rank_batch = v.batch > 0 ? v.batch : 1;
  t.global_batch = t.per_rank_batch * p.job.nodes * p.job.ranks_per_node;
  t.bucket_bytes = bucket_bytes_of(v.bucket_mb);
  p.training = t;
  p.provenance = provenance;
  p.provenance.recipe = recipe.name;
  return p;
}

Result<ProgramCandidate> values_from_plan(const ProgramRecipe& recipe,
                                          const ProgramMachine& machine,
                                          const recipes::Plan& plan) {
  if (plan.job.nodes != machine.nodes) {
    return invalid_input("the plan is for " + std::to_string(plan.job.nodes) +
                         " nodes, the job runs on " + std::to_string(machine.nodes));
  }
  const recipes::ProgramSearch& s = recipe.search;
  auto not_listed = [](const std::string& what, const std::string& value, const char* list) {
    return invalid_input("the plan's " + what + " " + value + " is not in the recipe's search." +
                         list + " (the plan was tuned for another search)");
  };
  const int64_t batch = plan.training.per_rank_batch;
  if (!s.batch.empty() && std::find(s.batch.begin(), s.batch.end(), batch) == s.batch.end()) {
    return not_listed("per-rank batch", std::to_string(batch), "batch");
  }
  double bucket = 0;
  if (!s.bucket_mb.empty()) {
    auto it = std::find_if(s.bucket_mb.begin(), s.bucket_mb.end(), [&](double mb) {
      return bucket_bytes_of(mb) == plan.training.bucket_bytes;
    });
    if (it == s.bucket_mb.end()) {
      return not_listed("bucket", std::to_string(plan.training.bucket_bytes) + " bytes",
                        "bucket_mb");
    }
    bucket = *it;
  }
  auto axes = axes_of(recipe, machine);
  if (!axes) return axes.error();
  const int64_t rpn = plan.job.ranks_per_node, threads = plan.job.threads_per_rank;
  if (searches_ranks(recipe) && std::find(axes->ranks_per_node.begin(), axes->ranks_per_node.end(),
                                          rpn) == axes->ranks_per_node.end()) {
    return not_listed("ranks per node", std::to_string(rpn), "ranks_per_node");
  }
  const auto& tl = s.threads_per_rank;
  if (!tl.empty() && std::find(tl.begin(), tl.end(), threads) == tl.end()) {
    return not_listed("threads per rank", std::to_string(threads), "threads_per_rank");
  }
  auto all = program_candidates(recipe, machine);
  if (!all) return all.error();
  for (const ProgramCandidate& c : *all) {
    const ProgramValues& v = c.values;
    if (v.batch == (s.batch.empty() ? 0 : batch) && v.bucket_mb == bucket &&
        (!searches_ranks(recipe) || v.ranks_per_node == rpn) &&
        (tl.empty() || v.threads_per_rank == threads)) {
      return c;
    }
  }
  return invalid_input("the plan's " + shape_text(rpn, threads) + " does not fit the " +
                       std::to_string(cores_of(machine)) + " cores a node gives the job");
}

std::vector<db::JobShape> program_key_shapes(const std::vector<ProgramCandidate>& candidates,
                                             int nodes) {
  std::vector<db::JobShape> shapes;
  for (const ProgramCandidate& c : candidates) {
    const db::JobShape k{nodes, c.values.ranks_per_node};
    if (std::find(shapes.begin(), shapes.end(), k) == shapes.end()) shapes.push_back(k);
  }
  return shapes;
}

std::vector<db::RecipeTrial> program_trial_rows(const ProgramTuneOutcome& outcome,
                                                const db::Key& key,
                                                const db::Provenance& provenance) {
  std::vector<db::RecipeTrial> rows;
  for (const ProgramTrialRow& t : outcome.trials) {
    if (t.candidate >= outcome.candidates.size()) continue;
    const ProgramCandidate& c = outcome.candidates[t.candidate];
    // The training fields as program_plan() writes them for this candidate.
    const int nodes = std::max(1, c.values.ranks / std::max(1, c.values.ranks_per_node));
    const recipes::TrainingPlan tp = program_plan({}, c, nodes, {}, {}).training;
    db::RecipeTrial r;
    r.key = key;
    r.round = t.round;
    r.candidate = static_cast<int64_t>(t.candidate);
    r.label = db::clean_text(c.label);
    r.per_rank_batch = tp.per_rank_batch;
    r.global_batch = tp.global_batch;
    r.scaling = std::string(recipes::scaling_name(tp.scaling));
    r.bucket_bytes = tp.bucket_bytes;
    r.overlap = tp.overlap;
    r.lr_scale = tp.lr_scale;
    r.steps = t.steps;
    r.samples_per_s = t.samples_per_s;
    r.step_s = t.samples_per_s > 0 ? static_cast<double>(tp.global_batch) / t.samples_per_s : 0;
    r.failed = t.failed;
    r.reason = db::clean_text(t.reason);
    r.provenance = provenance;
    if (Status ok = db::validate_trial(r); !ok.ok()) {
      DLTUNE_LOG(kWarn, "tuner") << "not storing trial '" << r.label << "' (round " << r.round
                                 << "): " << ok.error().message();
      continue;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace dltune::tuner
