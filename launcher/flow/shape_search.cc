#include "launcher/flow/shape_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/number_text.h"
#include "launcher/backend/rank_program.h"
#include "launcher/flow/baseline_reuse.h"
#include "launcher/flow/text_format.h"
#include "recipes/plan_fit.h"
#include "tuner/db/admin.h"

namespace dltune::launcher {

namespace {

std::string percent(double rel) { return text::fixed(100 * rel, 1); }

}  // namespace

std::string describe(const RanksThreads& s) {
  return std::to_string(s.ranks_per_node) + (s.ranks_per_node == 1 ? " rank x " : " ranks x ") +
         std::to_string(s.threads) + (s.threads == 1 ? " thread" : " threads");
}

std::vector<RanksThreads> shape_candidates(int cores, int numa, size_t most) {
  cores = std::max(1, cores);
  numa = std::max(1, numa);
  std::vector<int> counts;
  for (int r = numa; r <= cores; r += numa)
    if (cores % r == 0) counts.push_back(r);
  if (counts.empty())
    for (int r = 1; r <= cores; ++r)
      if (cores % r == 0) counts.push_back(r);
  std::vector<int> picked = counts;
  if (most >= 2 && counts.size() > most) {
    // Geometric targets from the first count to the last; each takes the count nearest it in
    // log terms that no earlier target took.
    picked.clear();
    const double lo = std::log(counts.front()), hi = std::log(counts.back());
    for (size_t i = 0; i < most; ++i) {
      const double target = lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(most - 1);
      int best = -1;
      for (int r : counts) {
        if (std::find(picked.begin(), picked.end(), r) != picked.end()) continue;
        if (best < 0 || std::abs(std::log(r) - target) < std::abs(std::log(best) - target))
          best = r;
      }
      if (best > 0) picked.push_back(best);
    }
    std::sort(picked.begin(), picked.end());
  }
  std::vector<RanksThreads> out;
  for (int r : picked) out.push_back({r, cores / r});
  return out;
}

Job job_with_shape(const Job& job, const RanksThreads& s) {
  Job j = job;
  j.ranks = s.ranks_per_node * job.shape.nodes;
  j.shape.ranks_per_node = s.ranks_per_node;
  j.shape.threads_per_rank = s.threads;
  j.recipe.launch.ranks = j.ranks;
  j.recipe.launch.ranks_per_node = s.ranks_per_node;
  return j;
}

int64_t shape_search_batch(const Job& job) {
  if (job.recipe.training.per_rank_batch > 0) return 0;
  return recipes::recipe_default_plan(job.recipe, job.shape).training.global_batch;
}

recipes::Plan shape_plan(const Job& job, int64_t global_batch) {
  recipes::Plan p = recipes::recipe_default_plan(job.recipe, job.shape);
  if (global_batch > 0) {
    p.training.scaling = recipes::Scaling::kStrong;
    p.training.global_batch = global_batch;
    p.training.per_rank_batch = std::max<int64_t>(1, global_batch / job.ranks);
  }
  (void)recipes::apply_fixed_settings(job.recipe, job.ranks, &p);
  p.provenance.reason = "the recipe's own settings, measured for the ranks x threads search";
  return p;
}

ShapeChoice decide_shape(const std::vector<ShapeMeasurement>& shapes, const RanksThreads& rule) {
  ShapeChoice c;
  c.shapes = shapes;
  c.chosen = rule;
  const ShapeMeasurement* best = nullptr;
  for (const ShapeMeasurement& m : shapes)
    if (m.sps > 0 && (best == nullptr || m.sps > best->sps)) best = &m;
  if (best == nullptr) return c;
  const ShapeMeasurement* pick = best;
  for (const ShapeMeasurement& m : shapes) {
    if (m.sps >= (1 - kShapeTie) * best->sps && m.shape.ranks_per_node < pick->shape.ranks_per_node)
      pick = &m;
  }
  c.decided = true;
  c.chosen = pick->shape;
  bool from_db = false, measured = false;
  std::string figures;
  for (const ShapeMeasurement& m : shapes) {
    from_db = from_db || m.source == "database";
    measured = measured || m.source == "measured";
    if (!figures.empty()) figures += ", ";
    figures += describe(m.shape) + " ";
    if (m.sps > 0) {
      figures += strings::thousands(m.sps) + " samples/s +-" + percent(m.rel_ci) + " %";
      if (&m != pick) figures += " (" + text::fixed(m.sps / pick->sps, 2) + "x)";
    } else {
      figures += "not measured (" + m.error + ")";
    }
  }
  const std::string where = measured && from_db ? "measured on this node (some earlier, stored)"
                            : from_db ? "measured on this node by an earlier launch (--retune "
                                        "measures again)"
                                      : "measured on this node";
  c.why = describe(pick->shape) + ", the fastest" +
          (pick != best ? " within " + percent(kShapeTie) + " % with fewer ranks" : "") + ", " +
          where + ": " + figures;
  return c;
}

nlohmann::json shape_choice_json(const ShapeChoice& c) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const ShapeMeasurement& m : c.shapes) {
    nlohmann::json j = {{"ranks_per_node", m.shape.ranks_per_node},
                        {"threads", m.shape.threads},
                        {"samples_per_s", m.sps > 0 ? nlohmann::json(m.sps) : nlohmann::json()},
                        {"rel_ci", m.sps > 0 ? nlohmann::json(m.rel_ci) : nlohmann::json()},
                        {"source", m.source}};
    if (!m.error.empty()) j["error"] = m.error;
    if (m.measured_at > 0) j["measured_at"] = tuner::db::utc_time(m.measured_at);
    shapes.push_back(std::move(j));
  }
  return {{"decided", c.decided},        {"ranks_per_node", c.chosen.ranks_per_node},
          {"threads", c.chosen.threads}, {"why", c.why},
          {"seconds", c.seconds},        {"candidates", shapes}};
}

