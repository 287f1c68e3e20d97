// Text files as byte-level language-modelling data.
#include <cmath>

#include "common/paths.h"
#include "engine/data/dataset.h"
#include "recipes/recipe.h"

namespace dltune::engine {

Result<Dataset> read_text(const std::string& path, int64_t context, double heldout_fraction,
                          bool train) {
  auto text = paths::read_file(path);
  if (!text) return text.error();
  const auto size = static_cast<int64_t>(text->size());
  const int64_t held = recipes::text_heldout_bytes(size, heldout_fraction);
  const int64_t begin = train ? 0 : size - held, end = train ? size - held : size;
  const int64_t stride = recipes::text_window_stride(context);
  // A window needs context + 1 bytes: the inputs and, shifted by one, the targets.
  const int64_t span = end - begin;
  if (span < context + 1)
    return invalid_input("text file '" + path + "' has " + std::to_string(span) + " bytes in its " +
                         (train ? "training" : "held-out") + " part, fewer than one sample of " +
                         std::to_string(context + 1) +
                         "; use a longer file, a shorter context or another held-out share");
  Dataset d;
  d.name = "text";
  d.shape = {context};
  d.classes = 256;
  d.label_width = context;
  d.size = recipes::text_windows(span, context);
  d.images.resize(static_cast<size_t>(d.size * context));
  d.labels.resize(static_cast<size_t>(d.size * context));
  const auto* bytes = reinterpret_cast<const unsigned char*>(text->data());
  for (int64_t i = 0; i < d.size; ++i) {
    const unsigned char* w = bytes + begin + i * stride;
    for (int64_t t = 0; t < context; ++t) {
      d.images[static_cast<size_t>(i * context + t)] = static_cast<float>(w[t]);
      d.labels[static_cast<size_t>(i * context + t)] = w[t + 1];
    }
  }
  return d;
}

Result<double> unigram_entropy_bits(const std::string& path) {
  auto text = paths::read_file(path);
  if (!text) return text.error();
  if (text->empty()) return invalid_input("text file '" + path + "' is empty");
  double count[256] = {};
  for (unsigned char c : *text) count[c] += 1.0;
  double h = 0.0;
  const double n = static_cast<double>(text->size());
  for (double c : count)
    if (c > 0) h -= c / n * std::log2(c / n);
  return h;
}

}  // namespace dltune::engine
