#include "engine/graph/kernel_select.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "common/stats.h"
#include "engine/core/rng.h"
#include "recipes/model/ops.h"

namespace dltune::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void fill_normal(Buffer& b, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = 0; i < b.size(); ++i) b[i] = rng.normal();
}

// What makes two nodes' timings interchangeable: the op with every attribute, its shapes, and
// which input gradients its backward computes (none for the model's input: a first convolution
// skips its data gradient, half of its backward).
std::string shape_signature(Model& m, int node) {
  const Op& op = m.op(node);
  const recipes::Node& n = m.graph().nodes[static_cast<size_t>(node)];
  std::string s = recipes::describe_op(n.op, n.attrs, true) + " in";
  const std::vector<int>& sources = m.info().inputs[static_cast<size_t>(node)];
  for (size_t k = 0; k < op.in_shapes().size(); ++k) {
    for (int64_t d : op.in_shapes()[k]) s += " " + std::to_string(d);
    s += k < sources.size() && sources[k] < 0 ? " (no gradient);" : ";";
  }
  return s;
}

}  // namespace

Result<std::vector<KernelTiming>> time_node_kernels(Model& m, int node,
                                                    const KernelSelectOptions& opt) {
  if (node < 0 || node >= m.num_nodes())
    return invalid_input("kernel timing: node " + std::to_string(node) + " out of range");
  if (opt.batch < 1 || opt.batch > m.max_batch())
    return invalid_input("kernel timing: batch " + std::to_string(opt.batch) +
                         " outside the model's reserved 1.." + std::to_string(m.max_batch()));
  const Op& op = m.op(node);
  const std::vector<std::string> kernels = op.kernels();
  // One twin of the node's op per candidate, each reserved once: switching kernels between
  // passes would re-allocate (and page-fault) their buffers inside the timing.
  std::vector<std::unique_ptr<Op>> twins;
  int64_t ws = 1;
  for (const auto& k : kernels) {
    twins.push_back(make_cpu_op(op.node().op));
    DLTUNE_TRY(twins.back()->twin_of(op, k));
    twins.back()->reserve(m.max_batch());
    ws = std::max(ws, twins.back()->workspace_floats(opt.batch));
  }
  Buffer workspace(static_cast<size_t>(ws));
  Buffer dout(static_cast<size_t>(opt.batch * recipes::numel(op.out_shape())));
  fill_normal(dout, 11 + static_cast<uint64_t>(node));
  auto pass = [&](size_t k) {
    const auto t0 = Clock::now();
    m.forward_node(node, opt.batch, workspace.data(), twins[k].get());
    m.backward_node(node, opt.batch, dout.data(), workspace.data(), twins[k].get());
    return seconds_since(t0);
  };
  std::vector<std::vector<double>> samples(kernels.size());
  for (size_t k = 0; k < kernels.size(); ++k)
    for (int w = 0; w < opt.warmup; ++w) pass(k);
  for (int r = 0; r < std::max(opt.repeats, 1); ++r) {
    for (size_t j = 0; j < kernels.size(); ++j) {
      const size_t k = (j + static_cast<size_t>(r)) % kernels.size();
      samples[k].push_back(pass(k));
    }
  }
  std::vector<KernelTiming> out;
  for (size_t k = 0; k < kernels.size(); ++k) {
    KernelTiming t;
    t.kernel = kernels[k];
    t.samples = static_cast<int>(samples[k].size());
    t.median_s = stats::median(samples[k]);
    t.min_s = *std::min_element(samples[k].begin(), samples[k].end());
    t.max_s = *std::max_element(samples[k].begin(), samples[k].end());
    out.push_back(t);
  }
  return out;
}

