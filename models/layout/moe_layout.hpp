#pragma once
// TP layouts of the quantized MoE families (SGLang/vLLM conventions). Storages are listed per rank in order;
// "L." stands for "model.layers.<i>.". Notation: tp ranks, rank r; V vocab, H hidden; q_r = heads/tp * head_dim and
// kv_r = (kv heads held by the rank) * head_dim, split as in llama (llama_rank_heads: kv heads replicated when
// tp > kv_heads); I_r = intermediate/tp (dense MLP), Im_r = moe_intermediate/tp, Is_r = shared_intermediate/tp;
// E experts. Vocab-parallel: embed_tokens and lm_head hold rows [r*V/tp, (r+1)*V/tp). Replicated: norms, router,
// correction bias, biases of row-parallel projections (o_proj.bias, w2 bias: the forward adds them once, after the
// rank-ordered reduction). Unless a transform is named, a storage is the row-major concatenation of its fragments.
//
// glm4_moe, fp8-channel (transforms: models/transform/fp8_channel.hpp; W = weight [Kp, Np] F8_E4M3 with
// K = input, N = output features, 16-padded; S = weight_scale F32 [Np]):
//   model.embed_tokens.weight                 BF16 [V/tp, H]
//   L.input_layernorm.weight                  BF16 [H]
//   L.self_attn.qkv_proj.weight               W  N = q_r + 2 kv_r ([q | k | v] rows), K = H
//   L.self_attn.qkv_proj.weight_scale         S  same N order
//   L.self_attn.qkv_proj.bias                 BF16 [q_r + 2 kv_r]        (when attention_bias)
//   L.self_attn.o_proj.weight                 W  N = H, K = q_r (input columns of the rank's heads)
//   L.self_attn.o_proj.weight_scale           S  N = H (replicated)
//   L.post_attention_layernorm.weight         BF16 [H]
//   dense layers:  L.mlp.gate_up_proj.weight  W  N = 2 I_r ([gate slice; up slice]), K = H
//                  L.mlp.gate_up_proj.weight_scale S
//                  L.mlp.down_proj.weight     W  N = H, K = I_r;  L.mlp.down_proj.weight_scale S (N = H)
//   MoE layers:    L.mlp.gate.weight          BF16 [E, H]
//                  L.mlp.gate.e_score_correction_bias F32 [E]
//                  L.mlp.experts.w13_weight   F8_E4M3 [E, Kp, Np], N = 2 Im_r (per expert [gate slice; up slice]),
//                                             K = H
//                  L.mlp.experts.w13_weight_scale F32 [E, Np]
//                  L.mlp.experts.w2_weight    F8_E4M3 [E, Kp, Np], N = H, K = Im_r
//                  L.mlp.experts.w2_weight_scale F32 [E, Np] (N = H)
//                  L.mlp.shared_experts.gate_up_proj.weight / .weight_scale, .down_proj.weight / .weight_scale
//                                             as the dense MLP with Is_r
//   model.norm.weight BF16 [H];  lm_head.weight BF16 [V/tp, H]
//
// glm4_moe, none (unquantized, dtype D = profile.dtype): the same storages with one "<name>.weight" D [N, K] per
// linear (no transform, no weight_scale), N and K as above; the routed experts as SGLang's
// UnquantizedFusedMoEMethod holds them: L.mlp.experts.w13_weight D [E, 2 Im_r, H] (per expert [gate slice; up
// slice]), L.mlp.experts.w2_weight D [E, H, Im_r] (input columns of the rank).
//
// deepseek_v3, nvfp4 (canonical names carry profile.tensor_prefix, runtime names never do; transforms:
// models/transform/nvfp4.hpp; hr = heads/tp):
//   model.embed_tokens.weight                 BF16 [V/tp, H]
//   L.input_layernorm.weight                  BF16 [H]
//   L.self_attn.fused_qkv_a_proj_with_mqa.weight BF16 [q_lora + kv_lora + rope, H]: q_a_proj rows then
//                                             kv_a_proj_with_mqa rows (replicated; SGLang's fused name)
//   L.self_attn.q_a_layernorm.weight          BF16 [q_lora]
//   L.self_attn.q_b_proj.weight               BF16 [hr * (nope + rope), q_lora]: heads [r*hr, (r+1)*hr)
//   L.self_attn.kv_a_layernorm.weight         BF16 [kv_lora]
//   L.self_attn.kv_b_proj.weight              BF16 [hr * (nope + v), kv_lora]
//   L.self_attn.o_proj.weight                 BF16 [H, hr * v] (input columns of the rank's heads)
//   L.post_attention_layernorm.weight         BF16 [H]
//   dense layers:  L.mlp.gate_up_proj.weight  BF16 [2 I_r, H] ([gate; up]);  L.mlp.down_proj.weight BF16 [H, I_r]
//   MoE layers:    L.mlp.gate.weight BF16 [E, H];  L.mlp.gate.e_score_correction_bias F32 [E]
//                  L.mlp.experts.w13_weight   U8 [E, 2 Im_r, H/2]: per expert [up slice; gate slice] (FlashInfer
//                                             CUTLASS order), packed E2M1 (nvfp4_weight_offset)
//                  L.mlp.experts.w13_weight_scale F8_E4M3 swizzled [E, round_up(2 Im_r, 128), round_up(H/16, 4)]
//                                             (rows in the same [up; gate] order; nvfp4_scale_offset)
//                  L.mlp.experts.w13_weight_scale_2 F32 [E]  (gate's; equal to up's)
//                  L.mlp.experts.w13_input_scale F32 [E]     (max of gate's and up's)
//                  L.mlp.experts.w13_alpha    F32 [E]        (w13_input_scale * w13_weight_scale_2)
//                  L.mlp.experts.w2_weight    U8 [E, H, Im_r/2]: input columns [r*Im_r, (r+1)*Im_r)
//                  L.mlp.experts.w2_weight_scale F8_E4M3 swizzled [E, round_up(H, 128), round_up(c1 - c0, 4)],
//                                             scale columns [c0, c1) = [floor(s/16), ceil((s+Im_r)/16)) with
//                                             s = r*Im_r: a block straddling two ranks is held by both (ceil);
//                                             local element k uses local column (s % 16 + k) / 16
//                  L.mlp.experts.w2_weight_scale_2 F32 [E];  L.mlp.experts.w2_input_scale F32 [E]
//                  L.mlp.experts.w2_alpha     F32 [E]        (w2_input_scale * w2_weight_scale_2)
//                  L.mlp.shared_experts.gate_up_proj.weight BF16 [2 Is_r, H];  .down_proj.weight BF16 [H, Is_r]
//   model.norm.weight BF16 [H];  lm_head.weight BF16 [V/tp, H]
//
// deepseek_v3, none: as nvfp4 but the routed experts are L.mlp.experts.w13_weight D [E, 2 Im_r, H] ([gate slice; up
// slice]) and L.mlp.experts.w2_weight D [E, H, Im_r], as glm4_moe's; moe_intermediate / tp need not be even.
//
// gpt_oss, mxfp4 (transforms: models/transform/mxfp4.hpp). The expert intermediate is split in whole 32-element
// blocks (vLLM gpt_oss.py): cb = ceil(I/32 / tp) blocks per rank, rank r holds [r*cb*32, min((r+1)*cb*32, I))
// (L_r elements, possibly fewer on the last ranks) padded with zeros to Ip = cb*32 (gpt_oss_intermediate_slice):
//   model.embed_tokens.weight                 BF16 [V/tp, H]
//   L.input_layernorm.weight                  BF16 [H]
//   L.self_attn.qkv_proj.weight               BF16 [q_r + 2 kv_r, H] ([q | k | v]);  L.self_attn.qkv_proj.bias
//                                             BF16 [q_r + 2 kv_r]
//   L.self_attn.o_proj.weight                 BF16 [H, q_r];  L.self_attn.o_proj.bias BF16 [H] (replicated)
//   L.self_attn.sinks                         BF16 [heads/tp]: the rank's q heads
//   L.post_attention_layernorm.weight         BF16 [H]
//   L.mlp.router.weight BF16 [E, H];  L.mlp.router.bias BF16 [E]
//   L.mlp.experts.w13_weight                  U8 [E, 2 Ip, H/32, 16]: row 2j = gate, 2j+1 = up of local
//                                             intermediate j (gpt-oss interleaving kept), rows >= 2 L_r zero
//                                             (mxfp4_value_offset)
//   L.mlp.experts.w13_weight_scale            U8 swizzled mxfp4_scale_swizzled_shape(E, 2 Ip, H/32)
//   L.mlp.experts.w13_bias                    BF16 [E, 2 Ip] (interleaved; padding zero)
//   L.mlp.experts.w2_weight                   U8 [E, H, Ip/32, 16]: K = local intermediate, blocks >= L_r/32 zero
//   L.mlp.experts.w2_weight_scale             U8 swizzled mxfp4_scale_swizzled_shape(E, H, Ip/32)
//   L.mlp.experts.w2_bias                     BF16 [E, H] (replicated)
//   model.norm.weight BF16 [H];  lm_head.weight BF16 [V/tp, H]
//
// gpt_oss, none (BF16 experts): as SGLang holds unquantized gpt-oss experts with its triton_kernels MoE runner, the
// default for gpt-oss without quantization on Hopper (arg_groups/overrides.py _gpt_oss_overrides: moe_runner_backend
// "triton_kernel"). UnquantizedFusedMoEMethod.create_weights (layers/quantization/unquant.py) then makes w13_weight
// [E, H, 2 I_r] and w2_weight [E, I_r, H] (K-major: the inner dim is the output), and FusedMoE.weight_loader_fused
// (_load_w13 / _load_w2, layers/moe/fused_moe_triton/layer.py) narrows the checkpoint's gate_up_proj [E, H, 2I]
// along its last dim at 2*r*I_r and down_proj [E, I, H] along dim 1 at r*I_r, with I_r = I/tp (FusedMoE asserts
// intermediate_size % tp == 0). Attention, router, norms and vocab ends as with MXFP4 experts. No transform:
//   L.mlp.experts.w13_weight                  BF16 [E, H, 2 I_r]: columns [2 r I_r, 2 (r+1) I_r) of gate_up_proj,
//                                             column 2j = gate, 2j+1 = up of local intermediate j (interleave kept,
//                                             SGLang gate_up_interleaved)
//   L.mlp.experts.w13_bias                    BF16 [E, 2 I_r] (same columns of gate_up_proj_bias)
//   L.mlp.experts.w2_weight                   BF16 [E, I_r, H]: rows [r I_r, (r+1) I_r) of down_proj
//   L.mlp.experts.w2_bias                     BF16 [E, H] (replicated)
// Two deliberate differences from SGLang, neither changing a value the forward computes: SGLang keeps both biases
// in float32 (create_weights: w13_weight_bias / w2_weight_bias, dtype torch.float32; BF16 widens exactly), and
// zeroes w2_weight_bias on TP ranks != 0 (gpt_oss.py, before its all-reduce); here post-load transforms never change
// the dtype, and the row-parallel bias is replicated and added once after the reduction, as for MXFP4 experts.
#include <vector>

