// profile_from_hf_config for every family (models/profile/profile_hf.cpp, hf_family_dims.hpp, hf_rope.hpp,
// hf_quantization.hpp): the configs transformers 5 save_pretrained writes for the tiny fixture models of
// tests/fixtures/make_hf_tiny.py (rope_parameters, dtype), the older spellings (rope_theta, rope_scaling,
// torch_dtype), the Kimi K2.5 wrapper, every accepted quantization_config form, and each refusal naming its field.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "models/profile/profile.hpp"
#include "tests/models/checkpoint_test_util.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

using nlohmann::json;
using test::error_message;
using testutil::TempDir;

/// What transformers 5.17 save_pretrained writes for make_hf_tiny.py's Glm4MoeConfig (keys of the Glm4MoeConfig
/// dataclass, rope_parameters holding rope_theta, rope_type and the partial_rotary_factor kwarg).
json glm4_moe_v5() {
  return json::parse(R"({
    "architectures": ["Glm4MoeForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
    "bos_token_id": null, "dtype": "bfloat16", "eos_token_id": null, "first_k_dense_replace": 1, "head_dim": 16,
    "hidden_act": "silu", "hidden_size": 128, "initializer_range": 0.02, "intermediate_size": 96,
    "max_position_embeddings": 2048, "model_type": "glm4_moe", "moe_intermediate_size": 48, "n_group": 1,
    "n_routed_experts": 8, "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 8,
    "num_experts_per_tok": 2, "num_hidden_layers": 3, "num_key_value_heads": 4, "num_nextn_predict_layers": 0,
    "pad_token_id": null, "rms_norm_eps": 1e-05,
    "rope_parameters": {"partial_rotary_factor": 0.5, "rope_theta": 1000000.0, "rope_type": "default"},
    "routed_scaling_factor": 1.0, "tie_word_embeddings": false, "topk_group": 1, "transformers_version": "5.17.0",
    "use_cache": true, "use_qk_norm": false, "vocab_size": 256})");
}

/// make_hf_tiny.py's DeepseekV3Config as transformers 5 writes it: yarn in rope_parameters with rope_theta, head_dim
/// = qk_rope_head_dim, rope_interleave.
json deepseek_v3_v5() {
  return json::parse(R"({
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 0, "dtype": "bfloat16", "eos_token_id": 1, "first_k_dense_replace": 1, "head_dim": 8,
    "hidden_act": "silu", "hidden_size": 128, "initializer_range": 0.02, "intermediate_size": 192,
    "kv_lora_rank": 32, "max_position_embeddings": 131072, "model_type": "deepseek_v3", "moe_intermediate_size": 64,
    "n_group": 1, "n_routed_experts": 8, "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 8,
    "num_experts_per_tok": 2, "num_hidden_layers": 3, "num_key_value_heads": 8, "pad_token_id": null,
    "pretraining_tp": 1, "q_lora_rank": 64, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "rms_norm_eps": 1e-06,
    "rope_interleave": true,
    "rope_parameters": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                        "original_max_position_embeddings": 4096, "rope_theta": 50000.0, "rope_type": "yarn"},
    "routed_scaling_factor": 2.827, "tie_word_embeddings": false, "topk_group": 1, "transformers_version": "5.17.0",
    "use_cache": true, "v_head_dim": 16, "vocab_size": 256})");
}

/// make_hf_tiny.py's Kimi K2.6 NVFP4 form: the deepseek_v3 config as text_config of a kimi_k25 wrapper with the
/// ModelOpt quantization_config at both levels.
json kimi_nvfp4() {
  json text = deepseek_v3_v5();
  text.erase("architectures");
  const json q = json::parse(R"({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
    "kv_cache_quant_algo": null, "ignore": ["language_model.lm_head", "language_model.model.layers.*.self_attn*",
    "language_model.model.layers.*.mlp.shared_experts*", "language_model.model.layers.*.mlp.gate",
    "language_model.model.layers.0.mlp*"]})");
  text["quantization_config"] = q;
  return json{{"architectures", {"KimiK25ForConditionalGeneration"}},
              {"model_type", "kimi_k25"},
              {"text_config", text},
              {"quantization_config", q},
              {"tie_word_embeddings", false}};
}

