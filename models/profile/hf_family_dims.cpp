// config.json keys of each family (declared in hf_family_dims.hpp).
#include "models/profile/hf_family_dims.hpp"

#include <fmt/format.h>

#include <map>
#include <string>

#include "core/errors.hpp"
#include "models/profile/hf_rope.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_dims.hpp"
#include "models/profile/moe_family.hpp"

namespace wsb {

namespace {

/// Fields whose only supported value differs from nothing the forward could do otherwise.
void require_int(const JsonFields& cfg, std::string_view key, int want, int fallback, std::string_view why) {
  const int v = cfg.optional_integer(key).value_or(fallback);
  if (v != want) cfg.fail(key, fmt::format("{} is not supported ({})", v, why));
}

void require_bool(const JsonFields& cfg, std::string_view key, bool want, bool fallback, std::string_view why) {
  const bool v = cfg.optional_boolean(key).value_or(fallback);
  if (v != want) cfg.fail(key, fmt::format("{} is not supported ({})", v ? "true" : "false", why));
}

void require_string(const JsonFields& cfg, std::string_view key, std::string_view want, std::string_view why) {
  if (std::optional<std::string> v = cfg.optional_string(key); v && *v != want)
    cfg.fail(key, fmt::format("'{}' is not supported ({})", *v, why));
}

/// Maps wsbench dims keys to the config fields they were read from (cfg's own keys unless overridden).
DimFieldName namer(const JsonFields& cfg, std::map<std::string, std::string, std::less<>> keys) {
  return [&cfg, keys = std::move(keys)](std::string_view key) {
    auto it = keys.find(key);
    return it != keys.end() ? it->second : cfg.field(key);
  };
}

/// The rope_scaling.* keys of the dims, named by where the YaRN dict was read.
void add_rope_names(std::map<std::string, std::string, std::less<>>& keys, const HfRope& rope) {
  keys["rope_theta"] = rope.theta_field;
  for (const char* k : {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow"})
    keys[fmt::format("rope_scaling.{}", k)] = fmt::format("{}.{}", rope.scaling_field, k);
}

/// Keys of the sigmoid-routed families (glm4_moe, deepseek_v3) and their names in config.json.
std::map<std::string, std::string, std::less<>> sigmoid_family_keys(const JsonFields& c) {
  return {{"layers", c.field("num_hidden_layers")},
          {"hidden", c.field("hidden_size")},
          {"intermediate", c.field("intermediate_size")},
          {"moe_intermediate", c.field("moe_intermediate_size")},
          {"experts", c.field("n_routed_experts")},
          {"shared_experts", c.field("n_shared_experts")},
          {"top_k", c.field("num_experts_per_tok")},
          {"first_dense_layers", c.field("first_k_dense_replace")},
          {"heads", c.field("num_attention_heads")},
          {"kv_heads", c.field("num_key_value_heads")},
          {"vocab", c.field("vocab_size")},
          {"rms_eps", c.field("rms_norm_eps")}};
}

/// Routing of glm4_moe / deepseek_v3 as the reference forward implements it: sigmoid scores plus
/// e_score_correction_bias for selection, one expert group. `groups` / `topk_groups`: the config class's defaults.
void check_sigmoid_routing(const JsonFields& c, int groups, int topk_groups) {
  require_int(c, "n_group", 1, groups, "the forward routes over one expert group");
  require_int(c, "topk_group", 1, topk_groups, "the forward routes over one expert group");
  require_string(c, "scoring_func", "sigmoid", "the forward scores experts with a sigmoid");
  require_string(c, "topk_method", "noaux_tc", "the forward selects experts by sigmoid + e_score_correction_bias");
  require_int(c, "moe_layer_freq", 1, 1, "every layer from first_k_dense_replace on is a MoE layer");
  require_int(c, "decoder_sparse_step", 1, 1, "every layer from first_k_dense_replace on is a MoE layer");
}

void check_common(const JsonFields& c, std::string_view family) {
  require_string(c, "hidden_act", "silu", "the MLPs are SwiGLU: silu");
  require_bool(c, "tie_word_embeddings", false, false,
               fmt::format("family {} stores lm_head.weight apart from embed_tokens", family));
}

void read_sigmoid_family(const JsonFields& c, ModelDims& d) {
  d.layers = c.integer("num_hidden_layers");
  d.hidden = c.integer("hidden_size");
  d.intermediate = c.integer("intermediate_size");
  d.moe_intermediate = c.integer("moe_intermediate_size");
  d.experts = c.integer("n_routed_experts");
  d.top_k = c.integer("num_experts_per_tok");
  d.heads = c.integer("num_attention_heads");
  d.vocab = c.integer("vocab_size");
  d.shared_experts = c.optional_integer("n_shared_experts").value_or(1);
}

}  // namespace

ModelDims hf_llama_dims(const JsonFields& cfg) {
  if (std::optional<std::string> act = cfg.optional_string("hidden_act"); act && *act != "silu")
    cfg.fail("hidden_act", fmt::format("'{}' is not supported (the llama MLP is SwiGLU: silu)", *act));
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (cfg.optional_boolean(key).value_or(false)) cfg.fail(key, "biases are not supported by family llama");
  // "llama3" (Llama 3.1) is accepted: the reference forward pass applies plain RoPE (see forward.hpp).
  const HfRope rope = read_hf_rope(cfg, 10000.0, {"default", "llama3"}, kLlamaFamily);
  ModelDims d;
  d.layers = cfg.integer("num_hidden_layers");
  d.hidden = cfg.integer("hidden_size");
  d.intermediate = cfg.integer("intermediate_size");
  d.heads = cfg.integer("num_attention_heads");
  d.kv_heads = cfg.optional_integer("num_key_value_heads").value_or(d.heads);
  if (d.heads <= 0) cfg.fail("num_attention_heads", fmt::format("must be a positive integer, got {}", d.heads));
  d.head_dim = cfg.optional_integer("head_dim").value_or(d.hidden / d.heads);
  d.vocab = cfg.integer("vocab_size");
  d.rope_theta = rope.theta;
  d.rms_eps = cfg.optional_number("rms_norm_eps").value_or(1e-6);
  d.tie_embeddings = cfg.optional_boolean("tie_word_embeddings").value_or(false);
  validate_llama_dims(d, cfg.origin(),
                      LlamaDimFieldNames{cfg.field("num_hidden_layers"), cfg.field("hidden_size"),
                                         cfg.field("intermediate_size"), cfg.field("num_attention_heads"),
                                         cfg.field("num_key_value_heads"), cfg.field("head_dim"),
                                         cfg.field("vocab_size"), rope.theta_field, cfg.field("rms_norm_eps")});
  return d;
}

ModelDims hf_glm4_moe_dims(const JsonFields& c, std::string_view quantization) {
  check_common(c, kGlm4MoeFamily);
  check_sigmoid_routing(c, 1, 1);
  require_bool(c, "use_qk_norm", false, false, "the glm4_moe forward has no q/k norm");
  const HfRope rope = read_hf_rope(c, 10000.0, {"default"}, kGlm4MoeFamily);
  ModelDims d;
  read_sigmoid_family(c, d);
  d.kv_heads = c.integer("num_key_value_heads");
  if (d.heads <= 0) c.fail("num_attention_heads", fmt::format("must be a positive integer, got {}", d.heads));
  d.head_dim = c.optional_integer("head_dim").value_or(d.hidden / d.heads);
  d.first_dense_layers = c.optional_integer("first_k_dense_replace").value_or(1);
  d.norm_topk_prob = c.optional_boolean("norm_topk_prob").value_or(true);
  d.routed_scaling_factor = c.optional_number("routed_scaling_factor").value_or(1.0);
  d.attention_bias = c.optional_boolean("attention_bias").value_or(false);
  d.rope_theta = rope.theta;
  d.rms_eps = c.optional_number("rms_norm_eps").value_or(1e-5);
  auto keys = sigmoid_family_keys(c);
  keys["head_dim"] = c.field("head_dim");
  add_rope_names(keys, rope);
  if (rope.partial_rotary_factor) {
    d.partial_rotary_factor = *rope.partial_rotary_factor;
    keys["partial_rotary_factor"] = fmt::format("{}.partial_rotary_factor", rope.scaling_field);
  } else {
    d.partial_rotary_factor = c.optional_number("partial_rotary_factor").value_or(0.5);
  }
  validate_glm4_moe_dims(d, quantization, c.origin(), namer(c, std::move(keys)));
  return d;
}

ModelDims hf_deepseek_v3_dims(const JsonFields& c, std::string_view quantization) {
  check_common(c, kDeepseekV3Family);
  check_sigmoid_routing(c, 8, 4);
  require_bool(c, "attention_bias", false, false, "the MLA projections of the deepseek_v3 forward have no bias");
  // transformers' apply_rotary_pos_emb_interleave: RoPE on (even, odd) pairs, as the forward applies it.
  require_bool(c, "rope_interleave", true, true, "the deepseek_v3 forward rotates interleaved pairs");
  if (!c.has("q_lora_rank"))
    c.fail("q_lora_rank", "missing or null: a q projection without the q_a/q_b low-rank pair is not supported");
  const HfRope rope = read_hf_rope(c, 10000.0, {"default", "yarn"}, kDeepseekV3Family);
  ModelDims d;
  read_sigmoid_family(c, d);
  d.first_dense_layers = c.optional_integer("first_k_dense_replace").value_or(3);
  d.norm_topk_prob = c.optional_boolean("norm_topk_prob").value_or(true);
  d.routed_scaling_factor = c.optional_number("routed_scaling_factor").value_or(2.5);
  d.q_lora_rank = c.integer("q_lora_rank");
  d.kv_lora_rank = c.integer("kv_lora_rank");
  d.qk_nope_head_dim = c.integer("qk_nope_head_dim");
  d.qk_rope_head_dim = c.integer("qk_rope_head_dim");
  d.v_head_dim = c.integer("v_head_dim");
  d.rope_theta = rope.theta;
  d.rope_scaling = rope.yarn;
  d.rms_eps = c.optional_number("rms_norm_eps").value_or(1e-6);
  auto keys = sigmoid_family_keys(c);
  add_rope_names(keys, rope);
  validate_deepseek_v3_dims(d, quantization, c.origin(), namer(c, std::move(keys)));
  return d;
}

ModelDims hf_gpt_oss_dims(const JsonFields& c, std::string_view quantization) {
  require_bool(c, "tie_word_embeddings", false, false, "family gpt_oss stores lm_head.weight apart from embed_tokens");
  const HfRope rope = read_hf_rope(c, 150000.0, {"default", "yarn"}, kGptOssFamily);
  ModelDims d;
  d.layers = c.integer("num_hidden_layers");
  d.hidden = c.integer("hidden_size");
  d.intermediate = c.integer("intermediate_size");
  d.experts = c.integer("num_local_experts");
  const std::optional<int> top_k = c.optional_integer("num_experts_per_tok");
  const std::optional<int> openai_top_k = c.optional_integer("experts_per_token");
  if (top_k && openai_top_k && *top_k != *openai_top_k)
    c.fail("experts_per_token", fmt::format("{} disagrees with num_experts_per_tok {}", *openai_top_k, *top_k));
  d.top_k = top_k.value_or(openai_top_k.value_or(4));
  d.heads = c.integer("num_attention_heads");
  d.kv_heads = c.integer("num_key_value_heads");
  d.head_dim = c.integer("head_dim");
  d.vocab = c.integer("vocab_size");
  d.rope_theta = rope.theta;
  d.rope_scaling = rope.yarn;
  d.rms_eps = c.optional_number("rms_norm_eps").value_or(1e-5);
  d.attention_bias = true;
  d.sliding_window = c.integer("sliding_window");
  d.swiglu_limit = c.optional_number("swiglu_limit").value_or(7.0);
  if (c.has("layer_types")) {
    nlohmann::json want = nlohmann::json::array();
    for (int i = 0; i < d.layers; ++i) want.push_back(gpt_oss_is_sliding(i) ? "sliding_attention" : "full_attention");
    if (c.value().at("layer_types") != want)
      c.fail("layer_types",
             fmt::format("{} is not supported (the gpt_oss forward slides on even layers: {})",
                         c.value().at("layer_types").dump(), want.dump()));
  }
  std::map<std::string, std::string, std::less<>> keys = {{"layers", c.field("num_hidden_layers")},
                                                           {"hidden", c.field("hidden_size")},
                                                           {"intermediate", c.field("intermediate_size")},
                                                           {"experts", c.field("num_local_experts")},
                                                           {"top_k", c.field(top_k || !openai_top_k
                                                                                 ? "num_experts_per_tok"
                                                                                 : "experts_per_token")},
                                                           {"heads", c.field("num_attention_heads")},
                                                           {"kv_heads", c.field("num_key_value_heads")},
                                                           {"vocab", c.field("vocab_size")},
                                                           {"rms_eps", c.field("rms_norm_eps")}};
  add_rope_names(keys, rope);
  validate_gpt_oss_dims(d, quantization, c.origin(), namer(c, std::move(keys)));
  return d;
}

int hf_mtp_layers(const JsonFields& cfg) {
  const int n = cfg.optional_integer("num_nextn_predict_layers").value_or(0);
  if (n < 0) cfg.fail("num_nextn_predict_layers", fmt::format("must be >= 0, got {}", n));
  return n;
}

}  // namespace wsb
