// What `dltune launch` shows of its ranks' events (launch_progress.h).
#include "launcher/flow/launch_progress.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "launcher/cli/launch_dry_run.h"

namespace dltune::launcher {
namespace {

using json = nlohmann::json;

TEST(LaunchProgress, EachRankEventBecomesAStatusLine) {
  EXPECT_EQ(status_text({{"event", "sweep"},
                         {"index", 2},
                         {"count", 6},
                         {"bytes", 1 << 20},
                         {"algos", {"ring", "rd"}}}),
            "size 3 of 6 (1 MiB): ring, rd");
  // The counts come before the (long) label, so that a narrow terminal keeps them.
  EXPECT_EQ(status_text({{"event", "trial_chunk"},
                         {"round", 0},
                         {"rounds", 3},
                         {"position", 5},
                         {"field", 12},
                         {"steps_done", 2},
                         {"steps", 4},
                         {"label", "b64 weak bucket=1 MiB overlap"},
                         {"best", "b32 weak"},
                         {"best_sps", 4100.4}}),
            "round 1 of 3, candidate 5 of 12, step 2 of 4: b64 weak bucket=1 MiB overlap; leading "
            "b32 weak at 4,100 samples/s");
  EXPECT_EQ(status_text({{"event", "trial_compare"},
                         {"a", "x"},
                         {"b", "y"},
                         {"ratio", 1.12},
                         {"lo", 1.05},
                         {"hi", 1.19},
                         {"rounds", 12}}),
            "finalists x vs y: 1.12x (95 % interval 1.05-1.19, 12 rounds)");
  EXPECT_EQ(status_text({{"event", "trial_compare"},
                         {"a", "x"},
                         {"b", "y"},
                         {"ratio", 1.3},
                         {"hi", nullptr},
                         {"rounds", 2}}),
            "finalists x vs y: 1.30x (2 rounds)");
  EXPECT_EQ(status_text({{"event", "status"}, {"text", "building alexnet"}}), "building alexnet");
  EXPECT_EQ(status_text({{"event", "trial_round"}, {"round", 0}}), "");
  EXPECT_EQ(status_text(json::object()), "");
}

TEST(LaunchProgress, JsonStatusCarriesTheRankEventsFields) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  {
    Progress p(Progress::Mode::kJson, f, /*heartbeat=*/false);
    p.phase("tuning collectives");
    show_rank_event(p, {{"event", "sweep"}, {"index", 0}, {"count", 2}, {"bytes", 65536}});
    show_rank_event(p, {{"event", "trial_round"}});  // nothing on screen: no event
  }
  std::fclose(f);
  const std::string out(buf, len);
  std::free(buf);
  const size_t nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos) << out;
  const json e = json::parse(out.substr(nl + 1, out.find('\n', nl + 1) - nl - 1));
  EXPECT_EQ(e["event"], "status");
  EXPECT_EQ(e["rank_event"], "sweep");
  EXPECT_EQ(e["bytes"], 65536);
  EXPECT_EQ(e["text"], "size 1 of 2 (64 KiB): ");
  EXPECT_EQ(out.find("trial_round"), std::string::npos) << out;
}

// The collective plan in words, as the launch and the dry run print it.
TEST(LaunchProgress, TheAllreducePlanInWords) {
  recipes::Plan plan = recipes::default_plan(1, 2, 64, recipes::Algorithm::kRing);
  EXPECT_EQ(allreduce_in_words(plan), "ring every size");
  auto& ranges = plan.collectives[recipes::Collective::kAllreduce];
  ranges = {{0, 1 << 20, recipes::Algorithm::kRabenseifner, 0},
            {1 << 20, recipes::kPlanMaxBytes, recipes::Algorithm::kShm, 0}};
  EXPECT_EQ(allreduce_in_words(plan), "rabenseifner below 1 MiB, shm from 1 MiB");
  plan.collectives.clear();
  EXPECT_EQ(allreduce_in_words(plan), "");
}

}  // namespace
}  // namespace dltune::launcher
