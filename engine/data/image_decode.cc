// The one file that picks the JPEG and PNG implementations (DLTUNE_HAVE_JPEG, DLTUNE_HAVE_PNG).
#include "engine/data/image_decode.h"

#include <cstring>
#include <memory>

#include "dltune/config.h"

#if DLTUNE_HAVE_JPEG
#include <turbojpeg.h>
#endif
#if DLTUNE_HAVE_PNG
#include <png.h>
#endif

namespace dltune::engine {
namespace {

bool is_jpeg(std::string_view b) {
  return b.size() >= 3 && static_cast<unsigned char>(b[0]) == 0xff &&
         static_cast<unsigned char>(b[1]) == 0xd8 && static_cast<unsigned char>(b[2]) == 0xff;
}

bool is_png(std::string_view b) {
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return b.size() >= 8 && std::memcmp(b.data(), sig, 8) == 0;
}

uint32_t be32(const unsigned char* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

Error bad(const std::string& name, const std::string& what) {
  return invalid_input("image '" + name + "': " + what);
}

// Larger images are refused rather than decoded (a damaged or hostile header must not make a
// loader thread allocate gigabytes): 2^28 pixels, 768 MiB of RGB.
constexpr int64_t kMaxPixels = int64_t{1} << 28;

Status check_size(const std::string& name, const char* format, int64_t w, int64_t h) {
  if (w < 1 || h < 1 || w > 65535 || h > 65535 || w * h > kMaxPixels)
    return bad(name, std::string("a ") + format + " of " + std::to_string(w) + " x " +
                         std::to_string(h) + " pixels: dltune decodes images of at most " +
                         std::to_string(kMaxPixels) + " pixels (65535 a side)");
  return ok_status();
}

#if DLTUNE_HAVE_JPEG
// PIL's MULDIV255: round(a * b / 255) in integers.
int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

struct TjDeleter {
  void operator()(void* h) const { tjDestroy(h); }
};

// One decompressor per thread (creating one costs more than decoding a thumbnail).
tjhandle decompressor() {
  thread_local std::unique_ptr<void, TjDeleter> handle(tjInitDecompress());
  return handle.get();
}

Result<ImageHeader> jpeg_header(std::string_view b, const std::string& name, int* colorspace) {
  int w = 0, h = 0, subsamp = 0, cs = 0;
  tjhandle tj = decompressor();
  if (tj == nullptr) return internal_error("cannot create a TurboJPEG decompressor");
  // libjpeg-turbo 2.1 "succeeds" on a file cut before its frame header (a warning: premature
  // end), leaving the size unset: a size of 0 says so.
  if (tjDecompressHeader3(tj, reinterpret_cast<const unsigned char*>(b.data()), b.size(), &w, &h,
                          &subsamp, &cs) != 0 ||
      w < 1 || h < 1)
    return bad(name, std::string("not a readable JPEG: ") + tjGetErrorStr2(tj));
  DLTUNE_TRY(check_size(name, "JPEG", w, h));
  if (colorspace) *colorspace = cs;
  return ImageHeader{ImageCodec::kJpeg, w, h};
}

Status jpeg_decode(std::string_view b, const std::string& name, int min_w, int min_h,
                   RgbImage* out) {
  int cs = 0;
  auto head = jpeg_header(b, name, &cs);
  if (!head) return head.error();
  const ImageHeader size = jpeg_scaled_size(*head, min_w, min_h);
  const bool cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
  const size_t pixels = static_cast<size_t>(size.width) * size.height;
  std::vector<uint8_t> buf(cmyk ? pixels * 4 : 0);
  out->rgb.resize(pixels * 3);  // reuses the caller's buffer when large enough
  tjhandle tj = decompressor();
  const int rc = tjDecompress2(tj, reinterpret_cast<const unsigned char*>(b.data()), b.size(),
                               cmyk ? buf.data() : out->rgb.data(), size.width, 0, size.height,
                               cmyk ? TJPF_CMYK : TJPF_RGB, 0);
  out->warning.clear();
  if (rc != 0) {
    if (tjGetErrorCode(tj) != TJERR_WARNING)
      return bad(name, std::string("cannot decode the JPEG: ") + tjGetErrorStr2(tj));
    out->warning = tjGetErrorStr2(tj);  // e.g. "Premature end of JPEG file": still an image
  }
  out->width = size.width;
  out->height = size.height;
  if (!cmyk) return ok_status();
  // Adobe's inverted CMYK (what libjpeg gives): k' = 255 - k is the ink; PIL's cmyk2rgb then
  // gives R = (255 - K) - (C (255 - K)) / 255 with C = 255 - c, K = 255 - k.
  for (size_t i = 0; i < pixels; ++i) {
    const int nk = buf[4 * i + 3];
    for (int c = 0; c < 3; ++c)
      out->rgb[3 * i + c] = static_cast<uint8_t>(nk - muldiv255(255 - buf[4 * i + c], nk));
  }
  return ok_status();
}
#endif

#if DLTUNE_HAVE_PNG
Status png_decode(std::string_view b, const std::string& name, RgbImage* out) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, b.data(), b.size()))
    return bad(name, std::string("not a readable PNG: ") + img.message);
  img.format = PNG_FORMAT_RGBA;  // then drop alpha: PIL's convert("RGB") does not composite
  std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, rgba.data(), 0, nullptr)) {
    const std::string why = img.message;
    png_image_free(&img);
    return bad(name, "cannot decode the PNG: " + why);
  }
  out->warning = (img.warning_or_error & PNG_IMAGE_WARNING) ? img.message : "";
  out->width = static_cast<int>(img.width);
  out->height = static_cast<int>(img.height);
  out->rgb.resize(static_cast<size_t>(out->width) * out->height * 3);
  for (size_t i = 0, n = out->rgb.size() / 3; i < n; ++i)
    std::memcpy(&out->rgb[3 * i], &rgba[4 * i], 3);
  png_image_free(&img);
  return ok_status();
}
#endif

}  // namespace

