#pragma once
// Facts of the "llama" family (dense GQA decoder) shared by profiles, TP layout and the forward pass.
// Tensor names follow the Hugging Face transformers LlamaForCausalLM state dict (modeling_llama.py).
#include <string>
#include <string_view>

#include "models/profile/profile.hpp"

namespace wsb {

inline constexpr std::string_view kLlamaFamily = "llama";

/// Smallest vocabulary the synthetic byte-level tokenizer needs (ids 0..255 are bytes).
inline constexpr int kByteVocab = 256;

/// "model.layers.<layer>.<leaf>", e.g. llama_layer_name(3, "self_attn.q_proj.weight").
std::string llama_layer_name(int layer, std::string_view leaf);

/// How a source spells each checked ModelDims member in error messages: the defaults are the profile JSON keys;
/// profile_from_hf_dir passes the config.json keys instead.
struct LlamaDimFieldNames {
  std::string layers = "dims.layers";
  std::string hidden = "dims.hidden";
  std::string intermediate = "dims.intermediate";
  std::string heads = "dims.heads";
  std::string kv_heads = "dims.kv_heads";
  std::string head_dim = "dims.head_dim";
  std::string vocab = "dims.vocab";
  std::string rope_theta = "dims.rope_theta";
  std::string rms_eps = "dims.rms_eps";
};
/// Checks the dims a llama profile needs: every size > 0, heads % kv_heads == 0, head_dim even (RoPE rotates
/// halves), rope_theta > 0, 0 < rms_eps < 1. Throws Error(Format) "<origin>: field '<name>': <why>".
void validate_llama_dims(const ModelDims& dims, const std::string& origin, const LlamaDimFieldNames& names);

}  // namespace wsb
