// The model graph: built-in architectures checked by parameter count against the figures
// torchvision 0.14 and PyTorch report for the same networks (printed by
// `sum(p.numel() for p in torchvision.models.NAME().parameters())`), shape rules of the new ops,
// and the problems analyze_graph reports for impossible graphs.
#include "recipes/model/graph.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "recipes/model/builtins.h"
#include "recipes/model/partition.h"

namespace dltune::recipes {
namespace {

GraphInfo analyze_builtin(const std::string& name, BuiltinOptions o = {}) {
  auto g = builtin_graph(name, o);
  EXPECT_TRUE(g.has_value()) << name;
  return g ? analyze_graph(*g) : GraphInfo{};
}

TEST(GraphBuiltins, ParameterCountsMatchTorchvision) {
  struct Case {
    const char* name;
    int64_t parameters;
  };
  // torchvision 0.14.1 (Debian python3-torchvision): resnet18/50/101, vgg16, googlenet
  // (aux_logits=False); resnet20: He et al.'s CIFAR ResNet-20 with option A shortcuts (0.27M).
  for (const Case& c :
       {Case{"resnet18", 11689512}, Case{"resnet50", 25557032}, Case{"resnet101", 44549160},
        Case{"vgg16", 138357544}, Case{"googlenet", 6624904}, Case{"resnet20", 269722},
        Case{"gpt2-small", 124439808}}) {
    SCOPED_TRACE(c.name);
    const GraphInfo info = analyze_builtin(c.name);
    ASSERT_TRUE(info.ok()) << info.problems[0].second;
    EXPECT_EQ(info.parameters, c.parameters);
  }
}

TEST(GraphBuiltins, CifarResnetsGrowBySixLayersOfTwoStages) {
  // Each extra block pair adds the same parameters; ResNet-110 has 1.7M (He et al., table 6;
  // 1,727,962 counted by PyTorch for the option-A definition in engine/tests/gen_torch_refs.py).
  const int64_t p20 = analyze_builtin("resnet20").parameters;
  const int64_t p32 = analyze_builtin("resnet32").parameters;
  const int64_t p56 = analyze_builtin("resnet56").parameters;
  const int64_t p110 = analyze_builtin("resnet110").parameters;
  EXPECT_EQ(p32 - p20, (p56 - p32) / 2);
  EXPECT_EQ(p110, 1727962);
  EXPECT_EQ(analyze_builtin("resnet56").output(), (Shape{10}));
}

TEST(GraphBuiltins, ResnetNamesFollowTorchvision) {
  const GraphInfo info = analyze_builtin("resnet50");
  ASSERT_TRUE(info.ok());
  std::vector<std::string> names;
  for (const auto& t : info.params) names.push_back(t.name);
  std::vector<std::string> state;
  for (const auto& t : info.state) state.push_back(t.name);
  EXPECT_EQ(names.front(), "conv1.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "layer1.0.downsample.0.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "layer4.2.bn3.bias"), names.end());
  EXPECT_EQ(names.back(), "fc.bias");
  EXPECT_NE(std::find(state.begin(), state.end(), "layer3.5.bn2.running_var"), state.end());
  EXPECT_NE(std::find(state.begin(), state.end(), "bn1.num_batches_tracked"), state.end());
}

TEST(GraphBuiltins, GptTiesTheHeadToTheTokenEmbedding) {
  BuiltinOptions o;
  o.blocks = 2;
  o.width = 32;
  o.heads = 4;
  o.context = 16;
  const GraphInfo info = analyze_builtin("gpt-tiny", o);
  ASSERT_TRUE(info.ok()) << info.problems[0].second;
  EXPECT_EQ(info.output(), (Shape{16, 256}));
  const int head = static_cast<int>(info.outputs.size()) - 1;
  ASSERT_EQ(info.node_params[static_cast<size_t>(head)].size(), 1u);
  EXPECT_EQ(info.params[static_cast<size_t>(info.node_params[static_cast<size_t>(head)][0])].name,
            "wte.weight");
  // wte 256x32 + wpe 16x32 + 2 blocks x (12 C^2 + 13 C) + ln_f 2C.
  const int64_t C = 32;
  EXPECT_EQ(info.parameters, 256 * C + 16 * C + 2 * (12 * C * C + 13 * C) + 2 * C);
}

TEST(GraphBuiltins, SmallInputsAreProblemsNotCrashes) {
  BuiltinOptions o;
  o.input = {3, 16, 16};
  const GraphInfo info = analyze_builtin("vgg16", o);
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.problems[0].second.find("does not fit"), std::string::npos);
  o.input = {3, 64, 64};  // resnet18 on 64x64 works (adaptive pooling)
  EXPECT_TRUE(analyze_builtin("resnet18", o).ok());
}

