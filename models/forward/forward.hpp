#pragma once
// Reference forward pass over the runtime layout (after sharding and transform), so a wrong layout or transform
// changes the logits. Deterministic and batch-invariant: each sequence is computed alone, TP partial sums are
// reduced in rank order, float32 accumulation in a fixed order, no threads racing on a sum.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

/// Host pointers to one rank's runtime storages, index-aligned with RankLayout::storages.
struct RankStorageView {
  std::vector<std::span<const uint8_t>> storages;
};

/// Per-sequence state (KV caches of every rank).
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  virtual int64_t position() const = 0;
};

/// A forward pass bound to a set of runtime storages (it reads them at every step, never caches weights).
class ForwardModel {
 public:
  virtual ~ForwardModel() = default;
  virtual std::unique_ptr<SequenceState> new_sequence() const = 0;
  /// Feeds one token at the sequence's next position; writes float32 logits over the full vocabulary
  /// (vocab shards gathered in rank order) into `logits` (resized to vocab).
  virtual void step(SequenceState& seq, int32_t token, std::vector<float>& logits) const = 0;
  virtual int vocab() const = 0;
};

/// Creates the forward pass for the profile's family. Throws Error(Format) for unsupported families.
/// Family "llama" (models/forward/llama_forward.hpp) follows transformers' LlamaForCausalLM in float32 (weights
/// BF16/F16/F32 widened on the fly; matches transformers' logits within 1e-6 on the tests/fixtures/hf-llama-tiny
/// checkpoint). RoPE is plain (rope_theta only): the "llama3" rope_scaling of Llama 3.1 configs is NOT applied,
/// so real Llama-3.1 weights give slightly different logits than transformers; synthetic weights do not care.
/// Families "glm4_moe" (FP8 channel or BF16), "deepseek_v3" (NVFP4 or BF16 routed experts, MLA) and "gpt_oss" (MXFP4
/// or BF16 experts, sinks, sliding window) follow their transformers models with the weights dequantized inside the
/// kernels from the runtime layout (models/forward/moe_forward.hpp, quant_linear.hpp; YaRN rope_scaling is applied
/// as transformers does, rope_yarn.hpp).
/// `layouts` must be build_rank_layouts(profile, tp) for tp = layouts.size() and every storage view must have the
/// layout's byte size (else Error(Mismatch)). The views are kept (not copied) and must outlive the model.
/// step() throws Error(Format) for a token outside [0, vocab) and Error(Mismatch) for a sequence state created by
/// another ForwardModel.
std::unique_ptr<ForwardModel> make_forward(const ModelProfile& profile, const std::vector<RankLayout>& layouts,
                                           const std::vector<RankStorageView>& storages);

/// The token check of every forward's step(), CPU or CUDA: throws Error(Format) "profile '<id>': token id <token>
/// is outside the vocabulary [0, <vocab>)" unless 0 <= token < vocab.
void check_token(const std::string& profile_id, int32_t token, int vocab);

/// Synthetic byte-level vocabulary: ids 0..255 are bytes; larger ids detokenize to "<|id|>".
std::vector<int32_t> tokenize_bytes(const std::string& text);
std::string detokenize(const std::vector<int32_t>& ids);

}  // namespace wsb