#include "models/layout/tp_layout.hpp"

namespace wsb {

/// Elements [start, start + length) of a sharded dimension held by one rank; `padded` is the runtime extent
/// (== length unless the family pads).
struct RankSlice {
  int64_t start = 0;
  int64_t length = 0;
  int64_t padded = 0;
};

/// Routed-expert intermediate of glm4_moe / deepseek_v3: [r*Im/tp, (r+1)*Im/tp).
RankSlice moe_intermediate_slice(const ModelDims& dims, int tp, int rank);
/// gpt_oss expert intermediate with MXFP4 experts: whole 32-element blocks, ceil-split, padded to cb*32 (see above).
RankSlice gpt_oss_intermediate_slice(const ModelDims& dims, int tp, int rank);
/// gpt_oss expert intermediate with BF16 experts: [r*I/tp, (r+1)*I/tp), never padded (tp must divide I).
RankSlice gpt_oss_bf16_intermediate_slice(const ModelDims& dims, int tp, int rank);
/// The gpt_oss expert intermediate slice of `profile`'s quantization (mxfp4: the block split, none: the even one).
RankSlice gpt_oss_expert_slice(const ModelProfile& profile, int tp, int rank);
/// deepseek_v3: NVFP4 w2 scale columns [c0, c1) held by the rank (ceil when a 16-block straddles ranks).
RankSlice nvfp4_w2_scale_columns(const ModelDims& dims, int tp, int rank);

/// Layout builders, dispatched from build_rank_layouts by family. Throw Error(Mismatch) naming the dimension tp
/// does not divide: glm4_moe heads/kv_heads (as llama), vocab, intermediate, moe_intermediate, shared
/// intermediate; deepseek_v3 heads, vocab, intermediate, moe_intermediate (and, for nvfp4, Im/tp must be even: two
/// E2M1 codes per byte), shared intermediate; gpt_oss heads/kv_heads, vocab, and with BF16 experts the expert
/// intermediate (with MXFP4 experts it never needs to divide: block ceil split).
std::vector<RankLayout> build_glm4_moe_layouts(const ModelProfile& profile, int tp);
std::vector<RankLayout> build_deepseek_v3_layouts(const ModelProfile& profile, int tp);
std::vector<RankLayout> build_gpt_oss_layouts(const ModelProfile& profile, int tp);

}  // namespace wsb
