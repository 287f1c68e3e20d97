// The Plan: JSON round trip in the agreed shape, validation on load, rule lookup.
#include "recipes/plan.h"

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace dltune::recipes {
namespace {

using nlohmann::json;

// The example of the agreed shape (plan.h), verbatim.
const char* kExample = R"({
  "version": 1,
  "collectives": {
    "allreduce": [ {"min_bytes": 0, "max_bytes": 4096, "algo": "rd", "segment_bytes": 0},
                   {"min_bytes": 4096, "max_bytes": 18446744073709551615, "algo": "ring",
                    "segment_bytes": 1048576} ],
    "broadcast": [ {"min_bytes": 0, "max_bytes": 18446744073709551615, "algo": "tree",
                    "segment_bytes": 0} ] },
  "training": {"per_rank_batch": 64, "global_batch": 128, "scaling": "weak",
               "lr_scale": 2.0, "warmup_steps": 100, "bucket_bytes": 4194304, "overlap": true,
               "precision": "bf16", "kernels": {"conv1": "onednn"}},
  "placement": [ {"local_rank": 0, "cpus": [0], "gpu": -1, "nic": ""},
                 {"local_rank": 1, "cpus": [1], "gpu": -1, "nic": ""} ],
  "job": {"nodes": 1, "ranks_per_node": 2, "threads_per_rank": 4},
  "parallel": {"replicas": 2, "stages": 1, "partition": [], "microbatches": 1,
               "schedule": "1f1b", "recompute": "none", "reason": "", "memory_bytes": 0,
               "predicted_sps": 0.0, "measured_sps": 0.0},
  "provenance": {"source": "tuned", "reason": "rd below 4 KiB, ring above",
                 "predicted_sps": 1500.0, "measured_sps": 1432.5}
})";

TEST(PlanJson, ReadsTheAgreedShape) {
  auto plan = parse_plan(kExample);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const auto& ar = plan->collectives.at(Collective::kAllreduce);
  ASSERT_EQ(ar.size(), 2u);
  EXPECT_EQ(ar[0].algo, Algorithm::kRecursiveDoubling);
  EXPECT_EQ(ar[1].max_bytes, kPlanMaxBytes);
  EXPECT_EQ(ar[1].segment_bytes, 1048576u);
  EXPECT_EQ(plan->training.global_batch, 128);
  EXPECT_EQ(plan->training.scaling, Scaling::kWeak);
  EXPECT_DOUBLE_EQ(plan->training.lr_scale, 2.0);
  EXPECT_TRUE(plan->training.overlap);
  ASSERT_EQ(plan->placement.size(), 2u);
  EXPECT_EQ(plan->placement[1].cpus, std::vector<int>{1});
  EXPECT_EQ(plan->job.ranks_per_node, 2);
  EXPECT_EQ(plan->job.threads_per_rank, 4);
  EXPECT_EQ(plan->training.precision, "bf16");
  EXPECT_EQ(plan->training.kernels.at("conv1"), "onednn");
  EXPECT_EQ(plan->provenance.source, PlanSource::kTuned);
  EXPECT_DOUBLE_EQ(plan->provenance.measured_sps, 1432.5);
}

// A plan written before threads, precision and kernels: one thread, fp32, default kernels.
TEST(PlanJson, ComputeSettingsDefaultForOlderPlans) {
  json j = json::parse(kExample);
  j["job"].erase("threads_per_rank");
  j["training"].erase("precision");
  j["training"].erase("kernels");
  auto plan = parse_plan(j.dump());
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->job.threads_per_rank, 1);
  EXPECT_EQ(plan->training.precision, "fp32");
  EXPECT_TRUE(plan->training.kernels.empty());
}

// The length of the run a plan was tuned for (issue 42): optional, never negative.
TEST(PlanJson, TheRunItWasTunedForIsOptional) {
  json j = json::parse(kExample);
  j["provenance"]["run_steps"] = 300;
  auto plan = parse_plan(j.dump());
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->provenance.run_steps, 300);
  EXPECT_EQ(plan_to_json(*plan)["provenance"]["run_steps"], 300);
  EXPECT_EQ(parse_plan(kExample)->provenance.run_steps, 0);  // older plans: not recorded
  EXPECT_FALSE(plan_to_json(*parse_plan(kExample))["provenance"].contains("run_steps"));
  j["provenance"]["run_steps"] = -3;
  auto bad = parse_plan(j.dump());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("provenance.run_steps: expected a step count >= 0, got -3"),
            std::string::npos)
      << bad.error().message();
}

