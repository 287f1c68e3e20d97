// torchvision 0.14's ResNet, VGG-16 and GoogLeNet, and He et al.'s CIFAR ResNets, as graphs.
// Node names are torchvision's module paths, so parameter names ("layer1.0.conv1.weight")
// match its state_dict. Parameter-free nodes get names of their own ("layer1.0.add").
#include "recipes/model/builtins_internal.h"

namespace dltune::recipes::internal {
namespace {

struct ResnetSpec {
  bool bottleneck;
  int blocks[4];
};

// One torchvision BasicBlock / Bottleneck: the main branch, then the shortcut (a 1x1
// convolution + batch norm where the shape changes), added, then ReLU.
std::string torchvision_block(GraphBuilder& b, const std::string& p, const std::string& x,
                              int64_t in, int64_t planes, int64_t stride, bool bottleneck) {
  const int64_t out = bottleneck ? planes * 4 : planes;
  std::string y;
  if (bottleneck) {
    y = b.conv(p + ".conv1", x, planes, 1, 1, 0, false, "he");
    y = b.unary(p + ".relu1", OpKind::kRelu, b.bn(p + ".bn1", y));
    y = b.conv(p + ".conv2", y, planes, 3, stride, 1, false, "he");
    y = b.unary(p + ".relu2", OpKind::kRelu, b.bn(p + ".bn2", y));
    y = b.bn(p + ".bn3", b.conv(p + ".conv3", y, out, 1, 1, 0, false, "he"));
  } else {
    y = b.conv(p + ".conv1", x, planes, 3, stride, 1, false, "he");
    y = b.unary(p + ".relu1", OpKind::kRelu, b.bn(p + ".bn1", y));
    y = b.bn(p + ".bn2", b.conv(p + ".conv2", y, planes, 3, 1, 1, false, "he"));
  }
  std::string shortcut = x;
  if (stride != 1 || in != out)
    shortcut =
        b.bn(p + ".downsample.1", b.conv(p + ".downsample.0", x, out, 1, stride, 0, false, "he"));
  const std::string sum = b.add(p + ".add", OpKind::kAdd, {}, {y, shortcut});
  return b.unary(p + ".relu", OpKind::kRelu, sum);
}

Graph torchvision_resnet(const ResnetSpec& s, const BuiltinOptions& o) {
  Graph g;
  g.input = o.input;
  GraphBuilder b(g);
  std::string x = b.conv("conv1", kGraphInput, 64, 7, 2, 3, false, "he");
  x = b.unary("relu", OpKind::kRelu, b.bn("bn1", x));
  x = b.pool("maxpool", OpKind::kMaxPool, x, 3, 2, 1);
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage;
    for (int i = 0; i < s.blocks[stage]; ++i) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(i);
      x = torchvision_block(b, p, x, in, planes, i == 0 && stage > 0 ? 2 : 1, s.bottleneck);
      in = s.bottleneck ? planes * 4 : planes;
    }
  }
  x = b.global_pool("avgpool", x);
  x = b.unary("flatten", OpKind::kFlatten, x);
  b.linear("fc", x, o.classes);
  return g;
}

// He et al. 2016, section 4.2: 3x3 convolutions on 16, 32, 64 channels, n blocks per stage,
// shortcuts of option A (identity, or subsampled and zero-padded where the shape changes).
Graph cifar_resnet(int depth, const BuiltinOptions& o) {
  Graph g;
  g.input = o.input;
  GraphBuilder b(g);
  const int n = (depth - 2) / 6;
  std::string x = b.conv("conv1", kGraphInput, 16, 3, 1, 1, false, "he");
  x = b.unary("relu", OpKind::kRelu, b.bn("bn1", x));
  int64_t in = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t planes = int64_t{16} << stage;
    for (int i = 0; i < n; ++i) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(i);
      const int64_t stride = i == 0 && stage > 0 ? 2 : 1;
      std::string y = b.conv(p + ".conv1", x, planes, 3, stride, 1, false, "he");
      y = b.unary(p + ".relu1", OpKind::kRelu, b.bn(p + ".bn1", y));
      y = b.bn(p + ".bn2", b.conv(p + ".conv2", y, planes, 3, 1, 1, false, "he"));
      std::string shortcut = x;
      if (stride != 1 || in != planes) {
        OpAttrs a;
        a.out = planes;
        a.stride = stride;
        shortcut = b.add(p + ".shortcut", OpKind::kPadChannels, a, {x});
      }
      x = b.unary(p + ".relu", OpKind::kRelu, b.add(p + ".add", OpKind::kAdd, {}, {y, shortcut}));
      in = planes;
    }
  }
  x = b.unary("flatten", OpKind::kFlatten, b.global_pool("avgpool", x));
  b.linear("fc", x, o.classes);
  return g;
}

