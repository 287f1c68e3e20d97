// The exporters to MPICH, MVAPICH2 and NCCL, each checked against its runtime's grammar as the
// runtime documents or parses it. MPICH's JSON is also walked the way MPICH's selection does
// (first matching key, depth first), so the test asserts which algorithm a call would get.
// (tests/tuner/mpich_rules_test.sh feeds the same JSON to a real MPICH where one is installed.)
#include "tuner/db/runtime_formats.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace dltune::tuner::db {
namespace {

using Json = nlohmann::ordered_json;
constexpr uint64_t kMax = UINT64_MAX;

PlanCollectives plan(std::vector<std::pair<std::string, std::vector<CollectiveRange>>> colls) {
  PlanCollectives p;
  for (auto& [name, ranges] : colls) p[name] = std::move(ranges);
  return p;
}

// ---- MPICH

// (No std::regex: GCC 12's warns inside <regex> under the sanitizers, and CI makes warnings
// errors.)
bool all_of(std::string_view s, int (*pred)(int)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!pred(static_cast<unsigned char>(c))) return false;
  }
  return true;
}
int is_digit(int c) { return std::isdigit(c); }
int is_name(int c) { return std::islower(c) || c == '_'; }        // collective names
int is_identifier(int c) { return std::isalpha(c) || c == '_'; }  // MPIR_... function names

// Every key MPICH 4.0's csel parser accepts that the exporter may write.
bool is_mpich_key(std::string_view k) {
  std::string_view v;
  auto after = [&](std::string_view prefix) {
    if (!strings::starts_with(k, prefix)) return false;
    v = k.substr(prefix.size());
    return true;
  };
  auto one_of = [&](std::initializer_list<std::string_view> options) {
    return std::find(options.begin(), options.end(), v) != options.end();
  };
  auto less_than_number = [&] {
    return !v.empty() && v[0] == '<' && all_of(v.substr(1), is_digit);
  };
  if (after("collective=")) return all_of(v, is_name);
  if (after("comm_type=")) return one_of({"intra", "inter"});
  if (after("comm_size")) return one_of({"=any", "=pow2"}) || less_than_number();
  if (after("avg_msg_size") || after("total_msg_size")) return v == "=any" || less_than_number();
  if (after("is_op_built_in=") || after("is_commutative=") || after("is_sendbuf_inplace=")) {
    return one_of({"yes", "no"});
  }
  if (after("count")) return one_of({"<pow2", "=any"});
  if (after("comm_hierarchy=")) return one_of({"parent", "any"});
  if (after("algorithm=MPIR_")) return all_of(v, is_identifier);
  return false;
}

// Checks the grammar below a node: known keys, leaves are {"algorithm=...": {}} alone, and every
// level below the collectives ends in a catch-all (so MPICH always finds an algorithm).
void check_mpich_node(const Json& node, const std::string& where) {
  ASSERT_TRUE(node.is_object()) << where;
  ASSERT_FALSE(node.empty()) << where;
  std::vector<std::string> keys;
  for (const auto& [k, v] : node.items()) {
    EXPECT_TRUE(is_mpich_key(k)) << where << ": key " << k;
    keys.push_back(k);
    if (strings::starts_with(k, "algorithm=")) {
      EXPECT_EQ(node.size(), 1u) << where << ": a leaf shares its level";
      EXPECT_TRUE(v.is_object() && v.empty()) << where;
    } else {
      check_mpich_node(v, where + "/" + k);
    }
  }
  if (where.empty()) return;  // the root lists the collectives themselves
  const std::string& last = keys.back();
  const bool catch_all =
      strings::starts_with(last, "algorithm=") || last.ends_with("=any") ||
      (keys.size() == 2 && ((last.ends_with("=no") && keys[0].ends_with("=yes")) ||
                            (last == "comm_type=inter" && keys[0] == "comm_type=intra")));
  EXPECT_TRUE(catch_all) << where << ": no catch-all after " << last;
}

struct Call {
  std::string coll;
  int comm_size = 2;
  uint64_t bytes = 8;
  uint64_t count = 1;
  bool builtin = true, commutative = true, parent = true, inplace = false;
};

