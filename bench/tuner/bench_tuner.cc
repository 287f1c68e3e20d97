// bench/tuner: the collective tuner against its reference, and the cost of a cache hit.
//
// 1. Collective plan quality: `dltune tune --collectives --verify` runs the model-based search
//    and then exhaustive search (the oracle) in the same launch; per size it reports the
//    chosen candidate's time against the oracle's, both from the exhaustive comparison at that
//    size (interleaved rounds, paired ratio). Goals: within 5 % at every size, at <= 30 % of
//    exhaustive search's measurement time.
// 2. Cache hit: tuner::db::lookup_plan() of the stored plan on a warm database (opening it and
//    the query, as a launch does), median of many; goal <= 20 ms. The whole cached
//    `dltune tune --collectives` process is timed too, for context.
// 3. Recipe plan quality: `dltune tune RECIPE --retune` (successive halving within the budget)
//    and then `dltune tune RECIPE --grid` (every candidate measured alike, the reference) on the
//    same database (so both use the collective plan from 1.). recipe_vs_grid = the samples/s
//    of the configuration halving chose over the grid's best, the two measured again head to
//    head in one launch (interleaved, 3x the grid's trial length): the grid's best is the
//    maximum of 16 noisy figures, so their ratio in the grid's own table (printed too) is
//    biased low by the winner's curse. 1.0 when halving chose the grid's best.
//    recipe_cost_fraction = the wall time of `dltune tune RECIPE` (halving) over the wall time of
//    `dltune tune RECIPE --grid`, both whole commands as a user waits for them, measured in
//    this run: halving runs before the grid and again after it, and its two times are
//    averaged, so that a load that drifts during the run weighs on both sides alike. The
//    figure this benchmark used to report is printed beside it: both searches' steps costed
//    with the grid's step time per candidate plus each launch's set-up time (a model, not a
//    measurement). Goals: >= 0.95 at <= 0.40.
//
//   dltune-bench-tuner [--dltune PATH] [-n RANKS] [--max-bytes B] [--budget S]
//                      [--recipe NAME] [--recipe-budget S] [--parts coll,recipe]
// 4. Regret: the estimate each plan records (collectives: from cost models fitted through the
//    sweep; training: from the paired intervals of the trials) beside the regret measured here
//    against the reference (collectives: the chosen sizes' time over the oracle's, summed over
//    the sizes, minus 1; training: 1 / recipe_vs_grid - 1).
// Last line: summary: coll_worst_vs_oracle=F coll_cost_fraction=F recipe_vs_grid=F
//            recipe_cost_fraction=F cache_hit_ms=T coll_regret_est=F coll_regret=F
//            recipe_regret_est=F recipe_regret=F  (na for a part not run or not known)
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "common/halving_json.h"
#include "common/paths.h"
#include "tuner/db/lookup.h"
#include "tuner/db/store.h"

#include "dltune/config.h"

