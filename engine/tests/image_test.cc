// Image decoding and the ImageNet transforms against PIL 9.4 and torchvision 0.14, from the
// fixtures engine/tests/gen_image_fixtures.py wrote (data/images/: every kind of JPEG and PNG an
// image folder holds, PIL's decodes, torchvision's evaluation and training transforms); the
// random crop's geometry; bad files. Skips (saying so) in a build without a decoder.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "engine/data/image_decode.h"
#include "engine/data/image_transform.h"
#include "engine/data/real_data.h"

namespace dltune::engine {
namespace {

namespace fs = std::filesystem;

fs::path fixtures() { return fs::path(DLTUNE_ENGINE_SOURCE_DIR) / "engine/tests/data/images"; }

std::string bytes_of(const fs::path& p) {
  auto b = paths::read_file(p.string());
  EXPECT_TRUE(b.ok()) << p;
  return b ? *b : std::string();
}

std::vector<float> floats_of(const fs::path& p) {
  const std::string b = bytes_of(p);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

nlohmann::json manifest() { return nlohmann::json::parse(bytes_of(fixtures() / "manifest.json")); }

bool can_decode(const std::string& file) {
  return file.ends_with(".png") ? png_decoding_available() : jpeg_decoding_available();
}

std::string stem(const std::string& file) { return fs::path(file).stem().string(); }

// The largest difference between two byte images, in levels.
int max_diff(const std::vector<uint8_t>& a, const std::string& b) {
  EXPECT_EQ(a.size(), b.size());
  int worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, std::abs(int{a[i]} - int{static_cast<uint8_t>(b[i])}));
  return worst;
}

// Largest and mean absolute difference of two normalised tensors, in 8-bit levels of the
// channel with the smallest deviation (0.224): a level is 1 / (255 x 0.224) = 0.0175.
std::pair<double, double> level_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0, sum = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double d = std::abs(a[i] - b[i]) * 255.0 * 0.224;
    worst = std::max(worst, d);
    sum += d;
  }
  return {worst, sum / static_cast<double>(a.size())};
}

// libjpeg-turbo and libpng decode as PIL does (PIL uses the same libjpeg-turbo on Debian, and
// the same DCT scaling for draft()): equal to a level.
TEST(ImageDecode, AsPil) {
  for (const auto& e : manifest()) {
    const std::string file = e["file"];
    SCOPED_TRACE(file);
    if (!can_decode(file)) {
      std::printf(
          "skipped %s: %s\n", file.c_str(),
          decoding_unavailable(file.ends_with(".png") ? ImageCodec::kPng : ImageCodec::kJpeg)
              .c_str());
      continue;
    }
    const std::string b = bytes_of(fixtures() / file);
    const int w = e["width"], h = e["height"];
    auto head = read_image_header(b, file);
    ASSERT_TRUE(head.ok()) << head.error().message();
    EXPECT_EQ(head->width, w);
    EXPECT_EQ(head->height, h);
    RgbImage img;
    ASSERT_TRUE(decode_image(b, file, w, h, &img).ok());
    ASSERT_EQ(img.width, w);
    ASSERT_EQ(img.height, h);
    EXPECT_TRUE(img.warning.empty()) << img.warning;
    EXPECT_LE(max_diff(img.rgb, bytes_of(fixtures() / (stem(file) + ".rgb"))), 1);
    if (e.contains("half")) {  // the DCT's 1/2 scaling, as PIL's draft() asks libjpeg for it
      const int hw = e["half"][0], hh = e["half"][1];
      ASSERT_TRUE(decode_image(b, file, hw, hh, &img).ok());
      ASSERT_EQ(img.width, hw);
      ASSERT_EQ(img.height, hh);
      EXPECT_LE(max_diff(img.rgb, bytes_of(fixtures() / (stem(file) + ".half.rgb"))), 1);
    }
  }
}

// Evaluation: Resize(18) + CenterCrop(16) + ToTensor + Normalize, against torchvision. PIL's
// resampling rounds to 8 bits between its two passes, this one does not: within 2 levels,
// on average a fraction of one. Scaled decoding changes nothing here: a held-out image is
// decoded smaller only when it stays twice the resized size (these are not that large).
TEST(ImageTransform, EvaluationAsTorchvision) {
  for (const auto& e : manifest()) {
    const std::string file = e["file"];
    SCOPED_TRACE(file);
    if (!can_decode(file)) continue;
    const std::vector<float> want = floats_of(fixtures() / (stem(file) + ".eval.f32"));
    for (bool scaled : {false, true}) {
      ImageFolderReader reader({{(fixtures() / file).string(), 3}},
                               {16, 16, /*augment=*/false, scaled});
      std::vector<float> got(3 * 16 * 16);
      int32_t label = -1;
      ASSERT_TRUE(reader.read(0, 123, got.data(), &label).ok());
      EXPECT_EQ(label, 3);
      const auto [worst, mean] = level_diff(got, want);
      EXPECT_LE(worst, 2.0);
      EXPECT_LE(mean, 0.5);
    }
  }
}

