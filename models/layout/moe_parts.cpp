#include "models/layout/moe_parts.hpp"

#include <fmt/format.h>

#include "models/layout/llama_layout.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

/// Every routed expert of a layer has the same tensor shapes (canonical_tensors emits them in one loop), so the
/// shape is looked up for expert 0 and the existence of the last expert is checked once; this keeps layouts of
/// 384-expert models from spending their time in name lookups.
struct ExpertTensor {
  const CanonIndex& c;
  int layer;
  std::string leaf;  // "<proj>.<leaf>"
  Shape shape;

  ExpertTensor(const CanonIndex& index, int l, int experts, std::string_view proj, std::string_view leaf_name)
      : c(index), layer(l), leaf(fmt::format("{}.{}", proj, leaf_name)) {
    shape = c.at(expert_tensor_name(layer, 0, leaf)).shape;
    c.at(expert_tensor_name(layer, experts - 1, leaf));
  }
  Fragment slice(int expert, int dim, int64_t start, int64_t length) const {
    return Fragment{c.canonical_name(expert_tensor_name(layer, expert, leaf)), shape, dim, start, length};
  }
  Fragment whole(int expert) const { return slice(expert, 0, 0, shape.empty() ? 1 : shape[0]); }
};

}  // namespace

std::vector<Fragment> expert_row_pairs(const CanonIndex& c, int layer, int experts, std::string_view first,
                                       std::string_view second, std::string_view leaf, int64_t start, int64_t length) {
  const ExpertTensor a(c, layer, experts, first, leaf), b(c, layer, experts, second, leaf);
  std::vector<Fragment> f;
  f.reserve(2 * static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) {
    f.push_back(a.slice(e, 0, start, length));
    f.push_back(b.slice(e, 0, start, length));
  }
  return f;
}

std::vector<Fragment> expert_slices(const CanonIndex& c, int layer, int experts, std::string_view proj,
                                    std::string_view leaf, int dim, int64_t start, int64_t length) {
  const ExpertTensor t(c, layer, experts, proj, leaf);
  std::vector<Fragment> f;
  f.reserve(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) f.push_back(t.slice(e, dim, start, length));
  return f;
}

std::vector<Fragment> expert_wholes(const CanonIndex& c, int layer, int experts,
                                    const std::vector<std::pair<std::string, std::string>>& proj_leaf) {
  std::vector<ExpertTensor> tensors;
  for (const auto& [proj, leaf] : proj_leaf) tensors.emplace_back(c, layer, experts, proj, leaf);
  std::vector<Fragment> f;
  f.reserve(static_cast<size_t>(experts) * proj_leaf.size());
  for (int e = 0; e < experts; ++e)
    for (const ExpertTensor& t : tensors) f.push_back(t.whole(e));
  return f;
}

RuntimeStorageSpec vocab_rows(const CanonIndex& c, const std::string& name, DType dtype, int64_t vocab, int tp,
                              int rank) {
  const int64_t rows = vocab / tp;
  return rows_spec(name, dtype, {c.slice(name, 0, rank * rows, rows)});
}

RuntimeStorageSpec replicated(const CanonIndex& c, const std::string& name, DType dtype) {
  Fragment f = c.whole(name);
  Shape shape = f.canonical_shape;
  return make_spec(name, dtype, {std::move(f)}, std::move(shape));
}

std::vector<Fragment> gqa_qkv_rows(const CanonIndex& c, const ModelDims& d, int layer, int tp, int rank,
                                   std::string_view leaf) {
  auto n = [&](std::string_view proj) { return llama_layer_name(layer, fmt::format("self_attn.{}.{}", proj, leaf)); };
  const LlamaRankHeads h = llama_rank_heads(d, tp, rank);
  const int64_t hd = d.head_dim, q0 = h.q_head_start * hd, qn = h.q_heads * hd;
  const int64_t kv0 = h.kv_head_start * hd, kvn = h.kv_heads * hd;
  return {c.slice(n("q_proj"), 0, q0, qn), c.slice(n("k_proj"), 0, kv0, kvn), c.slice(n("v_proj"), 0, kv0, kvn)};
}

std::vector<RankLayout> decoder_rank_layouts(const ModelProfile& p, int tp, const LayerPart& attention,
                                             const LayerPart& mlp) {
  const ModelDims& d = p.dims;
  const CanonIndex c(p);
  std::vector<RankLayout> out;
  for (int rank = 0; rank < tp; ++rank) {
    RankLayout layout;
    layout.rank = rank;
    layout.tp = tp;
    auto& s = layout.storages;
    s.push_back(vocab_rows(c, "model.embed_tokens.weight", p.dtype, d.vocab, tp, rank));
    for (int i = 0; i < d.layers; ++i) {
      s.push_back(replicated(c, llama_layer_name(i, "input_layernorm.weight"), p.dtype));
      attention(s, c, i, rank);
      s.push_back(replicated(c, llama_layer_name(i, "post_attention_layernorm.weight"), p.dtype));
      mlp(s, c, i, rank);
    }
    s.push_back(replicated(c, "model.norm.weight", p.dtype));
    s.push_back(vocab_rows(c, "lm_head.weight", p.dtype, d.vocab, tp, rank));
    out.push_back(std::move(layout));
  }
  return out;
}

}  // namespace wsb
