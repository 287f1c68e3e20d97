// imagefolder data (engine/data/real_data.h).
#include <algorithm>
#include <cmath>

#include "common/paths.h"
#include "engine/data/image_decode.h"
#include "engine/data/real_data.h"

namespace dltune::engine {
namespace {

// `box` of an image of full_w x full_h in the pixels of its decoded size dw x dh.
CropBox scale_box(const CropBox& box, int full_w, int full_h, int dw, int dh) {
  if (dw == full_w && dh == full_h) return box;
  const double sx = static_cast<double>(dw) / full_w, sy = static_cast<double>(dh) / full_h;
  CropBox b;
  b.x = std::clamp(static_cast<int>(std::lround(box.x * sx)), 0, dw - 1);
  b.y = std::clamp(static_cast<int>(std::lround(box.y * sy)), 0, dh - 1);
  b.w = std::clamp(static_cast<int>(std::lround((box.x + box.w) * sx)) - b.x, 1, dw - b.x);
  b.h = std::clamp(static_cast<int>(std::lround((box.y + box.h) * sy)) - b.y, 1, dh - b.y);
  return b;
}

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

Status check_decodable(const recipes::ImageFolderIndex& idx, const std::string& dir) {
  if (!idx.unsupported.empty())
    return invalid_input(
        "image folder '" + dir + "' holds " + std::to_string(idx.unsupported.size()) +
        " image(s) in a format dltune does not read (first: '" + idx.unsupported.front() +
        "'); dltune reads JPEG and PNG: convert them, or move them out "
        "(`dltune data check` lists them)");
  for (const recipes::ImageEntry& e : idx.images) {
    const bool jpeg = recipes::image_ext(e.path) == recipes::ImageExt::kJpeg;
    if (jpeg ? !jpeg_decoding_available() : !png_decoding_available())
      return invalid_input("image folder '" + dir + "' holds " + (jpeg ? "JPEG" : "PNG") +
                           " images (first: '" + e.path + "'), but " +
                           decoding_unavailable(jpeg ? ImageCodec::kJpeg : ImageCodec::kPng));
  }
  return ok_status();
}

}  // namespace

ResampleJob ImageFolderReader::job(int width, int height, Rng* rng) const {
  ResampleJob j;
  j.out_w = o_.width;
  j.out_h = o_.height;
  if (o_.augment && rng != nullptr) {
    j.region = random_resized_crop(width, height, *rng);
    j.virtual_w = o_.width;
    j.virtual_h = o_.height;
    j.flip = rng->uniform() < 0.5f;
    return j;
  }
  const EvalGeometry g = eval_geometry(
      width, height, eval_resize_side(std::min(o_.width, o_.height)), o_.width, o_.height);
  j.region = {0, 0, width, height};
  j.virtual_w = g.resized_w;
  j.virtual_h = g.resized_h;
  j.window_x = g.window_x;
  j.window_y = g.window_y;
  return j;
}

Status ImageFolderReader::read(int64_t index, uint64_t seed, float* x, int32_t* y) const {
  const recipes::ImageEntry& e = images_[static_cast<size_t>(index)];
  if (y) *y = e.label;
  if (!x) return ok_status();
  auto bytes = paths::read_file(e.path);
  if (!bytes) return bytes.error().wrap("reading image");
  auto head = read_image_header(*bytes, e.path);
  if (!head) return head.error();
  Rng rng(seed);
  return transform(*bytes, e.path, *head, job(head->width, head->height, &rng), x);
}

Status ImageFolderReader::transform(std::string_view bytes, const std::string& name,
                                    const ImageHeader& head, ResampleJob j, float* x) const {
  // Training: decoded at least as large as the region must be for the output, ceil(out x full /
  // region) on each side. Evaluation: at least twice the resized image, so that DCT scaling only
  // helps with images several times larger than needed and the result stays torchvision's
  // (the DCT's box-like reduction and PIL's triangle filter differ on fine detail).
  int min_w = head.width, min_h = head.height;
  if (o_.scaled_decode) {
    const int64_t k = o_.augment ? 1 : 2;
    min_w = ceil_div(k * j.virtual_w * head.width, j.region.w);
    min_h = ceil_div(k * j.virtual_h * head.height, j.region.h);
  }
  thread_local RgbImage img;  // keeps its buffer between the images of a loader thread
  DLTUNE_TRY(decode_image(bytes, name, min_w, min_h, &img));
  j.region = scale_box(j.region, head.width, head.height, img.width, img.height);
  resample_normalize(img, j, kImagenetMean, kImagenetStd, x);
  return ok_status();
}

Result<Dataset> load_imagefolder(const std::string& dir, bool train, const recipes::Shape& shape,
                                 double heldout_fraction, uint64_t seed, bool scaled_decode) {
  if (shape.size() != 3 || shape[0] != 3 || shape[1] < 1 || shape[2] < 1)
    return invalid_input("imagefolder data needs a model input of (3, height, width), got " +
                         recipes::describe_shape(shape));
  auto idx = recipes::index_imagefolder(recipes::imagefolder_train_root(dir));
  if (!idx) return idx.error();
  DLTUNE_TRY(check_decodable(*idx, dir));
  std::vector<recipes::ImageEntry> images;
  const auto n = static_cast<int64_t>(idx->images.size());
  if (heldout_fraction <= 0.0) {  // the dataset's own held-out images
    const std::string val = recipes::imagefolder_val_root(dir);
    if (val.empty())
      return invalid_input("image folder '" + dir +
                           "' has no val/ folder beside train/ to evaluate on; give data.heldout "
                           "a share such as 0.1 to hold out training images instead");
    if (train) {
      images = std::move(idx->images);
    } else {
      auto v = recipes::index_imagefolder(val, &idx->classes);
      if (!v) return v.error();
      DLTUNE_TRY(check_decodable(*v, val));
      images = std::move(v->images);
      if (images.empty()) return invalid_input("image folder '" + val + "' holds no image");
    }
  } else {
    const int64_t held = heldout_count(n, heldout_fraction);
    if (held < 1 || held >= n)
      return invalid_input("image folder '" + dir + "': a held-out share of " +
                           std::to_string(heldout_fraction) + " of its " + std::to_string(n) +
                           " images leaves a side without images; add images or change "
                           "data.heldout");
    const std::vector<char> mask = heldout_mask(n, held, seed);
    for (int64_t i = 0; i < n; ++i)
      if ((mask[static_cast<size_t>(i)] != 0) != train)
        images.push_back(std::move(idx->images[static_cast<size_t>(i)]));
  }
  Dataset d;
  d.name = train ? "imagefolder" : "imagefolder (held out)";
  d.shape = shape;
  d.classes = static_cast<int>(idx->classes.size());
  d.size = static_cast<int64_t>(images.size());
  ImageFolderOptions o;
  o.height = static_cast<int>(shape[1]);
  o.width = static_cast<int>(shape[2]);
  o.augment = train;
  o.scaled_decode = scaled_decode;
  d.reader = std::make_shared<ImageFolderReader>(std::move(images), o);
  return d;
}

}  // namespace dltune::engine
