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
//
//   dltune-bench-tuner [--dltune PATH] [-n RANKS] [--max-bytes B] [--budget S]
// Last line: summary: coll_worst_vs_oracle=F coll_cost_fraction=F recipe_vs_grid=na
//            recipe_cost_fraction=na cache_hit_ms=T
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "common/paths.h"
#include "tuner/db/lookup.h"
#include "tuner/db/store.h"

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
};

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

int bench(const Args& a) {
  char tmpl[] = "/tmp/dltune-bench-tuner-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string db = std::string(tmpl) + "/user.db";
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
  std::printf("(figures are provisional: the machine is shared with other builds)\n");
  std::printf(
      "summary: coll_worst_vs_oracle=%.3f coll_cost_fraction=%.3f recipe_vs_grid=na "
      "recipe_cost_fraction=na cache_hit_ms=%.3f\n",
      worst, frac, hit_ms);
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