bool matches(const std::string& key, const Call& c) {
  const auto eq = key.find('=');
  const auto lt = key.find('<');
  const std::string name = key.substr(0, std::min(eq, lt));
  const std::string val = key.substr(std::min(eq, lt) + 1);
  if (val == "any") return true;
  auto num = [&] { return std::stoull(val); };
  const bool pow2 = (c.comm_size & (c.comm_size - 1)) == 0;
  if (name == "collective") return val == c.coll;
  if (name == "comm_type") return val == "intra";
  if (name == "comm_size") return val == "pow2" ? pow2 : static_cast<uint64_t>(c.comm_size) < num();
  if (name == "avg_msg_size" || name == "total_msg_size") return c.bytes < num();
  if (name == "count")
    return c.count < static_cast<uint64_t>(1u << (31 - __builtin_clz(c.comm_size)));
  if (name == "is_op_built_in") return (val == "yes") == c.builtin;
  if (name == "is_commutative") return (val == "yes") == c.commutative;
  if (name == "comm_hierarchy") return (val == "parent") == c.parent;
  if (name == "is_sendbuf_inplace") return (val == "yes") == c.inplace;
  return false;
}

// The algorithm MPICH would select for `c`: the first matching key at every level.
std::string select(const Json& node, const Call& c) {
  for (const auto& [k, v] : node.items()) {
    if (strings::starts_with(k, "algorithm=")) return k.substr(10);
    if (matches(k, c)) return select(v, c);
  }
  return "no match";
}

Json mpich(const std::map<int, PlanCollectives>& plans, std::vector<std::string>* notes) {
  auto text = mpich_rules_json(plans, notes);
  EXPECT_TRUE(text.ok()) << text.error().message();
  return Json::parse(text.ok() ? *text : "{}");
}

TEST(MpichRules, FollowsThePlanPerSizeAndCoversEveryCollective) {
  std::vector<std::string> notes;
  const Json j =
      mpich({{2, plan({{"allreduce", {{0, 4096, "rd", 0}, {4096, kMax, "rabenseifner", 0}}},
                       {"broadcast", {{0, kMax, "ring", 0}}}})}},
            &notes);
  check_mpich_node(j, "");
  for (const char* c : {"bcast", "barrier", "allreduce", "allgather", "allgatherv", "reduce",
                        "reduce_scatter_block", "gather", "scatter", "alltoall", "scan",
                        "iallreduce", "ibcast", "ibarrier", "neighbor_alltoall"}) {
    EXPECT_TRUE(j.contains("collective=" + std::string(c))) << c;
  }
  EXPECT_EQ(select(j, {"allreduce", 2, 1024, 128}), "MPIR_Allreduce_intra_recursive_doubling");
  EXPECT_EQ(select(j, {"allreduce", 2, 1 << 20, 1 << 17}),
            "MPIR_Allreduce_intra_reduce_scatter_allgather");
  // Its preconditions are kept: a user-defined op falls back to recursive doubling.
  Call user_op{"allreduce", 2, 1 << 20, 1 << 17};
  user_op.builtin = false;
  EXPECT_EQ(select(j, user_op), "MPIR_Allreduce_intra_recursive_doubling");
  EXPECT_EQ(select(j, {"bcast", 2, 64}), "MPIR_Bcast_intra_scatter_ring_allgather");
  EXPECT_EQ(select(j, {"allgather", 2, 64}), "MPIR_Allgather_intra_ring");
  EXPECT_EQ(select(j, {"barrier", 2}), "MPIR_Barrier_intra_dissemination");
  Call inplace{"alltoall", 2, 64};
  inplace.inplace = true;
  EXPECT_EQ(select(j, inplace), "MPIR_Alltoall_intra_pairwise_sendrecv_replace");
  EXPECT_FALSE(notes.empty());  // that MPICH's table is replaced
}

