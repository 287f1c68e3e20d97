#include "engine/train/train_data.h"

namespace dltune::engine {

Status load_train_data(const TrainConfig& c, Dataset* train, Dataset* heldout, int64_t train_size) {
  auto graph = model_graph(c);
  if (!graph) return graph.error();
  const recipes::Shape& shape = graph->input;
  // Sources that hold out their own part (the last share of a file or shards, a val/ folder, a
  // share of the images picked by the seed) rather than a share split off after loading.
  const bool own_heldout = c.data.starts_with("text:") || c.data.starts_with("imagefolder:") ||
                           c.data.starts_with("tokens:");
  const int64_t size = train_size >= 0 ? train_size : c.train_size;
  auto t = load_dataset(c.data, true, size, c.seed, shape, c.classes, c.heldout_split);
  if (!t) return t.error();
  *train = std::move(*t);
  if (heldout == nullptr) return ok_status();
  *heldout = Dataset{};
  if (own_heldout) {  // e.g. a text file's last share, never overlapping the training windows
    auto h = load_dataset(c.data, false, 0, c.seed, shape, c.classes, c.heldout_split);
    if (!h) return h.error();
    *heldout = std::move(*h);
  } else if (c.heldout_split > 0.0) {  // file data: a share of the training files
    auto h = split_heldout(*train, heldout_count(train->size, c.heldout_split), c.seed);
    if (!h) return h.error().wrap("train config: key 'heldout_split'");
    *heldout = std::move(*h);
  } else if (c.has_heldout()) {
    auto h = load_dataset(c.data, false, c.heldout_size, c.seed, shape, c.classes);
    if (!h) return h.error();
    *heldout = std::move(*h);
  }
  return ok_status();
}

}  // namespace dltune::engine