/// make_hf_tiny.py's GptOssConfig as transformers 5 writes it, with the MXFP4 quantization_config.
json gpt_oss_mxfp4() {
  return json::parse(R"({
    "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0, "dtype": "bfloat16",
    "head_dim": 16, "hidden_act": "silu", "hidden_size": 96, "initializer_range": 0.02, "intermediate_size": 224,
    "layer_types": ["sliding_attention", "full_attention"], "max_position_embeddings": 131072,
    "model_type": "gpt_oss", "num_attention_heads": 8, "num_experts_per_tok": 4, "num_hidden_layers": 2,
    "num_key_value_heads": 4, "num_local_experts": 8, "output_router_logits": false, "rms_norm_eps": 1e-05,
    "rope_parameters": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                        "original_max_position_embeddings": 4096, "rope_theta": 150000.0, "rope_type": "yarn",
                        "truncate": false},
    "router_aux_loss_coef": 0.9, "sliding_window": 8, "tie_word_embeddings": false,
    "transformers_version": "5.17.0", "use_cache": true, "vocab_size": 256,
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn",
      "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}})");
}

/// The compressed-tensors channel FP8 quantization_config of make_hf_tiny.py (as zai-org/GLM-4.5-Air-FP8).
json channel_fp8() {
  return json::parse(R"({"quant_method": "compressed-tensors", "format": "float-quantized",
    "quantization_status": "compressed", "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false,
                  "group_size": null},
      "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": true, "dynamic": true,
                            "group_size": null},
      "output_activations": null}},
    "ignore": ["lm_head", "model.layers.1.mlp.gate", "model.layers.2.mlp.gate"], "kv_cache_scheme": null})");
}

ModelProfile from_config(const json& config) {
  TempDir dir;
  testutil::write_bytes(dir / "config.json", config.dump(2));
  return profile_from_hf_config(dir.path());
}

/// The message profile_from_hf_config throws for `config`, with the temp directory's path replaced by "DIR".
std::string config_error(const json& config) {
  TempDir dir;
  testutil::write_bytes(dir / "config.json", config.dump(2));
  std::string message = error_message([&] { profile_from_hf_config(dir.path()); }, ErrorKind::Format);
  const std::string path = dir.path().string();
  for (size_t at = message.find(path); at != std::string::npos; at = message.find(path))
    message.replace(at, path.size(), "DIR");
  return message;
}

TEST(ProfileHf, Glm4MoeTransformers5Config) {
  const ModelProfile p = from_config(glm4_moe_v5());
  EXPECT_EQ(p.family, "glm4_moe");
  EXPECT_EQ(p.quantization, "none");
  EXPECT_EQ(p.dtype, DType::BF16);
  EXPECT_EQ(p.tensor_prefix, "");
  const ModelDims& d = p.dims;
  EXPECT_EQ(d.layers, 3);
  EXPECT_EQ(d.hidden, 128);
  EXPECT_EQ(d.intermediate, 96);
  EXPECT_EQ(d.moe_intermediate, 48);
  EXPECT_EQ(d.experts, 8);
  EXPECT_EQ(d.shared_experts, 1);
  EXPECT_EQ(d.top_k, 2);
  EXPECT_EQ(d.first_dense_layers, 1);
  EXPECT_EQ(d.heads, 8);
  EXPECT_EQ(d.kv_heads, 4);
  EXPECT_EQ(d.head_dim, 16);
  EXPECT_EQ(d.vocab, 256);
  EXPECT_EQ(d.rope_theta, 1e6);               // rope_parameters.rope_theta
  EXPECT_EQ(d.partial_rotary_factor, 0.5);    // rope_parameters.partial_rotary_factor
  EXPECT_EQ(d.rms_eps, 1e-5);
  EXPECT_TRUE(d.attention_bias);
  EXPECT_TRUE(d.norm_topk_prob);
  EXPECT_EQ(d.routed_scaling_factor, 1.0);
  EXPECT_EQ(p.canonical_tensors().size(), 1u + 3 * 9 + 3 + 2 * (2 + 8 * 3 + 3) + 2);

  json fp8 = glm4_moe_v5();
  fp8["quantization_config"] = channel_fp8();
  EXPECT_EQ(from_config(fp8).quantization, "fp8-channel");
}

