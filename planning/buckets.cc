#include "planning/buckets.h"

#include <algorithm>
#include <limits>

namespace dltune::planning {

std::vector<GradBucket> gradient_buckets(const recipes::GraphInfo& info, uint64_t bucket_bytes) {
  const size_t nodes = info.node_params.size();
  // final_after: each tensor is final after its earliest reader.
  std::vector<int> earliest(info.params.size(), std::numeric_limits<int>::max());
  for (size_t i = 0; i < nodes; ++i) {
    for (int t : info.node_params[i]) {
      earliest[static_cast<size_t>(t)] =
          std::min(earliest[static_cast<size_t>(t)], static_cast<int>(i));
    }
  }
  std::vector<std::vector<int>> final_after(nodes);
  for (size_t t = 0; t < earliest.size(); ++t) {
    if (earliest[t] != std::numeric_limits<int>::max()) {
      final_after[static_cast<size_t>(earliest[t])].push_back(static_cast<int>(t));
    }
  }
  const int64_t limit = static_cast<int64_t>(std::max<uint64_t>(bucket_bytes, 4) / 4);
  std::vector<GradBucket> out;
  GradBucket cur;
  auto close = [&] {
    if (!cur.tensors.empty()) out.push_back(std::move(cur));
    cur = GradBucket{};
  };
  for (int i = static_cast<int>(nodes) - 1; i >= 0; --i) {
    std::vector<int> fin = final_after[static_cast<size_t>(i)];
    std::sort(fin.begin(), fin.end(), [&](int a, int b) {
      return info.params[static_cast<size_t>(a)].offset >
             info.params[static_cast<size_t>(b)].offset;
    });
    for (int t : fin) {
      const recipes::TensorInfo& p = info.params[static_cast<size_t>(t)];
      const int64_t e = p.offset + recipes::numel(p.shape);
      if (!cur.tensors.empty() && e != cur.begin) close();
      if (cur.tensors.empty()) cur.end = e;
      cur.begin = p.offset;
      cur.tensors.push_back(t);
      cur.ready_after = i;
    }
    if (!cur.tensors.empty() && cur.end - cur.begin >= limit) close();
  }
  close();
  return out;
}

}  // namespace dltune::planning
