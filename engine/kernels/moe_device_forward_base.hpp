#pragma once
// Skeleton shared by the device forwards of the quantized MoE families (CUDA builds only), the device twin of
// models/forward/moe_forward_base.hpp: the vocab ends bound to device addresses, per-slot rank buffers (KV caches
// and scratch, sized by the family's constructor), the rotary frequencies, and the step: vocab-parallel
// embedding, the family's layers, final norm and lm_head gathered in rank order. The family binds its layers with
// models/forward/family_weights.hpp over rank_storages().
#include <memory>
#include <string>
#include <vector>

#include "engine/kernels/device_arena.hpp"
#include "engine/kernels/device_forward_base.hpp"
#include "engine/kernels/device_kernels.hpp"
#include "models/forward/quant_linear.hpp"

namespace wsb::dk {

/// One rank's device buffers in one sequence slot (all on the rank's device, float32 unless noted). Widths come
/// from MoeBufferSizes; unused pieces of a family are still allocated (a few KB).
struct MoeRankBuffers {
  DeviceArena arena;
  float* h = nullptr;                                      ///< normed input [hidden]
  float* a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr;  ///< family scratch, `scratch` floats each
  float* logits = nullptr;      ///< router logits [experts]
  int32_t* ids = nullptr;       ///< chosen experts [top_k], ascending id (int32)
  float* weights = nullptr;     ///< their routing weights [top_k]
  float* gate_up = nullptr;     ///< [gate_up]: top_k stacked w13 outputs, or one dense/shared gate_up output
  float* act = nullptr;         ///< [act]: activations feeding the down projections
  float* expert_out = nullptr;  ///< [top_k, hidden]: routed down-projection outputs
  float* shared_out = nullptr;  ///< [hidden]: the shared expert's output
  float* bias_sum = nullptr;    ///< [hidden]: gpt_oss rank 0, routing-weighted down_proj biases
  float* residual = nullptr;    ///< [hidden]: gpt_oss rank 0, x kept across a reduction that overwrites it
  float* scores = nullptr;      ///< attention scratch [q_heads, max_positions]
  std::vector<float*> k, v;     ///< per layer: position-major [max_positions, k_width] / [.., v_width]
};

/// Float counts of the family-sized MoeRankBuffers pieces (max over ranks; grown by the family constructor).
struct MoeBufferSizes {
  int64_t scratch = 0;  ///< a, b, c, d
  int64_t gate_up = 0;
  int64_t act = 0;
  int64_t q_heads = 0;  ///< attention heads whose scores are kept
  int64_t k_width = 0;  ///< floats per cached key position (all local heads)
  int64_t v_width = 0;
};

class MoeDeviceForwardBase : public DeviceForwardBase {
 protected:
  struct MoeSlot final : SlotBuffers {
    std::vector<MoeRankBuffers> ranks;
  };

  /// Checks what DeviceForwardBase checks, binds every rank's vocab ends (bind_vocab_ends: Error(Mismatch) naming
  /// the storage). `rotary_dim`: the RoPE width whose frequencies rope_frequencies(rope_theta, rotary_dim,
  /// rope_scaling) are uploaded to every device (inv_freq(rank), rotary_dim / 2 floats; rope_scale()).
  MoeDeviceForwardBase(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                       const std::vector<DeviceRankView>& views, const DeviceForwardOptions& options, int rotary_dim);

  /// Grows the buffer sizes of slots created later (call from the family constructor only).
  MoeBufferSizes& sizes() { return sizes_; }

  /// One decoder layer: the family's two TP operations (attention, MLP), each ending with the residual in tp.x().
  virtual void enqueue_layer(TpSlot& tp, MoeSlot& slot, int layer) const = 0;

  std::unique_ptr<SlotBuffers> make_slot_buffers(int slot) const final;
  void enqueue_step(TpSlot& tp, SlotBuffers& buffers) const final;

 private:
  std::vector<const uint8_t*> embed_, norm_, lm_head_;  ///< per rank
  MoeBufferSizes sizes_;
};

}  // namespace wsb::dk