TEST(ProfileHf, Glm4MoeOlderSpellingsAndDefaults) {
  // transformers 4.x: rope_theta and partial_rotary_factor at the top level, torch_dtype; defaults of Glm4MoeConfig.
  json j = glm4_moe_v5();
  j.erase("rope_parameters");
  j["rope_theta"] = 500000.0;
  j["partial_rotary_factor"] = 0.25;
  j.erase("dtype");
  j["torch_dtype"] = "float32";
  for (const char* key : {"head_dim", "n_shared_experts", "first_k_dense_replace", "norm_topk_prob",
                          "routed_scaling_factor", "attention_bias", "rms_norm_eps", "n_group", "topk_group"})
    j.erase(key);
  const ModelProfile p = from_config(j);
  EXPECT_EQ(p.dtype, DType::F32);
  EXPECT_EQ(p.dims.rope_theta, 500000.0);
  EXPECT_EQ(p.dims.partial_rotary_factor, 0.25);
  EXPECT_EQ(p.dims.head_dim, 16);  // hidden_size / num_attention_heads
  EXPECT_EQ(p.dims.shared_experts, 1);
  EXPECT_EQ(p.dims.first_dense_layers, 1);
  EXPECT_TRUE(p.dims.norm_topk_prob);
  EXPECT_EQ(p.dims.routed_scaling_factor, 1.0);
  EXPECT_FALSE(p.dims.attention_bias);
  EXPECT_EQ(p.dims.rms_eps, 1e-5);
  j.erase("partial_rotary_factor");
  EXPECT_EQ(from_config(j).dims.partial_rotary_factor, 0.5);  // Glm4MoeConfig's BC default
}

TEST(ProfileHf, DeepseekV3Transformers5ConfigWithYarn) {
  const ModelProfile p = from_config(deepseek_v3_v5());
  EXPECT_EQ(p.family, "deepseek_v3");
  EXPECT_EQ(p.quantization, "none");
  EXPECT_EQ(p.tensor_prefix, "");
  const ModelDims& d = p.dims;
  EXPECT_EQ(d.q_lora_rank, 64);
  EXPECT_EQ(d.kv_lora_rank, 32);
  EXPECT_EQ(d.qk_nope_head_dim, 16);
  EXPECT_EQ(d.qk_rope_head_dim, 8);
  EXPECT_EQ(d.v_head_dim, 16);
  EXPECT_EQ(d.first_dense_layers, 1);
  EXPECT_EQ(d.routed_scaling_factor, 2.827);
  EXPECT_EQ(d.rope_theta, 50000.0);
  EXPECT_EQ(d.rms_eps, 1e-6);
  EXPECT_EQ(d.kv_heads, 0);  // MLA: num_key_value_heads is not read
  EXPECT_EQ(d.head_dim, 0);  // nor head_dim (= qk_rope_head_dim)
  EXPECT_EQ(d.rope_scaling.factor, 32.0);
  EXPECT_EQ(d.rope_scaling.original_max_position, 4096);
  EXPECT_EQ(d.rope_scaling.beta_fast, 1.0);
  EXPECT_EQ(d.rope_scaling.beta_slow, 1.0);
  EXPECT_EQ(d.rope_scaling.mscale, 1.0);
  EXPECT_EQ(d.rope_scaling.mscale_all_dim, 1.0);
  EXPECT_TRUE(d.rope_scaling.truncate);
  EXPECT_EQ(p.canonical_tensors().front().name, "model.embed_tokens.weight");

  // The older spelling: rope_theta at the top, rope_scaling with "type"; YaRN's beta defaults 32 / 1.
  json j = deepseek_v3_v5();
  j.erase("rope_parameters");
  j["rope_theta"] = 10000.0;
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 40.0}, {"original_max_position_embeddings", 4096}};
  const ModelProfile old = from_config(j);
  EXPECT_EQ(old.dims.rope_theta, 10000.0);
  EXPECT_EQ(old.dims.rope_scaling.factor, 40.0);
  EXPECT_EQ(old.dims.rope_scaling.beta_fast, 32.0);
  EXPECT_EQ(old.dims.rope_scaling.beta_slow, 1.0);
  EXPECT_EQ(old.dims.rope_scaling.mscale, 0.0);
  j.erase("rope_scaling");
  EXPECT_EQ(from_config(j).dims.rope_scaling.factor, 0.0);  // plain RoPE
}