bool jpeg_decoding_available() { return DLTUNE_HAVE_JPEG != 0; }
bool png_decoding_available() { return DLTUNE_HAVE_PNG != 0; }

std::string decoding_unavailable(ImageCodec codec) {
  return codec == ImageCodec::kJpeg
             ? "this dltune was built without libjpeg-turbo (DLTUNE_WITH_JPEG): it cannot decode "
               "JPEG images; install libturbojpeg0-dev and rebuild"
             : "this dltune was built without libpng (DLTUNE_WITH_PNG): it cannot decode PNG "
               "images; install libpng-dev and rebuild";
}

ImageHeader jpeg_scaled_size(const ImageHeader& full, int min_w, int min_h) {
  // TurboJPEG's scaled sizes round up: ceil(side * num / denom) (TJSCALED).
  ImageHeader s = full;
  for (int denom : {8, 4, 2}) {
    const int w = (full.width + denom - 1) / denom, h = (full.height + denom - 1) / denom;
    if (w >= min_w && h >= min_h) {
      s.width = w;
      s.height = h;
      return s;
    }
  }
  return s;
}

Result<ImageHeader> read_image_header(std::string_view b, const std::string& name) {
  if (is_png(b)) {
    // The IHDR chunk comes first: length, "IHDR", width, height (big-endian).
    const auto* p = reinterpret_cast<const unsigned char*>(b.data());
    if (b.size() < 24 || std::memcmp(p + 12, "IHDR", 4) != 0)
      return bad(name, "a PNG without its IHDR header (truncated?)");
    if (!png_decoding_available()) return bad(name, decoding_unavailable(ImageCodec::kPng));
    const auto w = static_cast<int64_t>(be32(p + 16)), h = static_cast<int64_t>(be32(p + 20));
    DLTUNE_TRY(check_size(name, "PNG", w, h));
    return ImageHeader{ImageCodec::kPng, static_cast<int>(w), static_cast<int>(h)};
  }
  if (is_jpeg(b)) {
#if DLTUNE_HAVE_JPEG
    return jpeg_header(b, name, nullptr);
#else
    return bad(name, decoding_unavailable(ImageCodec::kJpeg));
#endif
  }
  return bad(name, b.empty() ? "an empty file"
                             : "neither JPEG nor PNG data (whatever its name says); dltune "
                               "reads JPEG and PNG: convert it, or remove it");
}

Status decode_image(std::string_view b, const std::string& name, int min_w, int min_h,
                    RgbImage* out) {
  auto head = read_image_header(b, name);
  if (!head) return head.error();
#if DLTUNE_HAVE_JPEG
  if (head->codec == ImageCodec::kJpeg) return jpeg_decode(b, name, min_w, min_h, out);
#endif
#if DLTUNE_HAVE_PNG
  if (head->codec == ImageCodec::kPng) return png_decode(b, name, out);
#endif
  (void)min_w;
  (void)min_h;
  (void)out;
  return bad(name, decoding_unavailable(head->codec));  // read_image_header said so already
}

}  // namespace dltune::engine