namespace {

using namespace dltune;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Args {
  std::string dltune;
  std::string ranks = "2";
  std::string max_bytes = "256MiB";
  std::string budget = "600";
  // The quickstart with `batch: auto` (a recipe that names its batch keeps it).
  std::string recipe = DLTUNE_SOURCE_DIR "/bench/tuner/lenet-auto.yaml";
  std::string recipe_budget = "30";
  std::string parts = "coll,recipe";
  std::string work_dir;  // the run's temporary directory (set by bench())
};

std::string fmt3(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

struct Figures {
  std::string coll_worst = "na", coll_frac = "na", recipe_vs_grid = "na", recipe_frac = "na",
              hit_ms = "na";
  // Regret: what the plan records it estimated (from the fitted models / the paired
  // intervals) beside what was measured against the exhaustive reference in this run.
  std::string coll_regret_est = "na", coll_regret = "na", recipe_regret_est = "na",
              recipe_regret = "na";
};

// A plan's recorded estimate ("na" when it has none).
std::string recorded(const nlohmann::json& plan, const char* key) {
  if (!plan.is_object() || !plan.contains("provenance")) return "na";
  const auto& p = plan["provenance"];
  return p.contains(key) && p[key].is_number() ? fmt3(p[key].get<double>()) : "na";
}

std::string self_dir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string s(buf, static_cast<size_t>(n));
  return s.substr(0, s.rfind('/'));
}

// Runs a shell command; returns its exit code and stdout.
int run(const std::string& cmd, std::string* out) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// The tuner's plan against the grid's best, measured again in one launch of the trial
// program: both interleaved in 2-step chunks, kHeadToHeadSteps timed steps each (3x the grid's
// trial). `chosen` is a candidate made of the plan's training (what halving decided, with the
// learning rate the tuner settled on, which may differ from its candidate's); `grid` is
// `dltune tune --grid --json`'s outcome. Returns the plan's samples/s over the best's (0 when
// the plan fails to train, which is what a user would get), or nullopt after printing why.
constexpr int kHeadToHeadSteps = 192;

std::optional<double> head_to_head(const Args& a, const nlohmann::json& grid,
                                   const nlohmann::json& chosen, const std::string& best) {
  nlohmann::json list = nlohmann::json::array({chosen});
  for (const auto& c : grid["candidates"]) {
    if (c["label"] == best) list.push_back(c);
  }
  if (list.size() != 2) {
    std::fprintf(stderr, "bench/tuner: the grid's outcome lacks '%s'\n", best.c_str());
    return std::nullopt;
  }
  const std::string dir = a.work_dir + "/head-to-head";
  // The schedule in the trial program's one form (common/halving_json.h): every key, so that a
  // new one cannot go missing here again (a hand-written subset lacked 'eta' once).
  halving::Schedule schedule;
  schedule.halving.grid = true;
  schedule.halving.min_steps = 4;
  schedule.halving.max_steps = kHeadToHeadSteps;
  schedule.halving.budget_s = 1e5;
  const nlohmann::json file = {{"version", 1},
                               {"recipe", a.recipe},
                               {"base", grid["plan"]},
                               {"candidates", list},
                               {"schedule", halving::schedule_to_json(schedule)}};
  if (!paths::make_dirs(dir).ok() ||
      !paths::write_file_atomic(dir + "/candidates.json", file.dump(1)).ok()) {
    std::fprintf(stderr, "bench/tuner: cannot write %s/candidates.json\n", dir.c_str());
    return std::nullopt;
  }
  const std::string worker = a.dltune.substr(0, a.dltune.rfind('/') + 1) + "dltune-worker";
  const std::string cmd = "mpirun --allow-run-as-root --oversubscribe --mca pml ob1 -np " +
                          a.ranks + " " + worker + " trial --grid --recipe " + a.recipe +
                          " --candidates " + dir + "/candidates.json --out " + dir + "/trials.json";
  std::printf("head to head: %s\n", cmd.c_str());
  std::fflush(stdout);
  std::string ignored;
  auto text = run(cmd, &ignored) == 0 ? paths::read_file(dir + "/trials.json")
                                      : Result<std::string>(internal_error("the ranks failed"));
  const auto t = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!t.is_object() || !t.contains("trials")) {
    std::fprintf(stderr, "bench/tuner: the head-to-head trial failed\n");
    return std::nullopt;
  }
  double sps[2] = {0, 0};
  bool failed[2] = {true, true};
  std::string why[2];
  for (const auto& r : t["trials"]) {
    const size_t k = r["candidate"].get<size_t>();
    sps[k] = r["samples_per_s"];
    failed[k] = r["failed"].get<bool>();
    why[k] = r["reason"].get<std::string>();
  }
  if (failed[1]) {
    std::fprintf(stderr, "bench/tuner: the grid's best failed head to head: %s\n", why[1].c_str());
    return std::nullopt;
  }
  if (failed[0]) {
    std::printf("head to head: the tuner's plan (%s) failed to train: %s\n",
                chosen["label"].get<std::string>().c_str(), why[0].c_str());
    return 0.0;
  }
  std::printf("head to head, %d steps each: %s %.1f samples/s, %s %.1f samples/s\n",
              kHeadToHeadSteps, chosen["label"].get<std::string>().c_str(), sps[0], best.c_str(),
              sps[1]);
  return sps[1] > 0 ? sps[0] / sps[1] : 0;
}

