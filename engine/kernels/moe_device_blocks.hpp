#pragma once
// Per-rank blocks shared by the MoE device forwards (CUDA builds only), the device twins of
// models/forward/moe_blocks.hpp: GQA attention (glm4_moe, gpt_oss), the SwiGLU MLP (dense layers, shared experts)
// and the sigmoid-routed MoE with shared experts (glm4_moe, deepseek_v3). Each enqueues one rank's partial output
// (hidden floats, `out`) on the rank's stream from the normed input s.h; TpSlot reduces the partials in rank order.
// Routing happens on the device: the expert ids feed launch_linear_matvec directly (engine/quant/device_linear.hpp),
// so nothing here reads device data on the host and everything records into the slot's CUDA graph.
#include <cstdint>
#include <vector>

#include "engine/kernels/moe_device_forward_base.hpp"
#include "engine/quant/device_linear.hpp"
#include "models/forward/family_weights.hpp"
#include "models/layout/llama_layout.hpp"
#include "models/profile/profile.hpp"

namespace wsb::dk {

/// One rank's GQA attention weights (device addresses).
struct DeviceGqaRank {
  LlamaRankHeads heads;
  DeviceLinear qkv;                  ///< rows [q | k | v] = (q_heads + 2 kv_heads) * head_dim, cols hidden
  const uint8_t* qkv_bias = nullptr; ///< same rows, unquantized dtype; nullptr when the model has none
  DeviceLinear o;                    ///< rows hidden, cols q_heads * head_dim
  const uint8_t* sinks = nullptr;    ///< [q_heads] unquantized dtype (gpt_oss); nullptr when absent
};

/// `w` bound to device addresses (rank_storages()) with its linears converted by to_device_linear. Throws what
/// to_device_linear throws.
DeviceGqaRank to_device(const GqaRank& w);

/// Shape of one model's attention (family_weights.hpp) and the dtype of its biases and sinks.
struct DeviceGqaParams : GqaShape {
  WeightType type = WeightType::BF16;  ///< dtype of biases and sinks
  float rope_scale = 1.0f;             ///< cos/sin multiplier (DeviceForwardBase::rope_scale)
};

/// Grows `sizes` for the attention of a rank with `heads` (qkv and attention outputs in s.a / s.b, caches).
void need_gqa(MoeBufferSizes& sizes, const DeviceGqaParams& p, const LlamaRankHeads& heads);

/// out = o(attention(qkv(s.h) + bias)) with partial RoPE on q and k, k/v stored at *position in the layer's caches
/// (s.k[layer], s.v[layer], kv_heads * head_dim wide), window and sinks as `p` and `w` say
/// (moe_blocks.cpp gqa_attention_partial). Uses s.a (qkv), s.b (attention output), s.scores.
void gqa_attention(const DeviceGqaParams& p, const DeviceGqaRank& w, const MoeRankBuffers& s, int layer,
                   const int32_t* position, const float* inv_freq, int max_positions, float* out, cudaStream_t stream);

/// A SwiGLU MLP: gate_up rows [gate; up] (2 * inter), down [hidden, inter].
struct DeviceMlp {
  DeviceLinear gate_up, down;
};

/// Grows `sizes` for a SwiGLU MLP of `inter` intermediate rows (s.gate_up, s.act).
void need_mlp(MoeBufferSizes& sizes, int64_t inter);

/// out = down(silu(gate) * up) of x (moe_blocks.cpp swiglu_mlp, expert 0, [gate; up]). Uses s.gate_up, s.act.
void swiglu_mlp(const DeviceMlp& w, const float* x, const MoeRankBuffers& s, float* out, cudaStream_t stream);

/// One rank's sigmoid-routed MoE (moe_blocks.hpp SigmoidMoeRank).
struct DeviceSigmoidMoe {
  DeviceLinear gate;                      ///< router [experts, hidden], unquantized
  const float* correction_bias = nullptr; ///< F32 [experts]
  DeviceLinear w13;                       ///< stacked experts, rows 2 * Im_r
  DeviceLinear w2;                        ///< stacked experts, rows hidden, cols Im_r
  bool up_first = false;                  ///< w13 rows are [up; gate]
  bool has_shared = false;
  DeviceMlp shared;
};

/// Grows `sizes` for routed experts of `inter` (Im_r) rows and top_k slots (s.gate_up, s.act).
void need_routed_experts(MoeBufferSizes& sizes, int top_k, int64_t inter);

/// out = sum over the chosen experts (ascending id) of weight_e * expert_e(s.h) + shared(s.h): router logits into
/// s.logits, sigmoid_topk_route into s.ids / s.weights, all top_k experts in one launch per projection
/// (moe_blocks.cpp sigmoid_moe_partial). Uses s.gate_up, s.act, s.expert_out, s.shared_out.
void sigmoid_moe(const ModelDims& dims, const DeviceSigmoidMoe& w, const MoeRankBuffers& s, float* out,
                 cudaStream_t stream);

/// The MLP half of a glm4_moe / deepseek_v3 layer: routed + shared experts on MoE layers, the dense SwiGLU before.
struct DeviceSigmoidFamilyMlp {
  const uint8_t* post_norm = nullptr;  ///< [hidden] unquantized dtype
  bool moe = false;
  DeviceMlp dense;
  DeviceSigmoidMoe experts;
};

/// `w` bound to device addresses (rank_storages()): the dense linears of a dense layer, the router, experts and
/// (when present) shared expert of a MoE layer converted by to_device_linear. Throws what to_device_linear throws.
DeviceSigmoidFamilyMlp to_device(const SigmoidFamilyMlp& w);

/// s.h = RMSNorm(x) with post_norm, then out = the layer's MLP of s.h (moe_blocks.hpp sigmoid_family_mlp_partial).
void sigmoid_family_mlp(const ModelDims& dims, WeightType type, float eps, const DeviceSigmoidFamilyMlp& w,
                        const float* x, const MoeRankBuffers& s, float* out, cudaStream_t stream);

/// One glm4_moe / deepseek_v3 decoder layer on `tp` (the device twin of MoeForwardBase::sigmoid_family_layer): for
/// every rank r, s.h = RMSNorm(x) with input_norm_of(r) and attention(r, s, out, stream) writes the rank's partial;
/// then sigmoid_family_mlp with mlp_of(r). Each of the two TP operations adds its reduced output to tp.x().
/// `ranks`: the slot's per-rank buffers; `type`, `eps`: the unquantized dtype and the RMSNorm epsilon.
template <typename InputNormOf, typename Attention, typename MlpOf>
void enqueue_sigmoid_family_layer(const ModelDims& dims, WeightType type, float eps, TpSlot& tp,
                                  const std::vector<MoeRankBuffers>& ranks, InputNormOf input_norm_of,
                                  Attention attention, MlpOf mlp_of) {
  tp.rank_partials(true, true, [&](int r, cudaStream_t st, const float* x, float* out) {
    const MoeRankBuffers& s = ranks[static_cast<size_t>(r)];
    rms_norm(x, input_norm_of(r), type, dims.hidden, eps, s.h, st);
    attention(r, s, out, st);
  });
  tp.rank_partials(true, true, [&](int r, cudaStream_t st, const float* x, float* out) {
    sigmoid_family_mlp(dims, type, eps, mlp_of(r), x, ranks[static_cast<size_t>(r)], out, st);
  });
}

}  // namespace wsb::dk
