#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"
#include "models/profile/moe_tensors.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

namespace {

/// Hugging Face LlamaForCausalLM state dict, in load order: embed_tokens [V,H]; per layer input_layernorm [H],
/// q_proj [heads*hd,H], k_proj/v_proj [kv*hd,H], o_proj [H,heads*hd], post_attention_layernorm [H],
/// gate_proj/up_proj [I,H], down_proj [H,I]; norm [H]; lm_head [V,H] unless tied to embed_tokens.
std::vector<TensorSpec> llama_tensors(const ModelProfile& p) {
  const ModelDims& d = p.dims;
  const int64_t h = d.hidden, q = int64_t{d.heads} * d.head_dim, kv = int64_t{d.kv_heads} * d.head_dim;
  const int64_t inter = d.intermediate, v = d.vocab;
  std::vector<TensorSpec> t;
  t.reserve(3 + 9 * static_cast<size_t>(d.layers));
  t.push_back({"model.embed_tokens.weight", p.dtype, {v, h}});
  for (int i = 0; i < d.layers; ++i) {
    t.push_back({llama_layer_name(i, "input_layernorm.weight"), p.dtype, {h}});
    t.push_back({llama_layer_name(i, "self_attn.q_proj.weight"), p.dtype, {q, h}});
    t.push_back({llama_layer_name(i, "self_attn.k_proj.weight"), p.dtype, {kv, h}});
    t.push_back({llama_layer_name(i, "self_attn.v_proj.weight"), p.dtype, {kv, h}});
    t.push_back({llama_layer_name(i, "self_attn.o_proj.weight"), p.dtype, {h, q}});
    t.push_back({llama_layer_name(i, "post_attention_layernorm.weight"), p.dtype, {h}});
    t.push_back({llama_layer_name(i, "mlp.gate_proj.weight"), p.dtype, {inter, h}});
    t.push_back({llama_layer_name(i, "mlp.up_proj.weight"), p.dtype, {inter, h}});
    t.push_back({llama_layer_name(i, "mlp.down_proj.weight"), p.dtype, {h, inter}});
  }
  t.push_back({"model.norm.weight", p.dtype, {h}});
  if (!d.tie_embeddings) t.push_back({"lm_head.weight", p.dtype, {v, h}});
  return t;
}

}  // namespace

std::vector<TensorSpec> ModelProfile::canonical_tensors() const {
  if (family == kLlamaFamily) return llama_tensors(*this);
  if (family == kGlm4MoeFamily) return glm4_moe_tensors(*this);
  if (family == kDeepseekV3Family) return deepseek_v3_tensors(*this);
  if (family == kGptOssFamily) return gpt_oss_tensors(*this);
  throw Error(ErrorKind::Format, fmt::format("profile '{}': unsupported family '{}'", id, family));
}

uint64_t ModelProfile::canonical_bytes() const {
  uint64_t total = 0;
  for (const TensorSpec& t : canonical_tensors()) total += t.bytes();
  return total;
}

}  // namespace wsb