// Part 3: halving against the full grid on `db`. Returns 0 and fills `f`, else 1.
int bench_recipe(const Args& a, const std::string& db, Figures* f) {
  const std::string base =
      a.dltune + " tune " + a.recipe + " -n " + a.ranks + " --db " + db + " --json";
  std::printf("\n== recipe plan quality: %s --retune --budget %s, then --grid\n", base.c_str(),
              a.recipe_budget.c_str());
  std::fflush(stdout);
  std::string htext, gtext, h2text;
  auto t0 = Clock::now();
  if (run(base + " --retune --budget " + a.recipe_budget, &htext) != 0) {
    std::fprintf(stderr, "bench/tuner: dltune tune %s failed\n", a.recipe.c_str());
    return 1;
  }
  const double halving_wall_s = ms_since(t0) / 1e3;
  t0 = Clock::now();
  if (run(base + " --grid --budget 100000", &gtext) != 0) {
    std::fprintf(stderr, "bench/tuner: dltune tune %s --grid failed\n", a.recipe.c_str());
    return 1;
  }
  const double grid_wall_s = ms_since(t0) / 1e3;
  t0 = Clock::now();
  if (run(base + " --retune --budget " + a.recipe_budget, &h2text) != 0) {
    std::fprintf(stderr, "bench/tuner: dltune tune %s (again) failed\n", a.recipe.c_str());
    return 1;
  }
  const double halving2_wall_s = ms_since(t0) / 1e3;
  const auto h = nlohmann::json::parse(htext, nullptr, false);
  const auto g = nlohmann::json::parse(gtext, nullptr, false);
  if (h.is_discarded() || g.is_discarded() || !h.contains("outcome") || !g.contains("outcome")) {
    std::fprintf(stderr, "bench/tuner: unexpected output from dltune tune %s\n", a.recipe.c_str());
    return 1;
  }
  const auto& ho = h["outcome"];
  const auto& go = g["outcome"];
  const std::string chosen = ho["winner_label"].get<std::string>();
  double best = 0, mine = 0;
  std::string best_label;
  std::printf("%-44s %12s %8s\n", "candidate (grid)", "samples/s", "steps");
  for (const auto& t : go["trials"]["trials"]) {
    const double sps = t["samples_per_s"].get<double>();
    const std::string label = t["label"].get<std::string>();
    const std::string why =
        t["failed"].get<bool>() ? "  failed: " + t.value("reason", std::string("(no reason)")) : "";
    std::printf("%-44s %12.1f %8d%s%s\n", label.c_str(), sps, t["steps"].get<int>(),
                label == chosen ? "  <- halving's choice" : "", why.c_str());
    if (t["failed"].get<bool>()) continue;
    if (sps > best) {
      best = sps;
      best_label = label;
    }
    if (label == chosen) mine = sps;
  }
  const double vs_grid_table = best > 0 ? mine / best : 0;
  // The grid's best is the maximum of 16 noisy figures, so the table ratio is biased low
  // (the winner's curse): measure the two head to head, interleaved, with longer trials.
  // What halving decided is the plan's training, which can differ from its candidate's (a
  // scaled-up lr the trials did not watch past its warm-up stays unscaled): that is measured.
  const nlohmann::json planned = {{"label", chosen + " (the plan)"},
                                  {"training", ho["plan"]["training"]}};
  bool same = chosen == best_label;
  for (const auto& c : go["candidates"]) {
    if (same && c["label"] == chosen) same = c["training"] == planned["training"];
  }
  double vs_grid = same ? 1.0 : vs_grid_table;
  if (!same && best > 0) {
    auto h2h = head_to_head(a, go, planned, best_label);
    if (!h2h) return 1;
    vs_grid = *h2h;
  }
  // The old, modelled figure: the steps of both (those of failed trials included) costed with
  // the grid's step time of each candidate (a trial's own where the grid ran none of it), plus
  // each launch's own set-up time.
  std::map<std::string, double> step_s;
  double grid_cost = go["trials"]["setup_s"].get<double>();
  for (const auto& t : go["trials"]["trials"]) {
    step_s[t["label"].get<std::string>()] = t["step_s"].get<double>();
    grid_cost += t["steps"].get<int>() * t["step_s"].get<double>();
  }
  double halving_cost = ho["trials"]["setup_s"].get<double>();
  for (const auto& t : ho["trials"]["trials"]) {
    const double grid_step = step_s[t["label"].get<std::string>()];
    halving_cost += t["steps"].get<int>() * (grid_step > 0 ? grid_step : t["step_s"].get<double>());
  }
  const double modelled = grid_cost > 0 ? halving_cost / grid_cost : 0;
  const double hs = ho["tuning_s"].get<double>(), gs = go["tuning_s"].get<double>();
  const auto h2 = nlohmann::json::parse(h2text, nullptr, false);
  const double hs2 =
      h2.is_object() && h2.contains("outcome") ? h2["outcome"]["tuning_s"].get<double>() : hs;
  const double measured =
      grid_wall_s > 0 ? (halving_wall_s + halving2_wall_s) / 2 / grid_wall_s : 0;
  std::printf(
      "halving chose %s (%d rounds); grid best %s; chosen/best in the grid table %.3f, head to "
      "head %.3f (goal >= 0.95)\n",
      chosen.c_str(), ho["rounds"].get<int>(), best_label.c_str(), vs_grid_table, vs_grid);
  std::printf(
      "cost: `dltune tune` wall %.1f s before the grid and %.1f s after it, the grid %.1f s: "
      "measured fraction %.3f (goal <= 0.40); the ranks' own tuning time %.1f / %.1f s vs %.1f "
      "s: %.3f; the old modelled figure (steps x the grid's step times + set-up) %.1f s vs %.1f "
      "s: %.3f\n",
      halving_wall_s, halving2_wall_s, grid_wall_s, measured, hs, hs2, gs,
      gs > 0 ? (hs + hs2) / 2 / gs : 0, halving_cost, grid_cost, modelled);
  f->recipe_vs_grid = fmt3(vs_grid);
  f->recipe_frac = fmt3(measured);
  f->recipe_regret_est = recorded(ho["plan"], "regret");
  f->recipe_regret = vs_grid > 0 ? fmt3(std::max(0.0, 1 / vs_grid - 1)) : "na";
  std::printf("regret against the grid: estimated %s (the plan's), measured %s\n",
              f->recipe_regret_est.c_str(), f->recipe_regret.c_str());
  return 0;
}