TEST(PlanJson, RoundTripsExactly) {
  auto plan = parse_plan(kExample);
  ASSERT_TRUE(plan.ok());
  auto again = parse_plan(serialize_plan(*plan));
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(*plan, *again);
  EXPECT_EQ(plan_to_json(*plan), json::parse(kExample));
}

// A plan written before layouts existed is data parallel over every rank; a pipeline layout
// must cover the job and name a first node per stage.
TEST(PlanJson, LayoutsDefaultToDataParallelAndAreChecked) {
  json j = json::parse(kExample);
  j.erase("parallel");
  auto old = plan_from_json(j);
  ASSERT_TRUE(old.ok()) << old.error().message();
  EXPECT_EQ(old->parallel.replicas, 2);
  EXPECT_EQ(old->parallel.stages, 1);
  j = json::parse(kExample);
  j["parallel"]["replicas"] = 1;
  j["parallel"]["stages"] = 2;
  j["parallel"]["partition"] = {"conv1", "layer2.0.conv1"};
  j["parallel"]["microbatches"] = 8;
  j["parallel"]["schedule"] = "async";
  j["training"]["global_batch"] = 64;  // one replica
  auto pipe = plan_from_json(j);
  ASSERT_TRUE(pipe.ok()) << pipe.error().message();
  EXPECT_EQ(pipe->parallel.schedule, PipelineSchedule::kAsync);
  EXPECT_TRUE(pipe->parallel.pipelined());
  EXPECT_EQ(pipe->parallel.offload, Offload::kNone);  // absent: none
  EXPECT_FALSE(plan_to_json(*pipe)["parallel"].contains("offload"));
  json off = j;
  off["parallel"]["offload"] = "optimizer";
  auto offloaded = plan_from_json(off);
  ASSERT_TRUE(offloaded.ok()) << offloaded.error().message();
  EXPECT_EQ(offloaded->parallel.offload, Offload::kOptimizer);
  EXPECT_EQ(plan_to_json(*offloaded)["parallel"]["offload"], "optimizer");
  EXPECT_FALSE(same_layout(offloaded->parallel, pipe->parallel));
  struct Bad {
    const char* key;
    json value;
    const char* message;
  };
  for (const Bad& b : {Bad{"stages", 3, "must equal the job's 2 ranks"},
                       Bad{"partition", json::array({"conv1"}), "one per stage"},
                       Bad{"microbatches", 65, "in 1..per_rank_batch"},
                       Bad{"schedule", "zigzag", "expected gpipe, 1f1b or async"},
                       Bad{"offload", "params", "expected none or optimizer"}}) {
    json k = j;
    k["parallel"][b.key] = b.value;
    auto r = plan_from_json(k);
    ASSERT_FALSE(r.ok()) << b.key;
    EXPECT_NE(r.error().message().find(b.message), std::string::npos) << r.error().message();
  }
}

TEST(PlanLookup, PicksTheRangeHoldingTheSize) {
  auto plan = parse_plan(kExample);
  ASSERT_TRUE(plan.ok());
  struct Case {
    uint64_t bytes;
    Algorithm algo;
  };
  for (const Case& c : {Case{0, Algorithm::kRecursiveDoubling},
                        Case{4095, Algorithm::kRecursiveDoubling}, Case{4096, Algorithm::kRing},
                        Case{1u << 30, Algorithm::kRing}, Case{kPlanMaxBytes, Algorithm::kRing}}) {
    auto rule = plan->algorithm_for(Collective::kAllreduce, c.bytes);
    ASSERT_TRUE(rule.has_value()) << c.bytes;
    EXPECT_EQ(rule->algo, c.algo) << c.bytes;
  }
  EXPECT_EQ(plan->algorithm_for(Collective::kBroadcast, 10)->algo, Algorithm::kTree);
  EXPECT_FALSE(plan->algorithm_for(Collective::kAllgather, 10).has_value());
}

// Each mutation of the example must be rejected with a message containing `want`.
struct BadCase {
  const char* what;
  std::function<void(json&)> mutate;
  const char* want;
};