// torchvision's VGG-16 (configuration D, no batch norm): features.N numbered per module.
Graph vgg16(const BuiltinOptions& o) {
  Graph g;
  g.input = o.input;
  GraphBuilder b(g);
  const int kCfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
  std::string x = kGraphInput;
  int m = 0;  // module index in `features`
  for (int c : kCfg) {
    const std::string name = "features." + std::to_string(m++);
    if (c == 0) {
      x = b.pool(name, OpKind::kMaxPool, x, 2, 2, 0);
      continue;
    }
    x = b.conv(name, x, c, 3, 1, 1, true, "he");
    x = b.unary("features." + std::to_string(m++), OpKind::kRelu, x);
  }
  x = b.unary("flatten", OpKind::kFlatten, b.global_pool("avgpool", x, 7, 7));
  x = b.unary("classifier.1", OpKind::kRelu, b.linear("classifier.0", x, 4096));
  x = b.dropout("classifier.2", x, 0.5);
  x = b.unary("classifier.4", OpKind::kRelu, b.linear("classifier.3", x, 4096));
  x = b.dropout("classifier.5", x, 0.5);
  b.linear("classifier.6", x, o.classes);
  return g;
}

// torchvision's BasicConv2d: convolution without bias, batch norm (eps 0.001), ReLU.
std::string basic_conv(GraphBuilder& b, const std::string& p, const std::string& x, int64_t out,
                       int64_t kernel, int64_t stride = 1, int64_t pad = 0) {
  std::string y = b.conv(p + ".conv", x, out, kernel, stride, pad, false);
  return b.unary(p + ".relu", OpKind::kRelu, b.bn(p + ".bn", y, 1e-3));
}

std::string inception(GraphBuilder& b, const std::string& p, const std::string& x,
                      const int64_t (&c)[6]) {
  const std::string b1 = basic_conv(b, p + ".branch1", x, c[0], 1);
  std::string b2 = basic_conv(b, p + ".branch2.0", x, c[1], 1);
  b2 = basic_conv(b, p + ".branch2.1", b2, c[2], 3, 1, 1);
  std::string b3 = basic_conv(b, p + ".branch3.0", x, c[3], 1);
  // torchvision's branch3 uses a 3x3 kernel where the paper has 5x5 (kept for its weights).
  b3 = basic_conv(b, p + ".branch3.1", b3, c[4], 3, 1, 1);
  std::string b4 = b.pool(p + ".branch4.0", OpKind::kMaxPool, x, 3, 1, 1, true);
  b4 = basic_conv(b, p + ".branch4.1", b4, c[5], 1);
  return b.add(p + ".concat", OpKind::kConcat, {}, {b1, b2, b3, b4});
}

Graph googlenet(const BuiltinOptions& o) {
  Graph g;
  g.input = o.input;
  GraphBuilder b(g);
  std::string x = basic_conv(b, "conv1", kGraphInput, 64, 7, 2, 3);
  x = b.pool("maxpool1", OpKind::kMaxPool, x, 3, 2, 0, true);
  x = basic_conv(b, "conv2", x, 64, 1);
  x = basic_conv(b, "conv3", x, 192, 3, 1, 1);
  x = b.pool("maxpool2", OpKind::kMaxPool, x, 3, 2, 0, true);
  x = inception(b, "inception3a", x, {64, 96, 128, 16, 32, 32});
  x = inception(b, "inception3b", x, {128, 128, 192, 32, 96, 64});
  x = b.pool("maxpool3", OpKind::kMaxPool, x, 3, 2, 0, true);
  x = inception(b, "inception4a", x, {192, 96, 208, 16, 48, 64});
  x = inception(b, "inception4b", x, {160, 112, 224, 24, 64, 64});
  x = inception(b, "inception4c", x, {128, 128, 256, 24, 64, 64});
  x = inception(b, "inception4d", x, {112, 144, 288, 32, 64, 64});
  x = inception(b, "inception4e", x, {256, 160, 320, 32, 128, 128});
  x = b.pool("maxpool4", OpKind::kMaxPool, x, 2, 2, 0, true);
  x = inception(b, "inception5a", x, {256, 160, 320, 32, 128, 128});
  x = inception(b, "inception5b", x, {384, 192, 384, 48, 128, 128});
  x = b.unary("flatten", OpKind::kFlatten, b.global_pool("avgpool", x));
  x = b.dropout("dropout", x, 0.2);
  b.linear("fc", x, o.classes);
  return g;
}

}  // namespace

std::optional<Graph> cnn_graph(std::string_view name, const BuiltinOptions& o) {
  if (name == "resnet18") return torchvision_resnet({false, {2, 2, 2, 2}}, o);
  if (name == "resnet50") return torchvision_resnet({true, {3, 4, 6, 3}}, o);
  if (name == "resnet101") return torchvision_resnet({true, {3, 4, 23, 3}}, o);
  if (name == "vgg16") return vgg16(o);
  if (name == "googlenet") return googlenet(o);
  for (int depth : {20, 32, 56, 110})
    if (name == "resnet" + std::to_string(depth)) return cifar_resnet(depth, o);
  return std::nullopt;
}

}  // namespace dltune::recipes::internal
