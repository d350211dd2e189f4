#pragma once
// Family-independent part of every device forward (CUDA builds only): input checks, device checks, the runtime
// storages bound by name (models/forward/rank_storages.hpp, for the family's weight binding of
// models/forward/family_weights.hpp), rotary frequencies on every device, sequence slots (each with its TpSlot and
// the family's per-slot buffers, allocated when the slot is first taken and kept for reuse), and the step:
// token/position upload, the decode step (captured once per slot as a CUDA graph and replayed, or launched
// directly), the logits download. A family implements two hooks: its per-slot buffers and the enqueueing of one
// decode step over TpSlot's rank operations and the kernels of device_kernels.hpp.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/kernels/device_arena.hpp"
#include "engine/kernels/device_forward.hpp"
#include "engine/kernels/device_kernels.hpp"
#include "engine/kernels/tp_slot.hpp"
#include "models/forward/family_weights.hpp"
#include "models/forward/rank_storages.hpp"

namespace wsb::dk {

/// Which slots are taken; shared with the sequences so a sequence outliving its model only flips a flag.
struct SlotPool {
  std::mutex mutex;
  std::vector<char> used;
};

/// The decode attention of one rank's GQA heads (llama, glm4_moe, gpt_oss): q heads at `q` ([q_heads, head_dim]),
/// keys and values cached position-major at `k_cache` / `v_cache` (kv_heads * head_dim floats per position), global
/// q head g reading kv head g / (heads / kv_heads), window and scale of `shape`, no sinks; scores scratch
/// [q_heads, scores_stride], output [q_heads, head_dim] at `out`. `position`: the device scalar of the position.
DecodeAttention gqa_decode_attention(const GqaShape& shape, const LlamaRankHeads& heads, const float* q,
                                     const float* k_cache, const float* v_cache, const int32_t* position,
                                     float* scores, int64_t scores_stride, float* out);

class DeviceForwardBase : public ForwardModel {
 public:
  ~DeviceForwardBase() override;

  /// Takes a free slot (creating its buffers on first use). Throws Error(Resource) "... all <n> sequence slots are
  /// in use" when none is free, or when its device memory cannot be allocated.
  std::unique_ptr<SequenceState> new_sequence() const override;
  /// Throws Error(Mismatch) for a sequence of another model, Error(Format) for a token outside [0, vocab),
  /// Error(Resource) once the sequence holds max_positions tokens, Error(Io) for CUDA failures.
  void step(SequenceState& seq, int32_t token, std::vector<float>& logits) const override;
  int vocab() const override { return vocab_; }

  /// The family's per-slot device buffers (KV caches, scratch); public so families can derive them in their own
  /// translation units.
  struct SlotBuffers {
    virtual ~SlotBuffers() = default;
  };

 protected:
  /// Checks, in this order: the profile's weight dtype (BF16/F16/F32, else Error(Format)); `layouts` not empty
  /// and equal to build_rank_layouts(profile, layouts.size()), and `views` matching them (check_device_views,
  /// Error(Mismatch)); options (max_sequences >= 1, max_positions >= 1, else Error(Format)); a CUDA device present
  /// (else Error(Resource) "no CUDA device"); each view's device exists and every storage address is device (or
  /// managed) memory of that device (else Error(Mismatch) naming the storage). Enables peer access between rank
  /// 0's device and the others where the hardware allows it (copies work without it).
  DeviceForwardBase(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                    const std::vector<DeviceRankView>& views, const DeviceForwardOptions& options);

  /// Allocates one slot's family buffers (called under the slot lock, on first use of the slot).
  virtual std::unique_ptr<SlotBuffers> make_slot_buffers(int slot) const = 0;
  /// Enqueues one decode step on `tp`: must start with tp.broadcast_scalars() and end with every rank's logits
  /// slice written through tp.gather(). Runs inside a stream capture when graphs are on, so it must not
  /// synchronize, allocate, or branch on device data.
  virtual void enqueue_step(TpSlot& tp, SlotBuffers& buffers) const = 0;

  const std::string& id() const { return id_; }
  const TpTopology& topology() const { return topo_; }
  const DeviceForwardOptions& options() const { return options_; }
  int tp() const { return topo_.ranks(); }
  /// Every rank's layout with its storages' DEVICE addresses. Bind QuantLinears with it (the *_linear functions
  /// check specs only) and convert them with to_device_linear; such a QuantLinear must never reach the host
  /// linear_matvec.
  const RankStorages& rank_storages() const { return storages_; }
  /// Copies `inv_freq` (computed on the host exactly as the CPU forward does) to every lane's device, for the rope
  /// kernels (call once, from the family constructor), and keeps `cos_sin_scale` (the YaRN attention scaling of
  /// rope_frequencies, models/forward/rope_yarn.hpp) for them. Throws Error(Resource) when device memory is short,
  /// Error(Io) when the copy fails.
  void upload_inv_freq(const std::vector<float>& inv_freq, float cos_sin_scale = 1.0f);
  /// The cos/sin multiplier given to upload_inv_freq.
  float rope_scale() const { return rope_scale_; }
  /// Rank `rank`'s copy of the uploaded inverse frequencies, on its device.
  const float* inv_freq(int rank) const { return inv_freq_[static_cast<size_t>(rank)]; }

  /// Offsets in a rank's slot arena of its KV caches: one piece of max_positions * k_width floats (keys) and one of
  /// max_positions * v_width floats (values) per layer.
  struct KvCachePlan {
    std::vector<uint64_t> k, v;
  };
  /// Reserves every layer's KV caches in `plan` (after the family's scratch pieces).
  KvCachePlan add_kv_caches(ArenaPlan& plan, int64_t k_width, int64_t v_width) const;
  /// Allocates rank `rank`'s arena for slot `slot` on the rank's device and appends each layer's cache addresses to
  /// `k` and `v`. Throws Error(Resource) naming the slot, the rank and max_positions when device memory is short.
  DeviceArena allocate_slot_arena(int slot, int rank, const ArenaPlan& plan, const KvCachePlan& caches,
                                  std::vector<float*>& k, std::vector<float*>& v) const;

  ModelDims dims_;
  WeightType type_;  ///< the unquantized weights' dtype (profile.dtype)
  float eps_;        ///< dims.rms_eps rounded to float32, as torch adds it

 private:
  struct Slot {
    std::unique_ptr<TpSlot> tp;
    std::unique_ptr<SlotBuffers> buffers;
  };

  std::string id_;
  int vocab_ = 0;
  int64_t hidden_ = 0;
  DeviceForwardOptions options_;
  TpTopology topo_;
  RankStorages storages_;
  std::vector<DeviceArena> inv_freq_arena_;  ///< per lane
  std::vector<const float*> inv_freq_;       ///< per rank (its lane's copy)
  float rope_scale_ = 1.0f;
  std::shared_ptr<SlotPool> pool_;
  mutable std::vector<Slot> slots_;  ///< max_sequences entries; entry i written only under pool_->mutex
};

}  // namespace wsb::dk
