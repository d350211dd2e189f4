#pragma once
// Per-family weights of one TP rank, bound to its runtime storages by name, and the per-family attention and MLP
// shapes: the part both forward backends share. The CPU reference (llama_forward.cpp, *_forward.cpp) binds host
// bytes and runs the weights as they are; the CUDA forward (engine/kernels/*_device_forward.cpp) binds device
// addresses and converts the checked QuantLinears with to_device_linear. Every binding reads the storages through
// RankStorages (rank_storages.hpp) and checks them as quant_linear.hpp's *_linear and require_storage do, without
// dereferencing an address. Storage names: models/layout/llama_layout.hpp and models/layout/moe_layout.hpp.
#include <cstdint>
#include <vector>

#include "models/forward/quant_linear.hpp"
#include "models/forward/rank_storages.hpp"
#include "models/layout/llama_layout.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

/// The two ends of every family's rank: its vocab slice of the embedding and of lm_head, and its copy of the final
/// norm.
struct VocabEnds {
  StorageRef embed;    ///< [vocab / tp, hidden], unquantized dtype
  StorageRef norm;     ///< [hidden], unquantized dtype
  StorageRef lm_head;  ///< [vocab / tp, hidden], unquantized dtype
};

/// Binds rank `rank`'s model.embed_tokens.weight, model.norm.weight and lm_head.weight. Throws Error(Missing) for
/// a storage the layout lacks, Error(Mismatch) naming a storage that is not BF16/F16/F32 [vocab / tp, hidden]
/// (embed, lm_head) or profile.dtype [hidden] (norm).
VocabEnds bind_vocab_ends(const ModelProfile& profile, const RankStorages& storages, int rank);

/// softmax scale dim^-0.5 as transformers computes it (in double, rounded to float32).
float attention_scale(int dim);

// --- llama -------------------------------------------------------------------------------------------------------

/// One decoder layer of a llama rank (dtype profile.dtype, shapes of build_llama_layouts).
struct LlamaLayerWeights {
  const uint8_t* input_norm = nullptr;  ///< [hidden]
  const uint8_t* qkv = nullptr;         ///< [(q_heads + 2 kv_heads) * head_dim, hidden], rank's heads
  const uint8_t* o = nullptr;           ///< [hidden, q_heads * head_dim]
  const uint8_t* post_norm = nullptr;   ///< [hidden]
  const uint8_t* gate_up = nullptr;     ///< [2 * intermediate / tp, hidden]: [gate; up]
  const uint8_t* down = nullptr;        ///< [hidden, intermediate / tp]
};

/// Every weight of one llama rank.
struct LlamaRankWeights {
  VocabEnds ends;
  std::vector<LlamaLayerWeights> layers;  ///< dims.layers entries
};

/// Binds rank `rank` of a llama profile (storages = its build_llama_layouts with addresses). Throws as
/// bind_vocab_ends, and Error(Missing) for a layer storage the layout lacks.
LlamaRankWeights bind_llama_rank(const ModelProfile& profile, const RankStorages& storages, int rank);

// --- quantized MoE families --------------------------------------------------------------------------------------

/// Shape of a GQA attention (glm4_moe, gpt_oss).
struct GqaShape {
  int heads = 0;       ///< global q heads
  int kv_heads = 0;    ///< global kv heads
  int head_dim = 0;
  int rotary_dim = 0;  ///< leading elements of each head that RoPE rotates (rotate_half over rotary_dim)
  int64_t window = 0;  ///< 0 = full causal attention, else keys at positions > pos - window
  float scale = 1.0f;  ///< softmax scale (head_dim^-0.5)
};

/// glm4_moe: partial RoPE over int(head_dim * partial_rotary_factor) dims (transformers Glm4MoeRotaryEmbedding;
/// moe_dims.cpp checks it is an even integer), scale head_dim^-0.5, no window.
GqaShape glm4_moe_attention(const ModelDims& dims);
/// gpt_oss: RoPE over the full head_dim, scale head_dim^-0.5; window 0 here (the sliding layers set it per layer,
/// gpt_oss_is_sliding).
GqaShape gpt_oss_attention(const ModelDims& dims);

/// One rank's GQA attention weights.
struct GqaRank {
  LlamaRankHeads heads;
  QuantLinear qkv;      ///< rows [q | k | v] = (q_heads + 2 kv_heads) * head_dim, cols hidden
  StorageRef qkv_bias;  ///< same rows, unquantized dtype; data == nullptr when the model has none
  QuantLinear o;        ///< rows hidden, cols q_heads * head_dim
  StorageRef sinks;     ///< [q_heads] unquantized dtype (gpt_oss); data == nullptr when absent
};