TEST(GraphOps, PoolingCeilModeFollowsPyTorch) {
  OpAttrs a;
  a.kernel = 3;
  a.stride = 2;
  a.ceil_mode = true;
  // torch.nn.MaxPool2d(3, 2, ceil_mode=True) on 112x112 -> 56x56, on 55x55 -> 27x27,
  // on 14x14 -> 7x7 (the last window must start inside the input).
  EXPECT_EQ(infer_shape(OpKind::kMaxPool, a, {{64, 112, 112}}).out, (Shape{64, 56, 56}));
  EXPECT_EQ(infer_shape(OpKind::kMaxPool, a, {{64, 55, 55}}).out, (Shape{64, 27, 27}));
  a.kernel = 2;
  EXPECT_EQ(infer_shape(OpKind::kMaxPool, a, {{832, 14, 14}}).out, (Shape{832, 7, 7}));
  a.ceil_mode = false;
  a.kernel = 3;
  EXPECT_EQ(infer_shape(OpKind::kMaxPool, a, {{64, 55, 55}}).out, (Shape{64, 27, 27}));
  EXPECT_EQ(infer_shape(OpKind::kMaxPool, a, {{64, 56, 56}}).out, (Shape{64, 27, 27}));
}

TEST(GraphOps, MultiInputShapeRules) {
  EXPECT_EQ(infer_shape(OpKind::kConcat, {}, {{2, 4, 4}, {3, 4, 4}}).out, (Shape{5, 4, 4}));
  EXPECT_NE(infer_shape(OpKind::kConcat, {}, {{2, 4, 4}, {3, 4, 5}}).problem, "");
  EXPECT_NE(infer_shape(OpKind::kAdd, {}, {{2, 4}, {2, 5}}).problem, "");
  EXPECT_NE(infer_shape(OpKind::kAdd, {}, {{2, 4}}).problem.find("takes 2 to 64 inputs"),
            std::string::npos);
  OpAttrs pad;
  pad.out = 32;
  pad.stride = 2;
  EXPECT_EQ(infer_shape(OpKind::kPadChannels, pad, {{16, 32, 32}}).out, (Shape{32, 16, 16}));
  pad.out = 17;
  EXPECT_NE(infer_shape(OpKind::kPadChannels, pad, {{16, 32, 32}}).problem, "");
}

Graph two_branch() {
  Graph g;
  g.input = {2, 5, 5};
  OpAttrs c;
  c.out = 3;
  c.kernel = 3;
  c.pad = 1;
  g.nodes = {{"a", OpKind::kConv2d, c, {"input"}},
             {"b", OpKind::kConv2d, c, {"input"}},
             {"sum", OpKind::kAdd, {}, {"a", "b"}}};
  return g;
}

TEST(GraphAnalyze, ResolvesInputsAndLaysOutParameters) {
  const GraphInfo info = analyze_graph(two_branch());
  ASSERT_TRUE(info.ok()) << info.problems[0].second;
  EXPECT_EQ(info.inputs[2], (std::vector<int>{0, 1}));
  EXPECT_EQ(info.inputs[0], (std::vector<int>{-1}));
  ASSERT_EQ(info.params.size(), 4u);
  EXPECT_EQ(info.params[2].name, "b.weight");
  EXPECT_EQ(info.params[2].offset, 3 * 2 * 9 + 3);
  EXPECT_EQ(info.parameters, 2 * (3 * 2 * 9 + 3));
}

TEST(GraphAnalyze, ReportsWhatIsWrongWithTheNode) {
  Graph g = two_branch();
  g.nodes[2].from = {"a", "c"};
  auto info = analyze_graph(g);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.problems[0].first, 2u);
  EXPECT_NE(info.problems[0].second.find("'c', which is not a node"), std::string::npos);
  g = two_branch();
  g.nodes[1].name = "a";
  EXPECT_NE(analyze_graph(g).problems[0].second.find("used twice"), std::string::npos);
  g = two_branch();
  g.nodes[0].from = {"sum"};
  EXPECT_NE(analyze_graph(g).problems[0].second.find("listed before it"), std::string::npos);
  g = two_branch();
  g.nodes[2].attrs.tie = "x";
  g.nodes.push_back({"head", OpKind::kLinear, {}, {"sum"}});
  g.nodes.back().attrs.out = 4;
  g.nodes.back().attrs.tie = "a.weight";
  EXPECT_NE(analyze_graph(g).problems[0].second.find("has shape 3x2x3x3"), std::string::npos);
}

TEST(GraphJson, RoundTripsEveryAttribute) {
  auto g = builtin_graph("googlenet", {});
  ASSERT_TRUE(g.has_value());
  auto back = graph_from_json(graph_to_json(*g));
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(describe_graph(*back), describe_graph(*g));
  nlohmann::json j = graph_to_json(two_branch());
  j["nodes"][0]["kernel"] = "3";
  EXPECT_FALSE(graph_from_json(j));
  j = graph_to_json(two_branch());
  j["nodes"][0]["colour"] = 1;
  auto bad = graph_from_json(j);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("unknown key 'colour'"), std::string::npos);
}

}  // namespace
}  // namespace dltune::recipes