TEST(PlanJson, RejectsBadPlansWithClearErrors) {
  const std::vector<BadCase> cases = {
      {"wrong version", [](json& j) { j["version"] = 2; },
       "version: this dltune reads plan version 1, got 2"},
      {"unknown algorithm", [](json& j) { j["collectives"]["allreduce"][1]["algo"] = "rign"; },
       "collectives.allreduce[1].algo: unknown algorithm 'rign'"},
      {"overlap", [](json& j) { j["collectives"]["allreduce"][1]["min_bytes"] = 2048; },
       "min_bytes 2048 must equal the previous range's max_bytes 4096 (ranges overlap)"},
      {"gap", [](json& j) { j["collectives"]["allreduce"][1]["min_bytes"] = 8192; },
       "(ranges leave a gap)"},
      {"unsorted",
       [](json& j) {
         auto& a = j["collectives"]["allreduce"];
         std::swap(a[0], a[1]);
       },
       "collectives.allreduce[0]: the first range must start at min_bytes 0"},
      {"not covering", [](json& j) { j["collectives"]["allreduce"][1]["max_bytes"] = 65536; },
       "the last range must end at max_bytes 18446744073709551615"},
      {"empty range", [](json& j) { j["collectives"]["allreduce"][0]["max_bytes"] = 0; },
       "min_bytes 0 must be below max_bytes 0"},
      {"no ranges", [](json& j) { j["collectives"]["broadcast"] = json::array(); },
       "collectives.broadcast: has no size ranges"},
      {"unknown collective", [](json& j) { j["collectives"]["alltoall"] = json::array(); },
       "collectives.alltoall: unknown collective"},
      {"negative bytes", [](json& j) { j["collectives"]["allreduce"][0]["max_bytes"] = -1; },
       "collectives.allreduce[0].max_bytes: expected a non-negative integer, got -1"},
      {"unknown key", [](json& j) { j["training"]["batch"] = 5; }, "training.batch: unknown key"},
      {"missing key", [](json& j) { j.erase("job"); }, "job: missing"},
      {"precision", [](json& j) { j["training"]["precision"] = "fp16"; },
       "training.precision: expected fp32 or bf16, got 'fp16'"},
      {"kernel not a name", [](json& j) { j["training"]["kernels"]["conv1"] = 3; },
       "training.kernels: expected node name -> kernel name"},
      {"threads", [](json& j) { j["job"]["threads_per_rank"] = 0; },
       "job.threads_per_rank: expected 1 to 1024, got 0"},
      {"auto scaling", [](json& j) { j["training"]["scaling"] = "auto"; },
       "training.scaling: expected weak or strong, got 'auto'"},
      {"batch mismatch", [](json& j) { j["training"]["global_batch"] = 100; },
       "training.global_batch: 100 must equal per_rank_batch 64 x 2 ranks"},
      {"placement count",
       [](json& j) {
         j["job"]["ranks_per_node"] = 4;
         j["training"]["global_batch"] = 256;
       },
       "placement: has 2 entries but job.ranks_per_node is 4"},
      {"duplicate local rank", [](json& j) { j["placement"][1]["local_rank"] = 0; },
       "placement[1].local_rank: 0 must be unique"},
      {"bad source", [](json& j) { j["provenance"]["source"] = "guess"; },
       "provenance.source: expected tuned, cache or default, got 'guess'"},
      {"wrong type", [](json& j) { j["training"]["overlap"] = "yes"; },
       "training.overlap: expected true or false, got string"},
      {"not an object", [](json& j) { j = json::array(); }, "expected an object, got array"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    json j = json::parse(kExample);
    c.mutate(j);
    auto plan = plan_from_json(j);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.error().exit_code(), 2);
    EXPECT_NE(plan.error().message().find(c.want), std::string::npos) << plan.error().message();
  }
}