TEST(ProfileHf, KimiK25WrapperWithModelOptNvfp4) {
  const ModelProfile p = from_config(kimi_nvfp4());
  EXPECT_EQ(p.family, "deepseek_v3");
  EXPECT_EQ(p.quantization, "nvfp4");
  EXPECT_EQ(p.tensor_prefix, "language_model.");
  EXPECT_EQ(p.dtype, DType::BF16);  // text_config.dtype
  EXPECT_EQ(p.dims.layers, 3);
  EXPECT_EQ(p.raw.at("model_type"), "kimi_k25");
  const std::vector<TensorSpec> t = p.canonical_tensors();
  EXPECT_EQ(t.front().name, "language_model.model.embed_tokens.weight");
  EXPECT_EQ(t.back().name, "language_model.lm_head.weight");

  json bf16 = kimi_nvfp4();  // no quantization_config anywhere: BF16 experts
  bf16.erase("quantization_config");
  bf16["text_config"].erase("quantization_config");
  bf16["text_config"].erase("dtype");
  bf16["dtype"] = "bfloat16";  // the wrapper's dtype when text_config has none
  EXPECT_EQ(from_config(bf16).quantization, "none");

  json nested = kimi_nvfp4();  // hf_quant_config.json's form under "quantization", only in text_config
  nested.erase("quantization_config");
  nested["text_config"]["quantization_config"] = json::parse(
      R"({"quant_method": "modelopt", "quantization": {"quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}})");
  EXPECT_EQ(from_config(nested).quantization, "nvfp4");

  json groups = kimi_nvfp4();  // group size from the first config group (newer ModelOpt exports)
  groups["quantization_config"].erase("group_size");
  groups["quantization_config"]["config_groups"] = {{"group_0", {{"weights", {{"group_size", 16}}}}}};
  EXPECT_EQ(from_config(groups).quantization, "nvfp4");
}

TEST(ProfileHf, GptOssTransformers5ConfigWithMxfp4) {
  const ModelProfile p = from_config(gpt_oss_mxfp4());
  EXPECT_EQ(p.family, "gpt_oss");
  EXPECT_EQ(p.quantization, "mxfp4");
  const ModelDims& d = p.dims;
  EXPECT_EQ(d.layers, 2);
  EXPECT_EQ(d.hidden, 96);
  EXPECT_EQ(d.intermediate, 224);
  EXPECT_EQ(d.experts, 8);
  EXPECT_EQ(d.top_k, 4);
  EXPECT_EQ(d.heads, 8);
  EXPECT_EQ(d.kv_heads, 4);
  EXPECT_EQ(d.head_dim, 16);
  EXPECT_EQ(d.sliding_window, 8);
  EXPECT_EQ(d.swiglu_limit, 7.0);  // modeling_gpt_oss.py's default: GptOssConfig does not write it
  EXPECT_EQ(d.rope_theta, 150000.0);
  EXPECT_EQ(d.rope_scaling.factor, 32.0);
  EXPECT_EQ(d.rope_scaling.beta_fast, 32.0);
  EXPECT_FALSE(d.rope_scaling.truncate);
  EXPECT_TRUE(d.attention_bias);

  json openai = gpt_oss_mxfp4();  // openai/gpt-oss-120b spells top-k experts_per_token; rope_theta defaults 150000
  openai.erase("num_experts_per_tok");
  openai["experts_per_token"] = 4;
  openai["rope_parameters"].erase("rope_theta");
  openai["swiglu_limit"] = 7.0;
  EXPECT_EQ(from_config(openai).dims.top_k, 4);
  EXPECT_EQ(from_config(openai).dims.rope_theta, 150000.0);

  json per_layer = gpt_oss_mxfp4();  // one RoPE per layer type, the same for both
  const json rope = per_layer["rope_parameters"];
  per_layer["rope_parameters"] = {{"full_attention", rope}, {"sliding_attention", rope}};
  EXPECT_EQ(from_config(per_layer).dims.rope_scaling.factor, 32.0);
}