Result<std::vector<NodeKernelChoice>> select_kernels(Model& m, const KernelSelectOptions& opt) {
  const auto t0 = Clock::now();
  if (opt.batch > m.max_batch()) m.reserve(opt.batch);
  Buffer input(static_cast<size_t>(opt.batch * m.input_numel()));
  const bool tokens = m.graph().input_kind == recipes::InputKind::kTokens;
  Rng rng(5);
  for (size_t i = 0; i < input.size(); ++i)
    input[i] = tokens ? static_cast<float>(rng.below(2)) : rng.normal();
  m.forward(input.data(), opt.batch, true, 0, /*update_state=*/false);
  std::vector<NodeKernelChoice> report(static_cast<size_t>(m.num_nodes()));
  std::vector<int> choosing;  // nodes with a choice, largest forward FLOPs first
  for (int i = 0; i < m.num_nodes(); ++i) {
    NodeKernelChoice& c = report[static_cast<size_t>(i)];
    c.node = i;
    c.name = m.graph().nodes[static_cast<size_t>(i)].name;
    c.op = m.op(i).kind();
    c.chosen = m.kernel(i);
    c.reason = "only kernel";
    if (m.kernel_candidates(i).size() >= 2) choosing.push_back(i);
  }
  auto flops = [&](int i) {
    const recipes::Node& n = m.graph().nodes[static_cast<size_t>(i)];
    return recipes::op_flops(n.op, n.attrs, m.op(i).in_shapes(), m.op(i).out_shape());
  };
  std::stable_sort(choosing.begin(), choosing.end(),
                   [&](int a, int b) { return flops(a) > flops(b); });
  std::map<std::string, int> measured;  // op, attributes and shapes -> the node measured
  KernelChoices best;
  for (int i : choosing) {
    NodeKernelChoice& c = report[static_cast<size_t>(i)];
    const std::string same = shape_signature(m, i);
    if (auto it = measured.find(same); it != measured.end()) {
      const NodeKernelChoice& first = report[static_cast<size_t>(it->second)];
      c.chosen = first.chosen;
      c.timings = first.timings;
      c.reason = "as " + first.name + ": same op and shapes";
    } else if (opt.seconds > 0 && seconds_since(t0) > opt.seconds) {
      c.reason = "not measured: the time limit";
      continue;
    } else {
      auto t = time_node_kernels(m, i, opt);
      if (!t) return t.error();
      c.timings = std::move(*t);
      const auto fastest = std::min_element(
          c.timings.begin(), c.timings.end(),
          [](const KernelTiming& a, const KernelTiming& b) { return a.median_s < b.median_s; });
      c.chosen = fastest->kernel;
      c.reason = "fastest of " + std::to_string(c.timings.size()) + " measured";
      measured[same] = i;
    }
    best[c.name] = c.chosen;
  }
  DLTUNE_TRY(m.set_kernels(best));
  return report;
}

KernelChoices choices_of(const std::vector<NodeKernelChoice>& report) {
  KernelChoices k;
  for (const auto& c : report) k[c.name] = c.chosen;
  return k;
}

std::string kernel_report_text(const std::vector<NodeKernelChoice>& report) {
  std::string s;
  char line[512];
  std::snprintf(line, sizeof line, "  %-24s %-10s %-10s  %-40s %s\n", "node", "op", "kernel",
                "each candidate's fwd+bwd (median)", "why");
  s += line;
  for (const auto& c : report) {
    if (c.reason == "only kernel") continue;
    std::string timings;
    for (const auto& t : c.timings) {
      char one[96];
      std::snprintf(one, sizeof one, "%s%s %.3f ms", timings.empty() ? "" : ", ", t.kernel.c_str(),
                    1e3 * t.median_s);
      timings += one;
    }
    std::snprintf(line, sizeof line, "  %-24s %-10s %-10s  %-40s %s\n", c.name.c_str(),
                  c.op.c_str(), c.chosen.c_str(), timings.empty() ? "-" : timings.c_str(),
                  c.reason.c_str());
    s += line;
  }
  return s;
}

nlohmann::json kernel_report_json(const std::vector<NodeKernelChoice>& report) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : report) {
    nlohmann::json timings = nlohmann::json::array();
    for (const auto& t : c.timings) {
      timings.push_back({{"kernel", t.kernel},
                         {"median_ms", 1e3 * t.median_s},
                         {"min_ms", 1e3 * t.min_s},
                         {"max_ms", 1e3 * t.max_s},
                         {"samples", t.samples}});
    }
    out.push_back({{"node", c.name},
                   {"op", c.op},
                   {"kernel", c.chosen},
                   {"reason", c.reason},
                   {"timings", std::move(timings)}});
  }
  return out;
}

}  // namespace dltune::engine
