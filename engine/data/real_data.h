// Real datasets, read on demand sample by sample (recipes/data_layout.h says their layouts):
//
// imagefolder:DIR  folders of JPEG / PNG images per class. Each read() reads the file, decodes
//   it (engine/data/image_decode.h: with JPEG's DCT scaling by 1/2, 1/4 or 1/8 when a training
//   crop still covers the output at that scale, or a held-out image is still twice the resized
//   size), and transforms it (engine/data/image_transform.h): training samples with a
//   random resized crop and a horizontal flip drawn from the sample's seed, held-out ones with
//   the shorter side resized to round(size / 0.875) and the centre crop; both normalised with
//   ImageNet's mean and deviation. Held out: DIR/val (heldout_fraction 0), else the share of the
//   training images heldout_mask() picks with the run's seed.
// tokens:GLOB  llm.c's GPT-2 token shards, memory-mapped. Sample i is a window of T tokens as
//   floats (the model's token ids), its labels the T tokens one further. Held out: the last
//   shard (heldout_fraction 0), else the last share of the windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/image_transform.h"
#include "recipes/data_layout.h"

namespace dltune::engine {

struct ImageFolderOptions {
  int width = 224, height = 224;  // the model's input
  bool augment = true;            // training's transform; false: evaluation's
  // Decode a JPEG at 1/2, 1/4 or 1/8 scale when the crop keeps at least the output size at it.
  bool scaled_decode = true;
};

class ImageFolderReader final : public SampleReader {
 public:
  ImageFolderReader(std::vector<recipes::ImageEntry> images, ImageFolderOptions options)
      : images_(std::move(images)), o_(options) {}
  // x: (3, height, width) normalised; y: the class index. Errors (naming the file): unreadable,
  // not an image, undecodable, a format this build cannot decode.
  Status read(int64_t index, uint64_t seed, float* x, int32_t* y) const override;
  // The transform's geometry for an image of width x height (in its pixels): training's random
  // crop and flip from `rng`, or (rng null, or augment off) evaluation's centre window.
  ResampleJob job(int width, int height, Rng* rng) const;
  // The image in `bytes` (of header `head`) through `job` (its region in the full-size image's
  // pixels) into x: decoded at the smallest scale the job allows (scaled_decode), the region
  // mapped to that scale, resampled and normalised. read() = the file, its header, job(), this.
  Status transform(std::string_view bytes, const std::string& name, const ImageHeader& head,
                   ResampleJob job, float* x) const;
  const std::vector<recipes::ImageEntry>& images() const { return images_; }

 private:
  std::vector<recipes::ImageEntry> images_;
  ImageFolderOptions o_;
};

// The training (`train`) or held-out images of "imagefolder:DIR" for inputs of `shape`
// (3, H, W). Errors (invalid_input / not_found): the layout's (recipes/data_layout.h), image files
// of a format dltune does not read, a format this build cannot decode, no DIR/val for
// heldout_fraction 0, a share that leaves either side empty, a shape that is not (3, H, W).
Result<Dataset> load_imagefolder(const std::string& dir, bool train, const recipes::Shape& shape,
                                 double heldout_fraction, uint64_t seed, bool scaled_decode = true);

// The training or held-out windows of "tokens:GLOB" for inputs of `shape` (T). Errors: the
// shards' (a wrong magic number or version, a truncated shard: recipes/data_layout.h), a part
// without a window, a shape that is not (T).
Result<Dataset> load_tokens(const std::string& glob, bool train, const recipes::Shape& shape,
                            double heldout_fraction);

}  // namespace dltune::engine