// Training: resized_crop(box, 16 x 16) + hflip + ToTensor + Normalize for a fixed box.
TEST(ImageTransform, CropResizeFlipAsTorchvision) {
  for (const auto& e : manifest()) {
    const std::string file = e["file"];
    SCOPED_TRACE(file);
    if (!can_decode(file)) continue;
    const std::string b = bytes_of(fixtures() / file);
    RgbImage img;
    ASSERT_TRUE(decode_image(b, file, e["width"], e["height"], &img).ok());
    ResampleJob j;
    j.region = {e["box"][1], e["box"][0], e["box"][3], e["box"][2]};  // [top, left, h, w]
    j.virtual_w = j.virtual_h = j.out_w = j.out_h = 16;
    j.flip = true;
    std::vector<float> got(3 * 16 * 16);
    resample_normalize(img, j, kImagenetMean, kImagenetStd, got.data());
    const std::vector<float> want = floats_of(fixtures() / (stem(file) + ".crop.f32"));
    const auto [worst, mean] = level_diff(got, want);
    EXPECT_LE(worst, 2.0);
    EXPECT_LE(mean, 0.5);
    // Training decodes a JPEG at 1/2 when the box still covers the output there (most of these
    // boxes do): the box mapped to the half-size image and resampled. The DCT's box-like
    // halving, PIL's triangle filter and the box's rounding to half-size pixels differ on fine
    // detail: the fixtures' noise block changes completely with a half-pixel shift. The bound
    // still tells a right crop from a wrong one (the same box mirrored is twice as far).
    auto head = read_image_header(b, file);
    ASSERT_TRUE(head.ok());
    if (jpeg_scaled_size(*head, (16 * head->width + j.region.w - 1) / j.region.w,
                         (16 * head->height + j.region.h - 1) / j.region.h)
            .width == head->width)
      continue;  // decoded at full size: checked above
    ImageFolderReader reader({}, {16, 16, /*augment=*/true, /*scaled_decode=*/true});
    ASSERT_TRUE(reader.transform(b, file, *head, j, got.data()).ok());
    const auto scaled = level_diff(got, want);
    j.flip = false;
    ASSERT_TRUE(reader.transform(b, file, *head, j, got.data()).ok());
    const auto mirrored = level_diff(got, want);
    std::printf(
        "%s: a crop decoded at 1/2 against torchvision's: %.1f levels on average, %.0f at "
        "most (mirrored: %.1f on average)\n",
        file.c_str(), scaled.second, scaled.first, mirrored.second);
    EXPECT_LE(scaled.second, 12.0);
    EXPECT_GT(mirrored.second, 2 * scaled.second);
  }
}

// The flip is an exact mirror of the unflipped output.
TEST(ImageTransform, FlipMirrorsExactly) {
  RgbImage img;
  img.width = 37;
  img.height = 23;
  img.rgb.resize(37 * 23 * 3);
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>(i * 37 % 251);
  ResampleJob j;
  j.region = {3, 2, 30, 19};
  j.virtual_w = j.out_w = 13;
  j.virtual_h = j.out_h = 11;
  std::vector<float> plain(3 * 11 * 13), flipped(3 * 11 * 13);
  resample_normalize(img, j, kImagenetMean, kImagenetStd, plain.data());
  j.flip = true;
  resample_normalize(img, j, kImagenetMean, kImagenetStd, flipped.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 11; ++y)
      for (int x = 0; x < 13; ++x)
        ASSERT_EQ(plain[(c * 11 + y) * 13 + x], flipped[(c * 11 + y) * 13 + (12 - x)]);
  EXPECT_NE(plain, flipped);
}

// torchvision's RandomResizedCrop.get_params: every box inside the image, and the boxes'
// distribution as torchvision's for sizes from square to extreme (crop_stats.json: torchvision's
// mean area share, mean aspect ratio and share of centred fallback boxes over 20000 draws; the
// same statistics here over 20000 draws of another random stream, within a few standard errors).
TEST(ImageTransform, RandomResizedCropAsTorchvision) {
  const auto stats = nlohmann::json::parse(bytes_of(fixtures() / "crop_stats.json"));
  Rng rng(7);
  for (const auto& st : stats) {
    const int w = st["width"], h = st["height"];
    SCOPED_TRACE(std::to_string(w) + " x " + std::to_string(h));
    const int n = 20000;
    double share = 0, ratio = 0, centred = 0;
    for (int k = 0; k < n; ++k) {
      const CropBox b = random_resized_crop(w, h, rng);
      ASSERT_TRUE(b.x >= 0 && b.y >= 0 && b.w >= 1 && b.h >= 1);
      ASSERT_LE(b.x + b.w, w);
      ASSERT_LE(b.y + b.h, h);
      share += static_cast<double>(b.w) * b.h / (static_cast<double>(w) * h);
      ratio += static_cast<double>(b.w) / b.h;
      centred += b.x == (w - b.w) / 2 && b.y == (h - b.h) / 2 ? 1 : 0;
    }
    EXPECT_NEAR(share / n, st["mean_share"].get<double>(), 0.012);
    EXPECT_NEAR(ratio / n, st["mean_ratio"].get<double>(), 0.012);
    EXPECT_NEAR(centred / n, st["centred"].get<double>(), 0.015);
  }
  // A 1 x 2000 image falls back to the centred box at ratio 3/4: 1 x round(1 / 0.75) = 1 x 1.
  const CropBox thin = random_resized_crop(1, 2000, rng);
  EXPECT_EQ(thin.w, 1);
  EXPECT_EQ(thin.h, 1);
  EXPECT_EQ(thin.y, (2000 - 1) / 2);
}