int bench(Args a) {
  char tmpl[] = "/tmp/dltune-bench-tuner-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  a.work_dir = tmpl;
  const std::string db = std::string(tmpl) + "/user.db";
  Figures f;
  if (a.parts.find("coll") == std::string::npos) {
    if (a.parts.find("recipe") != std::string::npos && bench_recipe(a, db, &f) != 0) return 1;
    std::printf(
        "summary: coll_worst_vs_oracle=%s coll_cost_fraction=%s recipe_vs_grid=%s "
        "recipe_cost_fraction=%s cache_hit_ms=%s coll_regret_est=%s coll_regret=%s "
        "recipe_regret_est=%s recipe_regret=%s\n",
        f.coll_worst.c_str(), f.coll_frac.c_str(), f.recipe_vs_grid.c_str(), f.recipe_frac.c_str(),
        f.hit_ms.c_str(), f.coll_regret_est.c_str(), f.coll_regret.c_str(),
        f.recipe_regret_est.c_str(), f.recipe_regret.c_str());
    const std::string rm = std::string("rm -rf ") + tmpl;
    return std::system(rm.c_str()) == 0 ? 0 : 1;
  }
  const std::string base = a.dltune + " tune --collectives -n " + a.ranks + " --max-bytes " +
                           a.max_bytes + " --db " + db;
  std::printf("== collective plan quality: %s --verify --budget %s\n", base.c_str(),
              a.budget.c_str());
  std::fflush(stdout);
  std::string text;
  auto t0 = Clock::now();
  if (run(base + " --verify --json --budget " + a.budget, &text) != 0) {
    std::fprintf(stderr, "bench/tuner: dltune tune failed\n");
    return 1;
  }
  const double tune_wall_s = ms_since(t0) / 1e3;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.contains("outcome") || j["outcome"]["verify"].is_null()) {
    std::fprintf(stderr, "bench/tuner: unexpected output from dltune tune\n");
    return 1;
  }
  const auto& v = j["outcome"]["verify"];
  std::printf("%10s  %-14s %11s  %-14s %11s  %9s\n", "bytes", "chosen", "chosen_us", "oracle",
              "oracle_us", "vs_oracle");
  for (const auto& r : v["sizes"]) {
    std::printf("%10llu  %-14s %11.2f  %-14s %11.2f  %9.3f\n",
                static_cast<unsigned long long>(r["bytes"].get<uint64_t>()),
                r["chosen"].get<std::string>().c_str(), r["chosen_us"].get<double>(),
                r["oracle"].get<std::string>().c_str(), r["oracle_us"].get<double>(),
                r["vs_oracle"].get<double>());
  }
  const double worst = v["worst_vs_oracle"].get<double>();
  const double frac = v["cost_fraction"].get<double>();
  double chosen_us = 0, oracle_us = 0;
  for (const auto& r : v["sizes"]) {
    chosen_us += r["chosen_us"].get<double>();
    oracle_us += r["oracle_us"].get<double>();
  }
  f.coll_regret =
      chosen_us > 0 && oracle_us > 0 ? fmt3(std::max(0.0, chosen_us / oracle_us - 1)) : "na";
  f.coll_regret_est = recorded(j.value("plan", nlohmann::json()), "collective_regret");
  std::printf(
      "regret against the oracle over the sizes: estimated %s (the plan's, from its "
      "fitted models), measured %s\n",
      f.coll_regret_est.c_str(), f.coll_regret.c_str());
  std::printf(
      "model-based search %.2f s, exhaustive %.2f s (cost fraction %.3f, goal <= 0.30); "
      "worst vs oracle %.3f (goal >= 0.95); whole command %.1f s\n",
      j["outcome"]["tuning_s"].get<double>(), v["exhaustive_s"].get<double>(), frac, worst,
      tune_wall_s);

  // Cache hit through lookup_plan on the database just written (warm: page cache, WAL).
  std::printf("\n== cache hit: tuner::db::lookup_plan on %s\n", db.c_str());
  auto store = tuner::db::TuningDb::open(db, tuner::db::OpenMode::kReadOnly);
  if (!store) return 1;
  auto plans = store->plans();
  if (!plans || plans->empty()) return 1;
  const tuner::db::Key key = plans->front().key;
  tuner::db::Layers layers;
  layers.user_db = db;
  std::vector<double> ms;
  for (int i = 0; i < 101; ++i) {
    t0 = Clock::now();
    auto hit = tuner::db::lookup_plan(layers, key);
    const double t = ms_since(t0);
    if (!hit || hit->kind != tuner::db::HitKind::kExact) {
      std::fprintf(stderr, "bench/tuner: the stored plan was not found\n");
      return 1;
    }
    if (i > 0) ms.push_back(t);
  }
  const double hit_ms = median(ms);
  std::vector<double> cli_ms;
  for (int i = 0; i < 5; ++i) {
    std::string ignored;
    t0 = Clock::now();
    if (run(base, &ignored) != 0) return 1;
    cli_ms.push_back(ms_since(t0));
  }
  std::printf(
      "lookup_plan median %.3f ms over 100 (goal <= 20 ms); whole cached `dltune tune "
      "--collectives` process (topology discovery included) median %.1f ms\n",
      hit_ms, median(cli_ms));
  f.coll_worst = fmt3(worst);
  f.coll_frac = fmt3(frac);
  f.hit_ms = fmt3(hit_ms);
  if (a.parts.find("recipe") != std::string::npos && bench_recipe(a, db, &f) != 0) return 1;
  // The machine's load as the figures were taken (this process's own ranks included): timings
  // on a loaded machine are noisy, and the reader should know how loaded it was.
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3) {
    std::printf("load average: %.2f %.2f %.2f on %ld cores (figures taken under this load)\n",
                load[0], load[1], load[2], sysconf(_SC_NPROCESSORS_ONLN));
  }
  std::printf(
      "summary: coll_worst_vs_oracle=%s coll_cost_fraction=%s recipe_vs_grid=%s "
      "recipe_cost_fraction=%s cache_hit_ms=%s coll_regret_est=%s coll_regret=%s "
      "recipe_regret_est=%s recipe_regret=%s\n",
      f.coll_worst.c_str(), f.coll_frac.c_str(), f.recipe_vs_grid.c_str(), f.recipe_frac.c_str(),
      f.hit_ms.c_str(), f.coll_regret_est.c_str(), f.coll_regret.c_str(),
      f.recipe_regret_est.c_str(), f.recipe_regret.c_str());
  const std::string rm = std::string("rm -rf ") + tmpl;
  return std::system(rm.c_str()) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  a.dltune = self_dir() + "/dltune";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], val = argv[i + 1];
    if (k == "--dltune") {
      a.dltune = val;
    } else if (k == "-n") {
      a.ranks = val;
    } else if (k == "--max-bytes") {
      a.max_bytes = val;
    } else if (k == "--budget") {
      a.budget = val;
    } else if (k == "--recipe") {
      a.recipe = val;
    } else if (k == "--recipe-budget") {
      a.recipe_budget = val;
    } else if (k == "--parts") {
      a.parts = val;
    } else {
      std::fprintf(stderr, "bench/tuner: unknown argument '%s'\n", k.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "bench/tuner: every option takes a value\n");
    return 2;
  }
  return bench(a);
}