namespace {

// One candidate as the search carries it: its figure, and what it runs, made once.
struct Candidate {
  ShapeMeasurement m;
  Job job;               // job_with_shape()
  recipes::Plan plan;    // shape_plan()
  BaselineIdentity id;   // where its figure is stored
  Baseline best;         // its run that counts (measure_round_robin)
  double step_s = 0;     // its step time once a run has measured it
  bool missing = false;  // runnable, and not taken from the database
};

// Phase 1: every candidate's job and plan, those that cannot run left out with the reason, and
// (unless s.remeasure) the database's figures. `db_note` says when the database was unreadable.
std::vector<Candidate> gather(const ShapeSearch& s, const std::vector<RanksThreads>& shapes,
                              int64_t batch, std::string* db_note) {
  std::vector<Candidate> out;
  for (const RanksThreads& shape : shapes) {
    Candidate c;
    c.m.shape = shape;
    c.job = job_with_shape(*s.job, shape);
    if (const auto problems = recipes::validate_recipe(c.job.recipe); !problems.empty()) {
      c.m.error = problems.front().to_string();
    } else if (batch > 0 && batch < c.job.ranks) {
      c.m.error = "the global batch " + std::to_string(batch) + " has fewer samples than ranks";
    } else {
      c.plan = shape_plan(c.job, batch);
      c.id = measured_plan_identity(*s.topo, c.job, c.plan);
      c.missing = true;
    }
    if (c.missing && !s.remeasure) {
      auto stored = stored_baseline(s.db_path, c.id, 1.0);
      if (!stored) {
        *db_note = "the database's measurements were not read (" + stored.error().message() + ")";
      } else if (stored->has_value()) {
        c.m.sps = (*stored)->sps;
        c.m.rel_ci = (*stored)->rel_ci;
        c.m.source = "database";
        c.m.measured_at = (*stored)->measured_at;
        c.missing = false;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

// Keeps `b` as `c`'s run that counts when it is the fastest whose interval is known (only such
// a figure is stored), or faster where neither interval is; the seconds add up either way.
void keep_if_better(Candidate& c, const Baseline& b) {
  const bool known = std::isfinite(b.rel_ci), best_known = std::isfinite(c.best.rel_ci);
  const double seconds = c.best.seconds + b.seconds;
  if (c.best.sps <= 0 || (known && !best_known) || (known == best_known && b.sps > c.best.sps))
    c.best = b;
  c.best.seconds = seconds;
  c.m.sps = c.best.sps;
  c.m.rel_ci = c.best.rel_ci;
  c.m.source = "measured";
}

// Phase 2: the missing candidates measured round-robin, kShapeRounds times, each one's best run
// kept: on a shared machine a slow phase slows whichever run it falls on (one round gave
// lenet's 2 x 1 5,625 samples/s, the next 7,821), and interference only ever slows. A run's
// step time sizes the candidate's next run (the first, not knowing it, may be too short for an
// interval: fewer than 21 steps). Returns the run's message when an interrupt stopped it.
std::string measure_round_robin(const ShapeSearch& s, std::vector<Candidate>& cands) {
  const auto missing =
      std::count_if(cands.begin(), cands.end(), [](const Candidate& c) { return c.missing; });
  const double each = std::max(kShapeMinS, s.budget_s / static_cast<double>(missing)) /
                      static_cast<double>(kShapeRounds);
  for (int round = 0; round < kShapeRounds; ++round) {
    for (Candidate& c : cands) {
      if (!c.missing || !c.m.error.empty()) continue;  // stored, or failed in an earlier round
      const RanksThreads& shape = c.m.shape;
      const std::string what = "measuring " + describe(shape);
      if (s.progress != nullptr)
        s.progress->phase(what + " (ranks x threads per node, round " + std::to_string(round + 1) +
                          " of " + std::to_string(kShapeRounds) + ")");
      auto b = measure_throughput(c.job, s.worker, c.plan, what,
                                  s.work_dir + "/shape-" + std::to_string(shape.ranks_per_node) +
                                      "x" + std::to_string(shape.threads) + "-",
                                  c.step_s, each, s.progress);
      if (s.progress != nullptr) s.progress->finish();
      if (!b) {
        if (cli::forwarded_signal() != 0) return b.error().message();
        c.m = ShapeMeasurement{shape, 0, 0, "", 0, b.error().message()};
        continue;
      }
      c.step_s = static_cast<double>(c.plan.training.global_batch) / b->sps;
      keep_if_better(c, *b);
    }
  }
  return "";
}

}  // namespace

ShapeChoice search_shape(const ShapeSearch& s) {
  const RanksThreads rule{s.job->shape.ranks_per_node, s.job->shape.threads_per_rank};
  const auto cores = static_cast<int>(s.topo->cores.size());
  const auto numa = static_cast<int>(s.topo->numa_nodes.size());
  const std::vector<RanksThreads> shapes = shape_candidates(cores, numa);
  ShapeChoice c;
  c.chosen = rule;
  if (shapes.size() < 2) {
    c.why = "the node's " + std::to_string(cores) + " core(s) leave no other shape to measure";
    return c;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string db_note;
  std::vector<Candidate> cands = gather(s, shapes, shape_search_batch(*s.job), &db_note);
  const auto figures = [&cands] {
    std::vector<ShapeMeasurement> out;
    for (const Candidate& k : cands) out.push_back(k.m);
    return out;
  };
  const bool missing =
      std::any_of(cands.begin(), cands.end(), [](const Candidate& k) { return k.missing; });
  if (missing && (!s.measure || !s.elsewhere.empty())) {
    c.shapes = figures();
    for (size_t i = 0; i < cands.size(); ++i)
      if (cands[i].missing) c.shapes[i].error = "not measured yet";
    const auto stored =
        std::count_if(c.shapes.begin(), c.shapes.end(),
                      [](const ShapeMeasurement& m) { return m.source == "database"; });
    c.why =
        "one rank per NUMA domain (the rule): " +
        (s.elsewhere.empty() ? std::string("measuring ranks x threads needs a launch that tunes")
                             : s.elsewhere + ": a launch there measures its shapes") +
        " (the database has " + std::to_string(stored) + " of the " +
        std::to_string(shapes.size()) + " shapes' measurements)";
    return c;
  }
  if (missing) {
    c.interrupted = measure_round_robin(s, cands);
    if (!c.interrupted.empty()) return c;
  }
  // Phase 3: the new figures stored (with a known interval only), then the choice.
  for (const Candidate& k : cands) {
    if (!k.missing || k.m.source != "measured" || s.db_path.empty() ||
        !std::isfinite(k.best.rel_ci))
      continue;
    if (Status st = store_baseline(s.db_path, k.id, k.best); !st.ok())
      db_note = "the measurements were not stored (" + st.error().message() + ")";
  }
  c = decide_shape(figures(), rule);
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!c.decided)
    c.why = "one rank per NUMA domain (the rule): no ranks x threads shape could be measured";
  if (!db_note.empty()) c.why += "; " + db_note;
  return c;
}

}  // namespace dltune::launcher