// Issue 43, item 3: a control character (ESC, NUL, BEL, DEL, C1, a bidi override) or a byte
// that is not UTF-8 in any text field of a plan is refused where the plan is read, naming the
// field; the message itself stays printable.
TEST(PlanJson, RefusesControlCharactersInEveryTextField) {
  using Edit = std::function<void(json&, const std::string&)>;
  const std::vector<std::pair<std::string, Edit>> fields = {
      {"provenance.reason", [](json& j, const std::string& s) { j["provenance"]["reason"] = s; }},
      {"provenance.recipe", [](json& j, const std::string& s) { j["provenance"]["recipe"] = s; }},
      {"provenance.confidence.rival",
       [](json& j, const std::string& s) {
         j["provenance"]["confidence"] = {{"rival", s}, {"ratio", 1.1}};
       }},
      {"provenance.budget.cut",
       [](json& j, const std::string& s) {
         j["provenance"]["budget"] = {{"cut", s}};
       }},
      {"parallel.reason", [](json& j, const std::string& s) { j["parallel"]["reason"] = s; }},
      {"parallel.partition",
       [](json& j, const std::string& s) {
         j["job"]["ranks_per_node"] = 2;
         j["parallel"]["replicas"] = 1;
         j["parallel"]["stages"] = 2;
         j["parallel"]["partition"] = {"conv1", s};
         j["training"]["global_batch"] = 64;
       }},
      {"placement[1].nic", [](json& j, const std::string& s) { j["placement"][1]["nic"] = s; }},
      {"provenance.source", [](json& j, const std::string& s) { j["provenance"]["source"] = s; }},
      {"collectives.allreduce[0].algo",
       [](json& j, const std::string& s) { j["collectives"]["allreduce"][0]["algo"] = s; }},
  };
  const std::vector<std::string> hostile = {
      "ok \x1b]0;pwned\x07\x1b[31m",  // the report's: set the title, turn the text red
      std::string("nul\0here", 8),
      "bell\x07",
      "del\x7f",
      "c1 \xc2\x9b"
      "31m",
      "bidi \xe2\x80\xae",
      "tab\there",
      "new\nline"};
  for (const auto& [field, edit] : fields) {
    for (const std::string& bad : hostile) {
      json j = json::parse(kExample);
      edit(j, bad);
      auto plan = parse_plan(j.dump());
      ASSERT_FALSE(plan.ok()) << field << " " << json(bad).dump();
      const std::string& m = plan.error().message();
      EXPECT_NE(m.find(field), std::string::npos) << m;
      EXPECT_EQ(strings::find_control(m), std::string::npos) << m;
    }
    // The same field with printable text (UTF-8 included) is read.
    json j = json::parse(kExample);
    edit(j, "caf\xc3\xa9 ring");
    if (field != "provenance.source" && field != "collectives.allreduce[0].algo") {
      auto plan = parse_plan(j.dump());
      EXPECT_TRUE(plan.ok()) << field << ": " << plan.error().message();
    }
  }
  // An unknown key made of escape codes is named, escaped.
  json j = json::parse(kExample);
  j["provenance"]["\x1b[2J"] = 1;
  auto plan = parse_plan(j.dump());
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message().find("provenance.\\x1b[2J: unknown key"), std::string::npos)
      << plan.error().message();
}

// Issue 43, item 6: a negative per-rank batch is named as such (it was reported as
// parallel.microbatches), and a regret that is there is never negative.
TEST(PlanJson, NamesTheFieldThatIsWrong) {
  json j = json::parse(kExample);
  j["training"]["per_rank_batch"] = -8;
  j["training"]["global_batch"] = -16;
  auto plan = plan_from_json(j);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message().find("training.per_rank_batch: expected a positive integer, "
                                        "got -8"),
            std::string::npos)
      << plan.error().message();
  for (const char* key : {"regret", "collective_regret"}) {
    json r = json::parse(kExample);
    r["provenance"][key] = -0.25;
    auto bad = plan_from_json(r);
    ASSERT_FALSE(bad.ok()) << key;
    EXPECT_NE(bad.error().message().find(std::string("provenance.") + key +
                                         ": expected a share >= 0 (leave it out when unknown)"),
              std::string::npos)
        << bad.error().message();
    r["provenance"][key] = 0.03;
    EXPECT_TRUE(plan_from_json(r).ok()) << key;
  }
}

TEST(PlanJson, RejectsTextThatIsNotJson) {
  for (const char* text : {"", "{", "{\"version\": 1,}", "nope"}) {
    auto plan = parse_plan(text);
    ASSERT_FALSE(plan.ok()) << text;
    EXPECT_NE(plan.error().message().find("not valid JSON"), std::string::npos);
  }
}

TEST(PlanDefault, IsValidAndCoversEverySize) {
  const Plan plan = default_plan(2, 4, 32, Algorithm::kRing);
  ASSERT_TRUE(validate_plan(plan).ok()) << validate_plan(plan).error().message();
  EXPECT_EQ(plan.training.global_batch, 256);
  EXPECT_EQ(plan.provenance.source, PlanSource::kDefault);
  EXPECT_EQ(plan.algorithm_for(Collective::kAllreduce, 12345)->algo, Algorithm::kRing);
  auto again = parse_plan(serialize_plan(plan));
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(*again, plan);
}

TEST(PlanNames, AlgorithmNamesRoundTrip) {
  for (const std::string& name : algorithm_names()) {
    auto a = parse_algorithm(name);
    ASSERT_TRUE(a.has_value()) << name;
    EXPECT_EQ(algorithm_name(*a), name);
  }
  EXPECT_FALSE(parse_algorithm("Ring").has_value());
  EXPECT_EQ(algorithm_name(Algorithm::kRecursiveDoubling), "rd");
}

}  // namespace
}  // namespace dltune::recipes