TEST(MpichRules, EveryJobSizeInOneFile) {
  std::vector<std::string> notes;
  const Json j = mpich({{2, plan({{"allreduce", {{0, kMax, "rd", 0}}}})},
                        {8, plan({{"allreduce", {{0, kMax, "hier", 0}}}})}},
                       &notes);
  check_mpich_node(j, "");
  const Json& intra = j["collective=allreduce"]["comm_type=intra"];
  ASSERT_EQ(intra.size(), 2u);
  EXPECT_EQ(intra.begin().key(), "comm_size<8");
  const std::string rd = "MPIR_Allreduce_intra_recursive_doubling";
  EXPECT_EQ(select(j, {"allreduce", 2, 1 << 20, 1 << 17}), rd);
  EXPECT_EQ(select(j, {"allreduce", 4, 1 << 20, 1 << 17}), rd);  // the largest plan <= 4: 2's
  EXPECT_EQ(select(j, {"allreduce", 8, 64, 8}), "MPIR_Allreduce_intra_smp");
  EXPECT_EQ(select(j, {"allreduce", 16, 64, 8}), "MPIR_Allreduce_intra_smp");
  Call flat{"allreduce", 16, 64, 8};
  flat.parent = false;  // no node hierarchy: the smp algorithm cannot run
  EXPECT_EQ(select(j, flat), rd);
}

TEST(MpichRules, ApproximationsAreNotedAndUnknownAlgorithmsRejected) {
  std::vector<std::string> notes;
  const Json j = mpich(
      {{4, plan({{"allreduce", {{0, kMax, "ring", 0}}}, {"alltoall", {{0, kMax, "ring", 0}}}})}},
      &notes);
  check_mpich_node(j, "");
  const std::string all = strings::join(notes, "\n");
  EXPECT_NE(all.find("allreduce: ring has no MPICH 4.0 equivalent"), std::string::npos) << all;
  EXPECT_NE(all.find("alltoall: not exported to MPICH"), std::string::npos) << all;
  auto bad = mpich_rules_json({{2, plan({{"allreduce", {{0, kMax, "bogus", 0}}}})}}, &notes);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("bogus"), std::string::npos);
  EXPECT_FALSE(mpich_rules_json({}, &notes).ok());
}

// ---- MVAPICH2: the grammar of allreduce_tuning.c's MV2_internode_Allreduce_is_define().

// One item "ALGO:MIN-MAX" (MAX digits or '+'), as MVAPICH2's regex
// "([0-9]+):([0-9]+)-([0-9]+|\\+)" reads it; false when it does not match.
bool mvapich_item(const std::string& item, std::string* algo, std::string* min, std::string* max) {
  const size_t colon = item.find(':'), dash = item.find('-');
  if (colon == std::string::npos || dash == std::string::npos || dash < colon) return false;
  *algo = item.substr(0, colon);
  *min = item.substr(colon + 1, dash - colon - 1);
  *max = item.substr(dash + 1);
  return all_of(*algo, is_digit) && all_of(*min, is_digit) &&
         (*max == "+" || all_of(*max, is_digit));
}

void check_mvapich_value(const std::string& value) {
  uint64_t next = 0;
  const auto items = strings::split(value, ',');
  for (size_t i = 0; i < items.size(); ++i) {
    std::string algo, min, max;
    ASSERT_TRUE(mvapich_item(items[i], &algo, &min, &max)) << items[i];
    EXPECT_TRUE(algo == "1" || algo == "2")
        << "not an inter-node algorithm MVAPICH2 takes: " << algo;
    EXPECT_EQ(std::stoull(min), next) << value;
    if (i + 1 == items.size()) {
      EXPECT_EQ(max, "+") << "the last range must be open-ended: " << value;
    } else {
      ASSERT_NE(max, "+") << value;
      next = std::stoull(max) + 1;  // MAX is inclusive
    }
  }
}

std::string var(const std::string& text, const std::string& name) {
  const std::string tag = "export " + name + "='";
  const auto at = text.find(tag);
  if (at == std::string::npos) return "<unset>";
  const auto end = text.find("'\n", at + tag.size());
  return text.substr(at + tag.size(), end - at - tag.size());
}