TEST(ProfileHf, UnsupportedFieldsAreRefusedNamingThem) {
  struct Case {
    std::function<json()> config;
    std::string message;
  };
  auto edit = [](json (*base)(), std::function<void(json&)> f) {
    return [base, f] {
      json j = base();
      f(j);
      return j;
    };
  };
  const std::string cfg = "DIR/config.json: field ";
  const std::vector<Case> cases = {
      {edit(glm4_moe_v5, [](json& j) { j["model_type"] = "qwen3_moe"; }),
       cfg + "'model_type': 'qwen3_moe' is not supported (supported: llama, glm4_moe, deepseek_v3, kimi_k25, gpt_oss)"},
      {edit(glm4_moe_v5, [](json& j) { j["n_group"] = 8; }),
       cfg + "'n_group': 8 is not supported (the forward routes over one expert group)"},
      {edit(glm4_moe_v5, [](json& j) { j["use_qk_norm"] = true; }),
       cfg + "'use_qk_norm': true is not supported (the glm4_moe forward has no q/k norm)"},
      {edit(glm4_moe_v5, [](json& j) { j["rope_parameters"]["rope_type"] = "yarn"; }),
       cfg + "'rope_parameters.rope_type': unsupported rope type 'yarn' (supported by family glm4_moe: default)"},
      {edit(glm4_moe_v5, [](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.3; }),
       cfg + "'rope_parameters.partial_rotary_factor': 0.3 must be in (0, 1] and make head_dim * factor an even "
             "integer (head_dim 16)"},
      {edit(glm4_moe_v5, [](json& j) { j["num_key_value_heads"] = 3; }),
       cfg + "'num_key_value_heads': 3 does not divide the 8 attention heads (GQA groups must be equal)"},
      {edit(glm4_moe_v5, [](json& j) { j["num_experts_per_tok"] = 9; }),
       cfg + "'num_experts_per_tok': 9 exceeds the 8 routed experts"},
      {edit(glm4_moe_v5, [](json& j) { j["tie_word_embeddings"] = true; }),
       cfg + "'tie_word_embeddings': true is not supported (family glm4_moe stores lm_head.weight apart from "
             "embed_tokens)"},
      {edit(glm4_moe_v5, [](json& j) { j.erase("n_routed_experts"); }), cfg + "'n_routed_experts': missing"},
      {edit(glm4_moe_v5, [](json& j) { j["dtype"] = "float8_e4m3fn"; }),
       cfg + "'dtype': 'float8_e4m3fn' is not a supported weight dtype (bfloat16, float16, float32)"},
      {edit(deepseek_v3_v5, [](json& j) { j.erase("n_group"); }),
       cfg + "'n_group': 8 is not supported (the forward routes over one expert group)"},
      {edit(deepseek_v3_v5, [](json& j) { j["topk_group"] = 4; }),
       cfg + "'topk_group': 4 is not supported (the forward routes over one expert group)"},
      {edit(deepseek_v3_v5, [](json& j) { j["scoring_func"] = "softmax"; }),
       cfg + "'scoring_func': 'softmax' is not supported (the forward scores experts with a sigmoid)"},
      {edit(deepseek_v3_v5, [](json& j) { j["topk_method"] = "greedy"; }),
       cfg + "'topk_method': 'greedy' is not supported (the forward selects experts by sigmoid + "
             "e_score_correction_bias)"},
      {edit(deepseek_v3_v5, [](json& j) { j["rope_interleave"] = false; }),
       cfg + "'rope_interleave': false is not supported (the deepseek_v3 forward rotates interleaved pairs)"},
      {edit(deepseek_v3_v5, [](json& j) { j["q_lora_rank"] = nullptr; }),
       cfg + "'q_lora_rank': missing or null: a q projection without the q_a/q_b low-rank pair is not supported"},
      {edit(deepseek_v3_v5, [](json& j) { j["rope_parameters"]["rope_type"] = "dynamic"; }),
       cfg + "'rope_parameters.rope_type': unsupported rope type 'dynamic' (supported by family deepseek_v3: "
             "default, yarn)"},
      {edit(deepseek_v3_v5, [](json& j) { j["rope_parameters"].erase("original_max_position_embeddings"); }),
       cfg + "'rope_parameters.original_max_position_embeddings': missing (YaRN needs it)"},
      {edit(deepseek_v3_v5, [](json& j) { j["rope_parameters"]["attention_factor"] = 1.2; }),
       cfg + "'rope_parameters.attention_factor': an explicit YaRN attention factor is not supported (wsbench "
             "derives it from factor, mscale and mscale_all_dim)"},
      {edit(deepseek_v3_v5, [](json& j) { j["rope_parameters"]["factor"] = -2; }),
       cfg + "'rope_parameters.factor': must be > 0, got -2"},
      {edit(deepseek_v3_v5, [](json& j) { j["qk_rope_head_dim"] = 7; }),
       cfg + "'qk_rope_head_dim': must be even for RoPE, got 7"},
      {edit(kimi_nvfp4, [](json& j) { j["text_config"]["model_type"] = "qwen3"; }),
       cfg + "'text_config.model_type': 'qwen3' is not supported (a kimi_k25 text_config is deepseek_v3)"},
      {edit(kimi_nvfp4, [](json& j) { j["text_config"]["n_group"] = 8; }),
       cfg + "'text_config.n_group': 8 is not supported (the forward routes over one expert group)"},
      {edit(kimi_nvfp4, [](json& j) { j["quantization_config"]["group_size"] = 32; }),
       cfg + "'quantization_config.group_size': 32 is not supported (NVFP4 scales blocks of 16 elements)"},
      {edit(kimi_nvfp4, [](json& j) { j["quantization_config"]["quant_algo"] = "FP8"; }),
       cfg + "'quantization_config.quant_algo': 'FP8' is not supported (supported: NVFP4, group_size 16)"},
      {edit(kimi_nvfp4, [](json& j) { j["quantization_config"]["kv_cache_quant_algo"] = "FP8"; }),
       cfg + "'quantization_config.kv_cache_quant_algo': \"FP8\" is not supported (KV-cache scales are not "
             "modelled)"},
      {edit(kimi_nvfp4, [](json& j) { j["text_config"]["hidden_size"] = 120; }),
       cfg + "'text_config.hidden_size': 120 is not a multiple of 16 (NVFP4 gate/up_proj K needs whole 16-element "
             "scale blocks)"},
      {edit(kimi_nvfp4, [](json& j) { j["quantization_config"] = channel_fp8(); }),
       cfg + "'quantization_config.quant_method': 'compressed-tensors' (compressed-tensors channel FP8) is not "
             "supported by family deepseek_v3 (supported: nvfp4, none)"},
      {edit(glm4_moe_v5,
            [](json& j) {
              j["quantization_config"] = channel_fp8();
              j["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"] = "block";
            }),
       cfg + "'quantization_config.config_groups.group_0.weights.strategy': 'block' is not supported (wsbench models "
             "channel FP8: one F32 weight_scale [out, 1] per output row; block FP8 stores weight_scale per block)"},
      {edit(glm4_moe_v5,
            [](json& j) {
              j["quantization_config"] = channel_fp8();
              j["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 4;
            }),
       cfg + "'quantization_config.config_groups.group_0.weights.num_bits': 4 is not supported (expected 8: 8-bit "
             "weights)"},
      {edit(glm4_moe_v5,
            [](json& j) {
              j["quantization_config"] = channel_fp8();
              j["quantization_config"]["config_groups"]["group_0"]["input_activations"]["dynamic"] = false;
            }),
       cfg + "'quantization_config.config_groups.group_0.input_activations.dynamic': static activation "
             "quantization is not supported (it stores an input_scale per layer); dynamic or absent "
             "input_activations are"},
      {edit(glm4_moe_v5,
            [](json& j) {
              j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
            }),
       cfg + "'quantization_config.quant_method': 'fp8' is not supported (supported: compressed-tensors channel "
             "FP8, modelopt NVFP4, mxfp4; 'fp8' is block FP8 with weight_scale_inv per block)"},
      {edit(glm4_moe_v5, [](json& j) { j["quantization_config"] = {{"quant_method", "mxfp4"}}; }),
       cfg + "'quantization_config.quant_method': 'mxfp4' (MXFP4) is not supported by family glm4_moe (supported: "
             "fp8-channel, none)"},
      {edit(gpt_oss_mxfp4,
            [](json& j) { j["layer_types"] = {"full_attention", "sliding_attention"}; }),
       cfg + "'layer_types': [\"full_attention\",\"sliding_attention\"] is not supported (the gpt_oss forward slides "
             "on even layers: [\"sliding_attention\",\"full_attention\"])"},
      {edit(gpt_oss_mxfp4, [](json& j) { j["experts_per_token"] = 2; }),
       cfg + "'experts_per_token': 2 disagrees with num_experts_per_tok 4"},
      {edit(gpt_oss_mxfp4, [](json& j) { j["intermediate_size"] = 200; }),
       cfg + "'intermediate_size': 200 is not a multiple of 32 (MXFP4 down_proj K needs whole 32-element blocks)"},
      {edit(gpt_oss_mxfp4,
            [](json& j) {
              const json rope = j["rope_parameters"];
              json other = rope;
              other["rope_theta"] = 10000.0;
              j["rope_parameters"] = {{"full_attention", rope}, {"sliding_attention", other}};
            }),
       cfg + "'rope_parameters.sliding_attention': RoPE parameters that differ per layer type are not supported "
             "(wsbench applies one RoPE to every layer)"},
  };
  for (const Case& c : cases) {
    const json j = c.config();
    SCOPED_TRACE(j.dump());
    EXPECT_EQ(config_error(j), c.message);
  }
}

}  // namespace
}  // namespace wsb