namespace dltune::recipes {
namespace {

TEST(GraphPartition, CutsWhereOneTensorCrosses) {
  // A chain can be cut before every node; a CIFAR ResNet only between blocks (inside a block
  // the block's input still reaches its add); a GPT only on its residual stream between blocks.
  auto chain = builtin_graph("lenet", {});
  EXPECT_EQ(cut_points(analyze_graph(*chain)).size(), chain->nodes.size() - 1);
  auto resnet = builtin_graph("resnet20", {});
  const GraphInfo ri = analyze_graph(*resnet);
  std::vector<std::string> names;
  for (int k : cut_points(ri)) names.push_back(resnet->nodes[static_cast<size_t>(k)].name);
  EXPECT_NE(std::find(names.begin(), names.end(), "layer2.0.conv1"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "layer2.0.conv2"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "layer2.0.add"), names.end());
  BuiltinOptions o;
  o.blocks = 3, o.width = 16, o.heads = 2, o.context = 8;
  auto gpt = builtin_graph("gpt-tiny", o);
  const GraphInfo gi = analyze_graph(*gpt);
  names.clear();
  for (int k : cut_points(gi)) names.push_back(gpt->nodes[static_cast<size_t>(k)].name);
  EXPECT_NE(std::find(names.begin(), names.end(), "h.1.ln_1"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "h.1.attn.c_proj"), names.end());
}

TEST(GraphPartition, StagesKeepNamesAndSplitTiedWeights) {
  BuiltinOptions o;
  o.blocks = 2, o.width = 16, o.heads = 2, o.context = 8;
  auto gpt = builtin_graph("gpt-tiny", o);
  const GraphInfo gi = analyze_graph(*gpt);
  auto firsts = partition_nodes(*gpt, gi, {"wte", "h.1.ln_1"});
  ASSERT_TRUE(firsts) << firsts.error().message();
  auto second = make_stage(*gpt, gi, (*firsts)[1], static_cast<int>(gpt->nodes.size()));
  ASSERT_TRUE(second) << second.error().message();
  EXPECT_EQ(second->graph.input, (Shape{8, 16}));
  EXPECT_EQ(second->graph.nodes.front().from, (std::vector<std::string>{"input"}));
  ASSERT_EQ(second->shared.size(), 1u);
  EXPECT_EQ(second->shared[0],
            (std::pair<std::string, std::string>{"lm_head.weight", "wte.weight"}));
  const GraphInfo si = analyze_graph(second->graph);
  ASSERT_TRUE(si.ok()) << si.problems[0].second;
  EXPECT_EQ(si.output(), gi.output());
  EXPECT_EQ(si.params.back().name, "lm_head.weight");
  // Both stages together own every tensor of the model once, plus the split tie's copy.
  auto first = make_stage(*gpt, gi, 0, (*firsts)[1]);
  ASSERT_TRUE(first);
  EXPECT_EQ(analyze_graph(first->graph).parameters + si.parameters, gi.parameters + 256 * 16);
  EXPECT_FALSE(partition_nodes(*gpt, gi, {"wte", "h.1.attn.c_proj"}));
  EXPECT_FALSE(partition_nodes(*gpt, gi, {"wpe", "h.1.ln_1"}));
}

TEST(GraphPartition, BalancedCutsMinimiseTheLargestStage) {
  auto chain = builtin_graph("mlp", {});  // 6 nodes, cut anywhere
  const GraphInfo info = analyze_graph(*chain);
  const std::vector<double> cost = {2, 2, 2, 6, 2, 2};
  auto two = balanced_partition(info, cost, 2);
  ASSERT_TRUE(two) << two.error().message();
  EXPECT_EQ(*two, (std::vector<int>{0, 3}));  // 6 | 10 (cutting before 4: 12 | 4)
  auto three = balanced_partition(info, cost, 3);
  ASSERT_TRUE(three);
  EXPECT_EQ(*three, (std::vector<int>{0, 3, 4}));  // 6 | 6 | 4
  // A memory veto: no stage may hold more than 3 nodes.
  auto vetoed = balanced_partition(info, cost, 2, [](int b, int e) { return e - b <= 3; });
  ASSERT_TRUE(vetoed);
  EXPECT_EQ(*vetoed, (std::vector<int>{0, 3}));
  EXPECT_FALSE(balanced_partition(info, cost, 2, [](int b, int e) { return e - b <= 2; }));
  EXPECT_FALSE(balanced_partition(info, cost, 7));
}

}  // namespace
}  // namespace dltune::recipes
