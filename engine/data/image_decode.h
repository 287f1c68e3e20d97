// Decoding of JPEG and PNG files to 8-bit RGB: JPEG with libjpeg-turbo's TurboJPEG API (with
// its DCT-domain scaling by 1/2, 1/4 or 1/8 when the image is to be shrunk a lot anyway), PNG
// with libpng's simplified API. Each is optional at build time (DLTUNE_WITH_JPEG,
// DLTUNE_WITH_PNG): without it, decoding that format fails with an error that says so.
//
// What matches PIL (which torchvision's ImageFolder decodes with): JPEG at full size is
// libjpeg-turbo's default (accurate integer IDCT, fancy upsampling), as PIL's; grayscale
// becomes R = G = B; CMYK JPEGs are taken as Adobe's inverted CMYK and converted as PIL's
// convert("RGB") does. PNG: palette and grayscale are expanded and alpha is dropped, as PIL's
// convert("RGB"); 16-bit PNGs are reduced to 8 bits by libpng (PIL differs there).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dltune::engine {

enum class ImageCodec { kJpeg, kPng };

struct ImageHeader {
  ImageCodec codec = ImageCodec::kJpeg;
  int width = 0, height = 0;
};

// Whether this build decodes the format.
bool jpeg_decoding_available();
bool png_decoding_available();
// One sentence for an error: "this dltune was built without libjpeg-turbo (...): install ... and
// rebuild" / the same for libpng.
std::string decoding_unavailable(ImageCodec codec);

// The format (by content: JPEG starts FF D8 FF, PNG with its 8-byte signature) and size of the
// image in `bytes`. Errors (invalid_input, naming `name`): neither format, a damaged header, a
// build without the format's decoder, more than 2^28 pixels or 65535 a side.
Result<ImageHeader> read_image_header(std::string_view bytes, const std::string& name);

struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // (height, width, 3)
  std::string warning;       // the decoder's warning (a truncated JPEG still decodes), or ""
};

// Decodes `bytes` into `out`. A JPEG is decoded at the smallest of the scales 1/8, 1/4, 1/2
// and 1 that keeps it at least `min_width` x `min_height` (0 x 0: the smallest; pass the
// full size for no scaling); a PNG always at full size. Errors (invalid_input, naming `name`):
// those of read_image_header, data the decoder cannot read; `out` is then unspecified.
Status decode_image(std::string_view bytes, const std::string& name, int min_width, int min_height,
                    RgbImage* out);

// The size a JPEG of width x height is decoded at for the minimum given (decode_image's rule).
ImageHeader jpeg_scaled_size(const ImageHeader& full, int min_width, int min_height);

}  // namespace dltune::engine
