#pragma once
// Per-rank blocks shared by the MoE families' forward passes: GQA attention (glm4_moe, gpt_oss), the SwiGLU MLP
// (dense layers, shared experts, one routed expert) and the sigmoid-routed MoE with shared experts (glm4_moe,
// deepseek_v3). Each computes one rank's partial output into a hidden-wide buffer of the sequence from s.h (the
// normed input); the caller reduces partials in rank order. Buffers used: s.a, s.b, s.c, s.scratch, s.router*,
// s.weights, s.experts, s.routed, s.expert_out, s.scores, s.cos/s.sin (filled by MoeForwardBase::step).
#include <vector>

#include "models/forward/family_weights.hpp"
#include "models/forward/moe_forward_base.hpp"

namespace wsb {

/// Shape of the attention of one model (family_weights.hpp) and the kernels of its unquantized dtype.
struct GqaParams : GqaShape {
  const WeightKernels* kern = nullptr;  ///< reads biases and sinks (the unquantized dtype)
};

/// qkv = qkv(s.h) (+ bias), RoPE on the rotary part of every q and k head, k/v appended to the rank's caches,
/// attention per q head (GQA: global q head g reads kv head g / (heads / kv_heads)), s.partial = o(attention).
/// s.pos is the current position; buffers must hold qkv rows and cols.
void gqa_attention_partial(const GqaParams& p, const GqaRank& w, std::vector<float>& k_cache,
                           std::vector<float>& v_cache, MoeSequence& s);

/// out = down(silu(gate) * up) with [gate; up] = gate_up(x) of `expert` (0 for 2-D weights); `up_first` reads the
/// rows as [up; gate] (FlashInfer's NVFP4 w13). Uses s.a, s.b, s.scratch.
void swiglu_mlp(const QuantLinear& gate_up, const QuantLinear& down, int64_t expert, bool up_first, const float* x,
                MoeSequence& s, float* out);

/// s.partial = sum over the chosen experts in ascending id of weight_e * expert_e(s.h) (sigmoid_topk_route on the
/// rank's own router copy), plus the shared expert's output: transformers Glm4MoeMoE / DeepseekV3MoE.forward
/// (experts visited in id order, index_add into zeros, then + shared_experts(residuals)).
void sigmoid_moe_partial(const ModelDims& dims, const SigmoidMoeRank& w, MoeSequence& s);

/// Sorts the first n (expert, weight) pairs of s.experts / s.weights by ascending expert id (experts are distinct).
void sort_selected_by_expert(MoeSequence& s, int n);

}  // namespace wsb
