// GPT-2's architecture (Radford et al. 2019, as in nanoGPT): token and position embeddings,
// pre-norm blocks of causal self-attention and a GELU MLP, each added to the residual stream, a
// final layer norm and a language-model head tied to the token embedding. Initialisation follows
// GPT-2: weights N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 x blocks)), biases 0.
//
//   input (T) token ids
//   wte  (T, C)  ->  wpe (T, C)  ->  blocks  ->  ln_f (T, C)  ->  lm_head (T, vocab)
//   block h.i:  x + attn.c_proj(attention(attn.c_attn(ln_1(x))))     c_attn: C -> 3C
//               x + mlp.c_proj(gelu(mlp.c_fc(ln_2(x))))               c_fc: C -> 4C
#include <cmath>

#include "recipes/model/builtins_internal.h"

namespace dltune::recipes::internal {

Graph gpt_graph(const BuiltinOptions& o) {
  Graph g;
  g.input = o.input;
  g.input_kind = InputKind::kTokens;
  GraphBuilder b(g);
  const int64_t C = o.width;
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(o.blocks));
  auto lin = [&](const std::string& name, const std::string& from, int64_t out, double std) {
    OpAttrs a;
    a.out = out;
    a.init = "normal";
    a.std = std;
    return b.add(name, OpKind::kLinear, a, {from});
  };
  OpAttrs emb;
  emb.vocab = o.vocab;
  emb.out = C;
  emb.init = "normal";
  emb.std = 0.02;
  std::string x = b.add("wte", OpKind::kEmbedding, emb, {kGraphInput});
  OpAttrs pos;
  pos.context = o.context;
  pos.init = "normal";
  pos.std = 0.02;
  x = b.add("wpe", OpKind::kPositionEmbedding, pos, {x});
  for (int64_t i = 0; i < o.blocks; ++i) {
    const std::string p = "h." + std::to_string(i);
    std::string y = b.add(p + ".ln_1", OpKind::kLayerNorm, {}, {x});
    y = lin(p + ".attn.c_attn", y, 3 * C, 0.02);
    OpAttrs att;
    att.heads = o.heads;
    y = b.add(p + ".attn.attention", OpKind::kAttention, att, {y});
    y = lin(p + ".attn.c_proj", y, C, proj_std);
    x = b.add(p + ".add1", OpKind::kAdd, {}, {x, y});
    y = b.add(p + ".ln_2", OpKind::kLayerNorm, {}, {x});
    y = lin(p + ".mlp.c_fc", y, 4 * C, 0.02);
    y = b.unary(p + ".mlp.gelu", OpKind::kGelu, y);
    y = lin(p + ".mlp.c_proj", y, C, proj_std);
    x = b.add(p + ".add2", OpKind::kAdd, {}, {x, y});
  }
  x = b.add("ln_f", OpKind::kLayerNorm, {}, {x});
  OpAttrs head;
  head.out = o.vocab;
  head.bias = false;
  head.tie = "wte.weight";
  b.add("lm_head", OpKind::kLinear, head, {x});
  return g;
}

}  // namespace dltune::recipes::internal
