#pragma once
// TP sharding of the llama family (Megatron/SGLang conventions, see tp_layout.hpp): the attention-head split of
// one rank, shared by the layout builder and the forward pass.
#include <vector>

#include "models/layout/tp_layout.hpp"

namespace wsb {

/// Attention heads held by one TP rank. q heads [q_head_start, q_head_start + q_heads) are contiguous; so are kv
/// heads. With tp <= kv_heads each rank owns kv_heads/tp kv heads; with tp > kv_heads (tp % kv_heads == 0) rank
/// r holds the single kv head r / (tp / kv_heads), replicated on tp / kv_heads ranks.
struct LlamaRankHeads {
  int q_heads = 0;
  int q_head_start = 0;
  int kv_heads = 0;
  int kv_head_start = 0;
};

/// Throws Error(Mismatch) naming the dimension `tp` does not divide (heads, kv_heads, intermediate, vocab), or
/// tp < 1.
void check_llama_tp(const ModelProfile& profile, int tp);
/// Head split of `rank` (0 <= rank < tp); call check_llama_tp first.
LlamaRankHeads llama_rank_heads(const ModelDims& dims, int tp, int rank);
/// Layouts of every rank for family "llama". Storage order per rank: model.embed_tokens.weight; per layer
/// input_layernorm, self_attn.qkv_proj, self_attn.o_proj, post_attention_layernorm, mlp.gate_up_proj,
/// mlp.down_proj (each "model.layers.<i>.<name>.weight"); model.norm.weight; lm_head.weight.
std::vector<RankLayout> build_llama_layouts(const ModelProfile& profile, int tp);

}  // namespace wsb
