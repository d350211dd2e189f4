// config.json of FULL checkpoints (models/profile/hf_config_write.hpp): exact keys and values per tiny preset and
// for full-size and scaled profiles, written out from the profile JSONs' dims by hand (the upstream key names are
// those of transformers' LlamaConfig / Glm4MoeConfig / DeepseekV3Config / GptOssConfig and of the public
// quantization formats); every profile's config read back by profile_from_hf_config gives the same profile; a
// Hugging Face directory's own config.json is copied verbatim, with the scaled counts where the family keeps them.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "core/errors.hpp"
#include "models/profile/hf_config_write.hpp"
#include "models/profile/profile.hpp"
#include "tests/models/checkpoint_test_util.hpp"
#include "tests/support/profile_dims.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;

using nlohmann::json;

/// The compressed-tensors channel-FP8 quantization_config wsbench writes for fp8-channel profiles, with `ignore`
/// (the unquantized modules) as given.
json channel_fp8_quantization_config(const json& ignore) {
  json q = json::parse(R"({
      "quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
      "config_groups": {"group_0": {
        "targets": ["Linear"],
        "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false,
                    "group_size": null},
        "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "symmetric": true,
                              "dynamic": true, "group_size": null},
        "output_activations": null}},
      "kv_cache_scheme": null})");
  q["ignore"] = ignore;
  return q;
}

const fs::path kProfiles = WSBENCH_PROFILES_DIR;
const fs::path kHfTiny = fs::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny";

using testutil::read_bytes;
using testutil::TempDir;
using testutil::write_bytes;

ModelProfile profile(const std::string& id) { return find_profile(id, kProfiles); }

/// Exact equality including number types (1.0 stays a float, 1 an integer): both sides as sorted dumps.
void expect_json(const json& actual, const json& expected) {
  EXPECT_EQ(actual.dump(2), expected.dump(2)) << "patch expected -> actual: " << json::diff(expected, actual).dump();
}

using test::expect_error;

TEST(HfConfigWrite, LlamaTinyKeys) {
  expect_json(hf_config_json(profile("llama-tiny-bf16")), json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8,
    "num_key_value_heads": 4, "head_dim": 16, "vocab_size": 512, "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": false, "hidden_act": "silu", "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16", "attention_bias": false, "mlp_bias": false})"));
}

TEST(HfConfigWrite, GlmTinyKeysAndCompressedTensorsChannelFp8) {
  // glm-tiny-fp8: layer 0 dense, layers 1-2 MoE; fp8-channel = compressed-tensors FP8 weights per output channel
  // (weight_scale [out, 1]) with dynamic per-token activations; lm_head and the MoE routers stay BF16.
  json tiny = json::parse(R"({
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe",
    "hidden_size": 128, "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 8,
    "num_key_value_heads": 4, "head_dim": 16, "vocab_size": 512, "rope_theta": 1000000.0, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": false, "hidden_act": "silu", "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16", "partial_rotary_factor": 0.5, "attention_bias": true,
    "moe_intermediate_size": 48, "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
    "first_k_dense_replace": 1, "norm_topk_prob": true, "routed_scaling_factor": 1.0,
    "n_group": 1, "topk_group": 1, "use_qk_norm": false, "num_nextn_predict_layers": 0})");
  tiny["quantization_config"] =
      channel_fp8_quantization_config(json::array({"lm_head", "model.layers.1.mlp.gate", "model.layers.2.mlp.gate"}));
  expect_json(hf_config_json(profile("glm-tiny-fp8")), tiny);
}

