// The image transforms of ImageNet training, as torchvision 0.14 does them on PIL images:
//
//   training:   RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3)), RandomHorizontalFlip,
//               ToTensor, Normalize(ImageNet mean, std)
//   evaluation: Resize(round(size / 0.875)) of the shorter side, CenterCrop(size), ToTensor,
//               Normalize
//
// Both are one operation here: resample a region of the decoded image as if it were resized
// to a "virtual" size, and write a window of that virtual image as normalised floats (C, H, W),
// mirrored or not. Training: the region is the random crop box, the virtual size the output;
// evaluation: the region is the whole image, the virtual size the resized one and the window
// its centre. The resampling is PIL's bilinear filter with antialiasing (ImagingResample: a
// triangle of support max(1, scale) around each output pixel's centre, weights normalised,
// taps clamped to the region: PIL crops first, then resizes), horizontal pass then vertical,
// in float (PIL rounds to 8 bits between the passes: the results differ by at most a level or
// so).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/rng.h"
#include "engine/data/image_decode.h"

namespace dltune::engine {

// ImageNet's channel statistics, as torchvision's reference scripts normalise with.
inline constexpr float kImagenetMean[3] = {0.485f, 0.456f, 0.406f};
inline constexpr float kImagenetStd[3] = {0.229f, 0.224f, 0.225f};

struct CropBox {
  int x = 0, y = 0, w = 0, h = 0;  // in the image's pixels; w, h >= 1
};

// torchvision's RandomResizedCrop.get_params with scale (0.08, 1) and ratio (3/4, 4/3): ten
// tries of an area share uniform in the scale range and an aspect ratio log-uniform in the
// ratio range, the first whose rounded box fits; else the centred box of the image at the
// nearest allowed ratio. Always within [0, width) x [0, height). `rng` supplies the draws
// (the same distribution as torchvision's, not its random stream).
CropBox random_resized_crop(int width, int height, Rng& rng);

// Evaluation: the size torchvision's Resize(shorter) gives an image (the shorter side =
// `shorter`, the longer int(shorter * long / short)), and CenterCrop's window of out_w x out_h
// in it (its offsets int(round((side - out) / 2))).
struct EvalGeometry {
  int resized_w = 0, resized_h = 0;
  int window_x = 0, window_y = 0;
};
EvalGeometry eval_geometry(int width, int height, int shorter, int out_w, int out_h);
// The side the evaluation resizes the shorter side to for crops of `out`: round(out / 0.875)
// (256 for 224).
int eval_resize_side(int out);

// One resampling job (see the file's comment): `region` of the image, resized to
// virtual_w x virtual_h, of which the window at (window_x, window_y) of out_w x out_h is
// written, mirrored left-right when `flip`.
struct ResampleJob {
  CropBox region;
  int virtual_w = 0, virtual_h = 0;
  int window_x = 0, window_y = 0;
  int out_w = 0, out_h = 0;
  bool flip = false;
};

// Writes the job's window of `img` to `out` (3, out_h, out_w) as (v / 255 - mean[c]) / std[c].
// The region must lie within the image and the window within the virtual size (checked:
// DLTUNE_CHECK).
void resample_normalize(const RgbImage& img, const ResampleJob& job, const float mean[3],
                        const float std[3], float* out);

}  // namespace dltune::engine
