#pragma once
// Fragment lists shared by the MoE layout builders (internal to models/layout).
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "models/layout/layout_builder.hpp"

namespace wsb {

/// Per expert e in [0, experts): rows [start, start+length) of "L.mlp.experts.<e>.<first>.<leaf>" then of
/// "...<second>.<leaf>" -- the stacked [E, 2*length, ...] order of a fused w13.
std::vector<Fragment> expert_row_pairs(const CanonIndex& c, int layer, int experts, std::string_view first,
                                       std::string_view second, std::string_view leaf, int64_t start, int64_t length);
/// Per expert: slice [start, start+length) of dim `dim` of "L.mlp.experts.<e>.<proj>.<leaf>".
std::vector<Fragment> expert_slices(const CanonIndex& c, int layer, int experts, std::string_view proj,
                                    std::string_view leaf, int dim, int64_t start, int64_t length);
/// Per expert, for each leaf in `leaves` in order, the whole "L.mlp.experts.<e>.<proj_i>.<leaf_i>" tensor
/// (proj/leaf pairs); used for per-expert scalars.
std::vector<Fragment> expert_wholes(const CanonIndex& c, int layer, int experts,
                                    const std::vector<std::pair<std::string, std::string>>& proj_leaf);
/// Vocab-parallel rows of `name` for rank r: [r*V/tp, (r+1)*V/tp).
RuntimeStorageSpec vocab_rows(const CanonIndex& c, const std::string& name, DType dtype, int64_t vocab, int tp,
                              int rank);
/// A replicated storage holding the whole canonical tensor `name` (same name, transform none).
RuntimeStorageSpec replicated(const CanonIndex& c, const std::string& name, DType dtype);

/// Rank `rank`'s rows of layer `layer`'s "self_attn.{q,k,v}_proj.<leaf>" in the fused qkv order: the rows of its q
/// heads, then of its kv heads in k_proj, then in v_proj (llama_rank_heads; head_dim rows per head).
std::vector<Fragment> gqa_qkv_rows(const CanonIndex& c, const ModelDims& d, int layer, int tp, int rank,
                                   std::string_view leaf);

/// Appends one half of decoder layer `layer` of TP rank `rank` to `storages` (a family's attention or MLP).
using LayerPart =
    std::function<void(std::vector<RuntimeStorageSpec>& storages, const CanonIndex& c, int layer, int rank)>;

/// Layouts of every rank in the decoder order the MoE families share: model.embed_tokens.weight (vocab rows); per
/// layer input_layernorm.weight, `attention`, post_attention_layernorm.weight, `mlp`; model.norm.weight;
/// lm_head.weight (vocab rows). Norms are replicated, in profile.dtype like the vocab ends. Call after the family's
/// TP checks; throws what CanonIndex and the parts throw (Error(Missing) for an absent canonical tensor).
std::vector<RankLayout> decoder_rank_layouts(const ModelProfile& profile, int tp, const LayerPart& attention,
                                             const LayerPart& mlp);

}  // namespace wsb
