// Built-in models: exact parameter counts of the Caffe definitions and clear errors for specs
// that do not fit together.
#include "engine/models.h"

#include <gtest/gtest.h>

namespace dltune::engine {
namespace {

int64_t count(const std::string& name) {
  auto spec = builtin_model(name);
  EXPECT_TRUE(spec.ok());
  auto m = Model::build(*spec);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message());
  return m.ok() ? m->num_params() : -1;
}

TEST(Models, ParameterCounts) {
  EXPECT_EQ(count("lenet"), 431080);      // caffe_lenet.prototxt
  EXPECT_EQ(count("alexnet"), 60965224);  // caffe_bvlc_alexnet_deploy.prototxt
  EXPECT_EQ(count("mlp"), 535818);
  EXPECT_EQ(count("lenet5"), 61706);
  EXPECT_GT(count("cifar"), 0);
}

TEST(Models, UnknownNameListsBuiltins) {
  auto r = builtin_model("resnet");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("lenet5"), std::string::npos) << r.error().message();
}

TEST(Models, BadSpecsAreRejectedWithTheLayerNamed) {
  ModelSpec s{"bad", {3, 8, 8}, 10, {LayerSpec::conv(4, 3, 1, 0, 2)}};
  auto m = Model::build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(m.error().message().find("layer 0 (conv2d)"), std::string::npos);
  EXPECT_NE(m.error().message().find("divisible by groups=2"), std::string::npos);

  s.layers = {LayerSpec::conv(4, 9)};
  m = Model::build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("does not fit"), std::string::npos);

  s.layers = {LayerSpec::flatten(), LayerSpec::linear(7)};
  m = Model::build(s);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("10 classes"), std::string::npos);
}

TEST(Models, ForwardShapesOnAlexnetSizedInput) {
  auto spec = builtin_model("alexnet");
  auto m = Model::build(*spec);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->layer(0).out_dims(), (Dims{96, 55, 55}));
  EXPECT_EQ(m->layer(14).out_dims(), (Dims{256, 6, 6}));
}

}  // namespace
}  // namespace dltune::engine