TEST(HfConfigWrite, KimiTinyIsTheKimiK25WrapperWithModelOptNvfp4) {
  // tensor_prefix "language_model.": the decoder's keys go to text_config; NVFP4 covers routed experts only.
  expect_json(hf_config_json(profile("kimi-tiny-nvfp4")), json::parse(R"({
    "architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
    "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "quantization_config": {
      "quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "kv_cache_scheme": null,
      "ignore": ["language_model.lm_head", "language_model.model.layers.*.self_attn*",
                 "language_model.model.layers.*.mlp.shared_experts*", "language_model.model.layers.*.mlp.gate",
                 "language_model.model.layers.0.mlp*"]},
    "text_config": {
      "model_type": "deepseek_v3",
      "hidden_size": 128, "intermediate_size": 192, "num_hidden_layers": 3, "num_attention_heads": 8,
      "num_key_value_heads": 8, "vocab_size": 512, "rope_theta": 50000.0, "rms_norm_eps": 1e-06,
      "tie_word_embeddings": false, "hidden_act": "silu", "max_position_embeddings": 131072,
      "torch_dtype": "bfloat16",
      "q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
      "attention_bias": false, "moe_intermediate_size": 64, "n_routed_experts": 8, "n_shared_experts": 1,
      "num_experts_per_tok": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1, "norm_topk_prob": true,
      "routed_scaling_factor": 2.827, "topk_method": "noaux_tc", "scoring_func": "sigmoid",
      "n_group": 1, "topk_group": 1, "num_nextn_predict_layers": 0,
      "rope_scaling": {"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
                       "beta_fast": 1.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}}})"));
}

TEST(HfConfigWrite, DeepseekV3WithoutPrefixIsDeepseekV3ForCausalLM) {
  json raw = profile("kimi-tiny-nvfp4").raw;
  raw.erase("tensor_prefix");
  const json j = hf_config_json(parse_profile(raw, "kimi-tiny-nvfp4 without prefix"));
  EXPECT_EQ(j.at("architectures"), json::array({"DeepseekV3ForCausalLM"}));
  EXPECT_EQ(j.at("model_type"), "deepseek_v3");
  EXPECT_FALSE(j.contains("text_config"));
  EXPECT_EQ(j.at("n_routed_experts"), 8);
  EXPECT_EQ(j.at("quantization_config").at("ignore"),
            json::parse(R"(["lm_head", "model.layers.*.self_attn*", "model.layers.*.mlp.shared_experts*",
                            "model.layers.*.mlp.gate", "model.layers.0.mlp*"])"));

  raw["tensor_prefix"] = "decoder.";
  expect_error([&] { hf_config_json(parse_profile(raw, "decoder-prefixed")); }, ErrorKind::Format,
               {"tensor_prefix 'decoder.'"});
}

TEST(HfConfigWrite, GptOssTinyKeysAndMxfp4) {
  expect_json(hf_config_json(profile("gpt-oss-tiny-mxfp4")), json::parse(R"({
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
    "hidden_size": 96, "intermediate_size": 224, "num_hidden_layers": 2, "num_attention_heads": 8,
    "num_key_value_heads": 4, "head_dim": 16, "vocab_size": 512, "rope_theta": 150000.0, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": false, "hidden_act": "silu", "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16", "num_local_experts": 8, "num_experts_per_tok": 4, "experts_per_token": 4,
    "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"], "swiglu_limit": 7.0,
    "attention_bias": true,
    "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
                     "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false},
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
      "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}})"));
}

TEST(HfConfigWrite, GptOssBf16HasNoQuantizationConfig) {
  // transformers' save_pretrained of an unquantized GptOssForCausalLM writes no quantization_config; every other key
  // is the MXFP4 preset's.
  json want = hf_config_json(profile("gpt-oss-tiny-mxfp4"));
  want.erase("quantization_config");
  expect_json(hf_config_json(profile("gpt-oss-tiny-bf16")), want);
  EXPECT_FALSE(hf_config_json(profile("gpt-oss-120b-bf16")).contains("quantization_config"));
  EXPECT_EQ(hf_config_json(profile("gpt-oss-120b-bf16")).at("num_local_experts"), 128);
}