// torchvision's Resize(256) + CenterCrop(224) geometry (worked out from its code: the shorter
// side to 256, the longer int(256 * long / short); crop offsets int(round(d / 2)), Python's
// round: half to even).
TEST(ImageTransform, EvaluationGeometry) {
  EXPECT_EQ(eval_resize_side(224), 256);
  EXPECT_EQ(eval_resize_side(16), 18);
  EvalGeometry g = eval_geometry(500, 375, 256, 224, 224);
  EXPECT_EQ(g.resized_w, 341);  // int(256 * 500 / 375) = int(341.33)
  EXPECT_EQ(g.resized_h, 256);
  EXPECT_EQ(g.window_x, 58);  // round(58.5) = 58
  EXPECT_EQ(g.window_y, 16);
  g = eval_geometry(375, 500, 256, 224, 224);
  EXPECT_EQ(g.resized_w, 256);
  EXPECT_EQ(g.resized_h, 341);
  EXPECT_EQ(g.window_y, 58);
  g = eval_geometry(333, 250, 256, 224, 224);  // int(256 * 333 / 250) = int(340.99) = 340
  EXPECT_EQ(g.resized_w, 340);
  EXPECT_EQ(g.window_x, 58);
  g = eval_geometry(451, 300, 256, 224, 224);  // 384.85 -> 384; round(80.0) = 80
  EXPECT_EQ(g.resized_w, 384);
  EXPECT_EQ(g.window_x, 80);
}

// Files that are not images, damaged ones and empty ones: errors that name the file.
TEST(ImageDecode, BadFilesNameThemselves) {
  RgbImage img;
  Status st = decode_image("hello, world", "notes.jpg", 0, 0, &img);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("image 'notes.jpg': neither JPEG nor PNG data"),
            std::string::npos)
      << st.error().message();
  st = decode_image("", "empty.png", 0, 0, &img);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("an empty file"), std::string::npos);
  const std::string jpeg = bytes_of(fixtures() / "rgb420.jpg");
  const std::string png = bytes_of(fixtures() / "rgb.png");
  if (jpeg_decoding_available()) {
    // Cut in its entropy-coded data: libjpeg-turbo decodes what is there and warns.
    st = decode_image(jpeg.substr(0, jpeg.size() / 2), "cut.jpg", 0, 0, &img);
    if (st.ok())
      EXPECT_NE(img.warning, "");
    else
      EXPECT_NE(st.error().message().find("cut.jpg"), std::string::npos);
    // Cut in its header: an error.
    st = decode_image(jpeg.substr(0, 40), "head.jpg", 0, 0, &img);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find("image 'head.jpg': not a readable JPEG"), std::string::npos)
        << st.error().message();
  } else {
    st = decode_image(jpeg, "a.jpg", 0, 0, &img);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find("built without libjpeg-turbo"), std::string::npos);
  }
  if (png_decoding_available()) {
    st = decode_image(png.substr(0, png.size() / 2), "cut.png", 0, 0, &img);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find("image 'cut.png'"), std::string::npos);
  }
}

// The DCT scale chosen: the smallest of 1/8, 1/4, 1/2, 1 that keeps the minimum.
TEST(ImageDecode, JpegScaleChoice) {
  const ImageHeader full{ImageCodec::kJpeg, 500, 375};
  EXPECT_EQ(jpeg_scaled_size(full, 0, 0).width, 63);  // ceil(500 / 8)
  EXPECT_EQ(jpeg_scaled_size(full, 100, 40).width, 125);
  EXPECT_EQ(jpeg_scaled_size(full, 126, 40).width, 250);
  EXPECT_EQ(jpeg_scaled_size(full, 200, 188).width, 250);  // ceil(375 / 2) = 188 is enough
  EXPECT_EQ(jpeg_scaled_size(full, 200, 188).height, 188);
  EXPECT_EQ(jpeg_scaled_size(full, 200, 189).height, 375);
  EXPECT_EQ(jpeg_scaled_size(full, 251, 10).width, 500);
}

}  // namespace
}  // namespace dltune::engine