TEST(MvapichEnv, AllreduceRangesInMvapichsGrammar) {
  std::vector<std::string> notes;
  auto text = mvapich_tuning_env(
      plan({{"allreduce", {{0, 4096, "rd", 0}, {4096, 65536, "rd", 0}, {65536, kMax, "ring", 0}}},
            {"broadcast", {{0, kMax, "tree", 0}}}}),
      &notes);
  ASSERT_TRUE(text.ok()) << text.error().message();
  const std::string v = var(*text, "MV2_INTER_ALLREDUCE_TUNING");
  EXPECT_EQ(v, "1:0-65535,2:65536-+");
  check_mvapich_value(v);
  EXPECT_EQ(var(*text, "MV2_USE_INDEXED_TUNING"), "0");
  EXPECT_EQ(var(*text, "MV2_USE_INDEXED_ALLREDUCE_TUNING"), "0");
  const std::string all = strings::join(notes, "\n");
  EXPECT_NE(all.find("broadcast: not exported"), std::string::npos) << all;
  EXPECT_NE(all.find("allreduce: ring"), std::string::npos) << all;

  auto one = mvapich_tuning_env(plan({{"allreduce", {{0, kMax, "rabenseifner", 0}}}}), &notes);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(var(*one, "MV2_INTER_ALLREDUCE_TUNING"), "2:0-+");
  check_mvapich_value(var(*one, "MV2_INTER_ALLREDUCE_TUNING"));
  EXPECT_FALSE(mvapich_tuning_env(plan({{"broadcast", {{0, kMax, "tree", 0}}}}), &notes).ok());
}

// ---- NCCL: the grammar of NCCL_ALGO / NCCL_PROTO (parseList in NCCL's src/graph/tuning.cc):
// "[^]elems;func:[^]elems;..." with comma-separated elements, functions and elements compared
// without case.

void check_nccl_list(const std::string& value, const std::vector<std::string>& elems) {
  const std::vector<std::string> funcs = {"broadcast", "reduce", "allgather", "reducescatter",
                                          "allreduce"};
  for (const std::string& part : strings::split(value, ';')) {
    const auto colon = part.find(':');
    ASSERT_NE(colon, std::string::npos) << "every list names its function: " << value;
    const std::string fn = part.substr(0, colon);
    EXPECT_NE(std::find(funcs.begin(), funcs.end(), fn), funcs.end()) << fn;
    for (const std::string& e : strings::split(part.substr(colon + 1), ',')) {
      EXPECT_NE(std::find(elems.begin(), elems.end(), e), elems.end()) << e << " in " << value;
    }
  }
}

TEST(NcclEnv, PerFunctionAlgorithmsAndProtocols) {
  std::vector<std::string> notes;
  auto text = nccl_env(
      plan({{"allreduce", {{0, 65536, "nccl_tree_ll", 0}, {65536, kMax, "nccl_ring_ll128", 0}}},
            {"broadcast", {{0, kMax, "nccl:ring/", 0}}},
            {"allgather", {{0, kMax, "ring", 0}}}}),
      &notes);
  ASSERT_TRUE(text.ok()) << text.error().message();
  const std::string algo = var(*text, "NCCL_ALGO");
  const std::string proto = var(*text, "NCCL_PROTO");
  EXPECT_EQ(algo, "allreduce:Tree,Ring;broadcast:Ring");
  EXPECT_EQ(proto, "allreduce:LL,LL128");  // broadcast's protocol is left to NCCL
  check_nccl_list(algo,
                  {"Tree", "Ring", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"});
  check_nccl_list(proto, {"LL", "LL128", "Simple"});
  const std::string all = strings::join(notes, "\n");
  EXPECT_NE(all.find("allreduce: NCCL's variables cannot tie a choice to a message size"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("allgather: ranges with host algorithms"), std::string::npos) << all;

  auto nvls = nccl_env(plan({{"allreduce", {{0, kMax, "nccl_nvls_tree", 0}}}}), &notes);
  ASSERT_TRUE(nvls.ok());
  EXPECT_EQ(var(*nvls, "NCCL_ALGO"), "allreduce:NVLSTree");
  EXPECT_EQ(var(*nvls, "NCCL_PROTO"), "<unset>");
  EXPECT_FALSE(nccl_env(plan({{"allreduce", {{0, kMax, "ring", 0}}}}), &notes).ok());
}

}  // namespace
}  // namespace dltune::tuner::db