TEST(HfConfigWrite, Glm45AirFullSizeMatchesTheUpstreamConfigValues) {
  // The values the profile's "source" cites from zai-org/GLM-4.5-Air-FP8 config.json (MTP layer 46 left out).
  json ignore = json::array({"lm_head"});
  for (int i = 1; i < 46; ++i) ignore.push_back("model.layers." + std::to_string(i) + ".mlp.gate");
  json expected = json::parse(R"({
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe",
    "hidden_size": 4096, "intermediate_size": 10944, "num_hidden_layers": 46, "num_attention_heads": 96,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151552, "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "hidden_act": "silu", "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16", "partial_rotary_factor": 0.5, "attention_bias": true,
    "moe_intermediate_size": 1408, "n_routed_experts": 128, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 1, "norm_topk_prob": true, "routed_scaling_factor": 1.0,
    "n_group": 1, "topk_group": 1, "use_qk_norm": false, "num_nextn_predict_layers": 0})");
  expected["quantization_config"] = channel_fp8_quantization_config(ignore);
  expect_json(hf_config_json(profile("glm-4.5-air-fp8")), expected);
}

TEST(HfConfigWrite, ScaledProfilesDescribeTheScaledCheckpoint) {
  const json kimi = hf_config_json(scale_profile(profile("kimi-k2.6-nvfp4"), ProfileScale{4, 16}));
  const json& text = kimi.at("text_config");
  EXPECT_EQ(text.at("num_hidden_layers"), 4);
  EXPECT_EQ(text.at("n_routed_experts"), 16);
  EXPECT_EQ(text.at("num_experts_per_tok"), 8);
  EXPECT_EQ(text.at("hidden_size"), 7168);
  EXPECT_EQ(text.at("vocab_size"), 163840);
  EXPECT_EQ(text.at("max_position_embeddings"), 131072);  // yarn factor 32 x original 4096
  EXPECT_EQ(kimi.at("quantization_config").at("ignore").back(), "language_model.model.layers.0.mlp*");

  const json oss = hf_config_json(scale_profile(profile("gpt-oss-120b-mxfp4"), ProfileScale{3, 4}));
  EXPECT_EQ(oss.at("num_hidden_layers"), 3);
  EXPECT_EQ(oss.at("num_local_experts"), 4);
  EXPECT_EQ(oss.at("layer_types"), json::parse(R"(["sliding_attention", "full_attention", "sliding_attention"])"));
  EXPECT_EQ(oss.at("head_dim"), 64);

  const json glm = hf_config_json(scale_profile(profile("glm-4.5-air-fp8"), ProfileScale{3}));
  EXPECT_EQ(glm.at("quantization_config").at("ignore"),
            json::parse(R"(["lm_head", "model.layers.1.mlp.gate", "model.layers.2.mlp.gate"])"));
}

TEST(HfConfigWrite, TextIsTheSortedDumpWithANewline) {
  const ModelProfile p = profile("gpt-oss-tiny-mxfp4");
  const std::string text = hf_config_text(p);
  EXPECT_EQ(text, hf_config_json(p).dump(2) + "\n");
  EXPECT_EQ(text.rfind("{\n  \"architectures\": [\n    \"GptOssForCausalLM\"\n  ],\n", 0), 0u) << text;
}

TEST(HfConfigWrite, Bf16VariantsAreTheQuantizedConfigsWithoutQuantizationConfig) {
  for (const auto& [bf16, quantized] : {std::pair{"glm-tiny-bf16", "glm-tiny-fp8"},
                                        {"kimi-tiny-bf16", "kimi-tiny-nvfp4"},
                                        {"glm-4.5-air-bf16", "glm-4.5-air-fp8"},
                                        {"kimi-k2.6-bf16", "kimi-k2.6-nvfp4"}}) {
    SCOPED_TRACE(bf16);
    json expected = hf_config_json(profile(quantized));
    ASSERT_TRUE(expected.contains("quantization_config"));
    expected.erase("quantization_config");
    expect_json(hf_config_json(profile(bf16)), expected);
  }
}