/// One rank's sigmoid-routed MoE (glm4_moe / deepseek_v3).
struct SigmoidMoeRank {
  QuantLinear gate;            ///< router [experts, hidden], unquantized
  StorageRef correction_bias;  ///< F32 [experts]
  QuantLinear w13;             ///< stacked experts, rows 2 * Im_r
  QuantLinear w2;              ///< stacked experts, rows hidden, cols Im_r
  bool up_first = false;       ///< w13 rows are [up; gate]
  bool has_shared = false;
  QuantLinear shared_gate_up, shared_down;
};

/// The MLP half of a glm4_moe / deepseek_v3 layer of one rank: the dense SwiGLU of the first layers, routed and
/// shared experts after them.
struct SigmoidFamilyMlp {
  StorageRef post_norm;       ///< [hidden] unquantized dtype
  bool moe = false;           ///< is_moe_layer
  QuantLinear gate_up, down;  ///< dense layers: gate_up rows [gate; up] (2 * intermediate / tp), down [hidden, ..]
  SigmoidMoeRank experts;     ///< MoE layers
};

/// Per-rank MLP widths of a sigmoid-router family at `tp`.
struct SigmoidFamilyWidths {
  int64_t inter = 0;   ///< dense intermediate / tp
  int64_t im = 0;      ///< routed experts' Im_r (moe_intermediate_slice of rank 0)
  int64_t shared = 0;  ///< shared_intermediate / tp; 0 without shared experts
};
/// The widths at `tp` (a tp the family's layout builder accepts; nothing is checked here).
SigmoidFamilyWidths sigmoid_family_widths(const ModelDims& dims, int tp);

/// One glm4_moe layer of one rank (fp8-channel or unquantized linears; q/k/v bias when dims.attention_bias).
struct Glm4MoeLayerWeights {
  StorageRef input_norm;  ///< [hidden] unquantized dtype
  GqaRank attn;
  SigmoidFamilyMlp mlp;
};

/// MLA shape of deepseek_v3 at `tp` (per rank).
struct MlaShape {
  int heads = 0;             ///< q heads of the rank (heads / tp)
  int nope = 0, rope = 0;    ///< qk_nope_head_dim, qk_rope_head_dim
  int qk = 0, v = 0;         ///< mla_qk_head_dim, v_head_dim
  float scale = 1.0f;        ///< mla_softmax_scale: qk^-0.5, times YaRN's mscale^2 (DeepseekV3Attention)
  int64_t a_rows = 0;        ///< fused q_a / kv_a rows: q_lora_rank + kv_lora_rank + rope
  int64_t q_rows = 0;        ///< heads * qk
  int64_t kv_rows = 0;       ///< heads * (nope + v)
  int64_t o_cols = 0;        ///< heads * v
};
/// The shape at `tp` (a tp that divides dims.heads, as build_deepseek_v3_layouts checks; nothing is checked here).
MlaShape deepseek_v3_attention(const ModelDims& dims, int tp);

/// One deepseek_v3 layer of one rank (BF16 attention, dense layers and shared expert; NVFP4 routed experts with
/// w13 = [up; gate], or unquantized ones with w13 = [gate; up]).
struct DeepseekV3LayerWeights {
  StorageRef input_norm;          ///< [hidden]
  StorageRef q_a_norm;            ///< [q_lora_rank]
  StorageRef kv_a_norm;           ///< [kv_lora_rank]
  QuantLinear qkv_a, q_b, kv_b, o;
  SigmoidFamilyMlp mlp;
};

/// One gpt_oss layer of one rank (BF16 attention with biases and sinks, MXFP4 or BF16 K-major experts with biases).
struct GptOssLayerWeights {
  StorageRef input_norm, post_norm;  ///< [hidden]
  StorageRef o_bias;                 ///< [hidden], row-parallel: added once after the reduction
  GqaRank attn;
  QuantLinear router;                ///< [experts, hidden]
  StorageRef router_bias;            ///< [experts]
  QuantLinear w13, w2;               ///< interleaved gate/up rows 2 * L_r; down [hidden, L_r] (gpt_oss_expert_slice)
  StorageRef w13_bias;               ///< [experts, 2 * Ip_r] (Ip_r == L_r for BF16 experts)
  StorageRef w2_bias;                ///< [experts, hidden]
};

/// Binds every layer of rank `rank` (storages = build_rank_layouts(profile, tp) with addresses). Throws
/// Error(Missing) for a storage the layout lacks and Error(Mismatch) naming a storage whose dtype, transform or
/// shape is not the family's (the *_linear functions, require_storage).
std::vector<Glm4MoeLayerWeights> bind_glm4_moe_rank(const ModelProfile& profile, const RankStorages& storages,
                                                    int rank);
std::vector<DeepseekV3LayerWeights> bind_deepseek_v3_rank(const ModelProfile& profile, const RankStorages& storages,
                                                          int rank);
std::vector<GptOssLayerWeights> bind_gpt_oss_rank(const ModelProfile& profile, const RankStorages& storages,
                                                  int rank);

}  // namespace wsb