/// The config written for a profile and read back by profile_from_hf_config gives the same profile.
void expect_round_trip(const ModelProfile& p) {
  SCOPED_TRACE(p.id);
  TempDir dir;
  write_bytes(dir / "config.json", hf_config_text(p));
  const ModelProfile back = profile_from_hf_config(dir.path());
  test::expect_same_profile(back, p);
}

TEST(HfConfigWrite, EveryProfileRoundTripsThroughProfileFromHfConfig) {
  const std::vector<ModelProfile> all = list_profiles(kProfiles);
  EXPECT_EQ(all.size(), 14u);
  for (const ModelProfile& p : all) expect_round_trip(p);
  expect_round_trip(scale_profile(profile("llama-3.1-8b-bf16"), ProfileScale{2}));
  expect_round_trip(scale_profile(profile("kimi-k2.6-nvfp4"), ProfileScale{3, 16}));
  expect_round_trip(scale_profile(profile("glm-4.5-air-bf16"), ProfileScale{2, 8}));
  json raw = profile("llama-tiny-bf16").raw;  // tied embeddings and another dtype travel too
  raw["dims"]["tie_embeddings"] = true;
  raw["dtype"] = "F16";
  expect_round_trip(parse_profile(raw, "llama-tiny tied f16"));
  raw = profile("kimi-tiny-bf16").raw;  // the deepseek_v3 form without the Kimi wrapper
  raw.erase("tensor_prefix");
  expect_round_trip(parse_profile(raw, "kimi-tiny-bf16 without prefix"));
}

TEST(HfConfigWrite, ScaledHfDirProfileKeepsItsConfigWithTheScaledCounts) {
  // A Kimi wrapper config read back from a directory: the counts live in text_config.
  TempDir dir;
  write_bytes(dir / "config.json", hf_config_text(profile("kimi-tiny-nvfp4")));
  const ModelProfile hf = profile_from_hf_config(dir.path());
  const json scaled = hf_config_json(scale_profile(hf, ProfileScale{2, 4}));
  json expected = json::parse(read_bytes(dir / "config.json"));
  expected["text_config"]["num_hidden_layers"] = 2;
  expected["text_config"]["n_routed_experts"] = 4;
  expect_json(scaled, expected);
  EXPECT_EQ(hf_config_text(hf), read_bytes(dir / "config.json"));  // unscaled: verbatim
}

TEST(HfConfigWrite, HfDirProfileCopiesItsConfigVerbatim) {
  const ModelProfile hf = profile_from_hf_dir(kHfTiny);
  EXPECT_EQ(hf_config_text(hf), read_bytes(kHfTiny / "config.json"));
  // Scaled: the same config with the kept layer count.
  const ModelProfile two = scale_profile(hf, ProfileScale{2});
  json expected = json::parse(read_bytes(kHfTiny / "config.json"));
  expected["num_hidden_layers"] = 2;
  expect_json(json::parse(hf_config_text(two)), expected);
  EXPECT_EQ(json::parse(hf_config_text(two)).at("transformers_version"), "5.17.0");

  ModelProfile gone = hf;
  gone.hf_dir = "/nonexistent/wsb-hf-dir";
  expect_error([&] { hf_config_text(gone); }, ErrorKind::Missing, {"/nonexistent/wsb-hf-dir/config.json"});
}

TEST(HfConfigWrite, UnmappedFamilyOrQuantizationIsRefused) {
  ModelProfile p = profile("llama-tiny-bf16");
  p.family = "mamba";
  expect_error([&] { hf_config_json(p); }, ErrorKind::Format, {"family 'mamba' has no mapping"});
  p = profile("llama-tiny-bf16");
  p.quantization = "nvfp4";
  expect_error([&] { hf_config_json(p); }, ErrorKind::Format, {"quantization 'nvfp4'"});
}

}  // namespace
}  // namespace wsb
