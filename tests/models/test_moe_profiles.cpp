// Profiles of the MoE families (quantized, and gpt_oss with BF16 experts): exact canonical bytes of the real
// profiles (literal and re-derived from the dims), tensor names/dtypes/shapes at chosen indices, tiny presets,
// schema errors naming file and field,
// the `experts`/`layers` scaling knobs, and the forward factory's error for a family without a forward pass.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/errors.hpp"
#include "models/forward/forward.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

const std::filesystem::path kProfiles = WSBENCH_PROFILES_DIR;

using test::expect_error;

nlohmann::json profile_json(const std::string& id) {
  std::ifstream in(kProfiles / (id + ".json"));
  return nlohmann::json::parse(in);
}

TEST(MoeProfiles, AllShippedProfilesParseAndLayOut) {
  std::set<std::string> ids;
  for (const ModelProfile& p : list_profiles(kProfiles)) {
    ids.insert(p.id);
    // What `wsbench models` does for every profile (cli/cmd_models.cpp) must not throw at TP 1..8.
    if (p.tiny) {
      for (int tp : {1, 2, 4, 8}) EXPECT_EQ(build_rank_layouts(p, tp).size(), static_cast<size_t>(tp)) << p.id;
    }
  }
  for (const char* id : {"glm-4.5-air-fp8", "glm-tiny-fp8", "kimi-k2.6-nvfp4", "kimi-tiny-nvfp4", "gpt-oss-120b-mxfp4",
                         "gpt-oss-tiny-mxfp4", "gpt-oss-120b-bf16", "gpt-oss-tiny-bf16", "llama-3.1-8b-bf16",
                         "llama-tiny-bf16"})
    EXPECT_TRUE(ids.count(id)) << id;
}

TEST(MoeProfiles, Glm45AirFp8RealDimsAndBytes) {
  ModelProfile p = find_profile("glm-4.5-air-fp8", kProfiles);
  EXPECT_EQ(p.family, "glm4_moe");
  EXPECT_EQ(p.quantization, "fp8-channel");
  const ModelDims& d = p.dims;
  EXPECT_EQ(d.layers, 46);
  EXPECT_EQ(d.first_dense_layers, 1);
  EXPECT_EQ(d.hidden, 4096);
  EXPECT_EQ(d.intermediate, 10944);
  EXPECT_EQ(d.moe_intermediate, 1408);
  EXPECT_EQ(d.experts, 128);
  EXPECT_EQ(d.shared_experts, 1);
  EXPECT_EQ(d.top_k, 8);
  EXPECT_EQ(d.heads, 96);
  EXPECT_EQ(d.kv_heads, 8);
  EXPECT_EQ(d.head_dim, 128);
  EXPECT_EQ(d.vocab, 151552);
  EXPECT_EQ(d.partial_rotary_factor, 0.5);
  EXPECT_EQ(d.rope_theta, 1e6);
  EXPECT_TRUE(d.attention_bias);
  EXPECT_TRUE(d.norm_topk_prob);
  EXPECT_NE(p.raw.at("source").get<std::string>().find("zai-org/GLM-4.5-Air-FP8"), std::string::npos);

  // Re-derive the bytes: FP8 weights 1 B/param + F32 scale per output row; BF16 embeddings, norms, biases, router;
  // F32 correction bias.
  auto fp8 = [](uint64_t out, uint64_t in) { return out * in + out * 4; };
  const uint64_t h = 4096, q = 96 * 128, kv = 8 * 128, v = 151552;
  const uint64_t attn = fp8(q, h) + 2 * fp8(kv, h) + fp8(h, q) + (q + 2 * kv) * 2;
  const uint64_t norms = 2 * h * 2;
  const uint64_t mlp = [&](uint64_t i) { return 2 * fp8(i, h) + fp8(h, i); }(10944);
  const uint64_t expert = 2 * fp8(1408, h) + fp8(h, 1408);
  const uint64_t moe = 128 * h * 2 + 128 * 4 + 129 * expert;  // router + bias + 128 routed + 1 shared
  const uint64_t total = 2 * v * h * 2 + h * 2 + (attn + norms + mlp) + 45 * (attn + norms + moe);
  EXPECT_EQ(total, 108'282'407'936ull);
  EXPECT_EQ(p.canonical_bytes(), 108'282'407'936ull);

  std::vector<TensorSpec> t = p.canonical_tensors();
  ASSERT_EQ(t.size(), 35'527u);  // 3 + dense layer 19 + 45 MoE layers x 789
  EXPECT_EQ(t[2], (TensorSpec{"model.layers.0.self_attn.q_proj.weight", DType::F8_E4M3, {12288, 4096}}));
  EXPECT_EQ(t[3], (TensorSpec{"model.layers.0.self_attn.q_proj.weight_scale", DType::F32, {12288, 1}}));
  EXPECT_EQ(t[4], (TensorSpec{"model.layers.0.self_attn.q_proj.bias", DType::BF16, {12288}}));
  EXPECT_EQ(t[11], (TensorSpec{"model.layers.0.self_attn.o_proj.weight", DType::F8_E4M3, {4096, 12288}}));
  EXPECT_EQ(t[18], (TensorSpec{"model.layers.0.mlp.down_proj.weight", DType::F8_E4M3, {4096, 10944}}));
  EXPECT_EQ(t[33], (TensorSpec{"model.layers.1.mlp.gate.weight", DType::BF16, {128, 4096}}));
  EXPECT_EQ(t[34], (TensorSpec{"model.layers.1.mlp.gate.e_score_correction_bias", DType::F32, {128}}));
  EXPECT_EQ(t[35], (TensorSpec{"model.layers.1.mlp.experts.0.gate_proj.weight", DType::F8_E4M3, {1408, 4096}}));
  EXPECT_EQ(t[40], (TensorSpec{"model.layers.1.mlp.experts.0.down_proj.weight_scale", DType::F32, {4096, 1}}));
  EXPECT_EQ(t[35 + 127 * 6 + 4],
            (TensorSpec{"model.layers.1.mlp.experts.127.down_proj.weight", DType::F8_E4M3, {4096, 1408}}));
  EXPECT_EQ(t[35 + 128 * 6],
            (TensorSpec{"model.layers.1.mlp.shared_experts.gate_proj.weight", DType::F8_E4M3, {1408, 4096}}));
  EXPECT_EQ(t[35'524],
            (TensorSpec{"model.layers.45.mlp.shared_experts.down_proj.weight_scale", DType::F32, {4096, 1}}));
  EXPECT_EQ(t.back(), (TensorSpec{"lm_head.weight", DType::BF16, {151552, 4096}}));
}

TEST(MoeProfiles, KimiK26Nvfp4RealDimsAndBytes) {
  ModelProfile p = find_profile("kimi-k2.6-nvfp4", kProfiles);
  EXPECT_EQ(p.family, "deepseek_v3");
  EXPECT_EQ(p.quantization, "nvfp4");
  EXPECT_EQ(p.tensor_prefix, "language_model.");
  const ModelDims& d = p.dims;
  EXPECT_EQ(d.layers, 61);
  EXPECT_EQ(d.hidden, 7168);
  EXPECT_EQ(d.intermediate, 18432);
  EXPECT_EQ(d.moe_intermediate, 2048);
  EXPECT_EQ(d.experts, 384);
  EXPECT_EQ(d.top_k, 8);
  EXPECT_EQ(d.heads, 64);
  EXPECT_EQ(d.q_lora_rank, 1536);
  EXPECT_EQ(d.kv_lora_rank, 512);
  EXPECT_EQ(d.qk_nope_head_dim, 128);
  EXPECT_EQ(d.qk_rope_head_dim, 64);
  EXPECT_EQ(d.v_head_dim, 128);
  EXPECT_EQ(d.vocab, 163840);
  EXPECT_EQ(d.routed_scaling_factor, 2.827);
  EXPECT_EQ(d.rope_scaling.factor, 32.0);
  EXPECT_EQ(d.rope_scaling.original_max_position, 4096);

  // NVFP4 expert linear [N, K]: N*K/2 packed bytes + N*K/16 E4M3 scales + two F32 scalars.
  auto nvfp4 = [](uint64_t n, uint64_t k) { return n * k / 2 + n * k / 16 + 8; };
  const uint64_t h = 7168, v = 163840;
  const uint64_t attn = (1536 * h + 1536 + 64 * 192 * 1536 + 576 * h + 512 + 64 * 256 * 512 + h * 64 * 128) * 2;
  const uint64_t norms = 2 * h * 2;
  const uint64_t dense = 3 * 18432 * h * 2;
  const uint64_t moe = 384 * h * 2 + 384 * 4 + 384 * (2 * nvfp4(2048, h) + nvfp4(h, 2048)) + 3 * 2048 * h * 2;
  const uint64_t total = 2 * v * h * 2 + h * 2 + (attn + norms + dense) + 60 * (attn + norms + moe);
  EXPECT_EQ(total, 594'205'904'896ull);
  EXPECT_EQ(p.canonical_bytes(), 594'205'904'896ull);

  std::vector<TensorSpec> t = p.canonical_tensors();
  ASSERT_EQ(t.size(), 277'335u);
  EXPECT_EQ(t[0], (TensorSpec{"language_model.model.embed_tokens.weight", DType::BF16, {163840, 7168}}));
  EXPECT_EQ(t[16], (TensorSpec{"language_model.model.layers.1.self_attn.q_b_proj.weight", DType::BF16, {12288, 1536}}));
  EXPECT_EQ(t[17], (TensorSpec{
                       "language_model.model.layers.1.self_attn.kv_a_proj_with_mqa.weight", DType::BF16, {576, 7168}}));
  EXPECT_EQ(t[19], (TensorSpec{"language_model.model.layers.1.self_attn.kv_b_proj.weight", DType::BF16, {16384, 512}}));
  EXPECT_EQ(t[23], (TensorSpec{"language_model.model.layers.1.mlp.gate.e_score_correction_bias", DType::F32, {384}}));
  EXPECT_EQ(t[24],
            (TensorSpec{"language_model.model.layers.1.mlp.experts.0.gate_proj.weight", DType::U8, {2048, 3584}}));
  EXPECT_EQ(
      t[25],
      (TensorSpec{"language_model.model.layers.1.mlp.experts.0.gate_proj.weight_scale", DType::F8_E4M3, {2048, 448}}));
  EXPECT_EQ(t[26],
            (TensorSpec{"language_model.model.layers.1.mlp.experts.0.gate_proj.weight_scale_2", DType::F32, {}}));
  EXPECT_EQ(t[27], (TensorSpec{"language_model.model.layers.1.mlp.experts.0.gate_proj.input_scale", DType::F32, {}}));
  EXPECT_EQ(t[32],
            (TensorSpec{"language_model.model.layers.1.mlp.experts.0.down_proj.weight", DType::U8, {7168, 1024}}));
  EXPECT_EQ(
      t[33],
      (TensorSpec{"language_model.model.layers.1.mlp.experts.0.down_proj.weight_scale", DType::F8_E4M3, {7168, 128}}));
  EXPECT_EQ(
      t[24 + 384 * 12],
      (TensorSpec{"language_model.model.layers.1.mlp.shared_experts.gate_proj.weight", DType::BF16, {2048, 7168}}));
  EXPECT_EQ(t.back(), (TensorSpec{"language_model.lm_head.weight", DType::BF16, {163840, 7168}}));
}

TEST(MoeProfiles, GptOss120bMxfp4RealDimsAndBytes) {
  ModelProfile p = find_profile("gpt-oss-120b-mxfp4", kProfiles);
  EXPECT_EQ(p.family, "gpt_oss");
  EXPECT_EQ(p.quantization, "mxfp4");
  const ModelDims& d = p.dims;
  EXPECT_EQ(d.layers, 36);
  EXPECT_EQ(d.hidden, 2880);
  EXPECT_EQ(d.intermediate, 2880);
  EXPECT_EQ(d.experts, 128);
  EXPECT_EQ(d.top_k, 4);
  EXPECT_EQ(d.heads, 64);
  EXPECT_EQ(d.kv_heads, 8);
  EXPECT_EQ(d.head_dim, 64);
  EXPECT_EQ(d.vocab, 201088);
  EXPECT_EQ(d.sliding_window, 128);
  EXPECT_EQ(d.swiglu_limit, 7.0);
  EXPECT_TRUE(d.attention_bias);
  EXPECT_EQ(d.rope_scaling.beta_fast, 32.0);

  const uint64_t h = 2880, q = 64 * 64, kv = 8 * 64, e = 128, i = 2880, v = 201088;
  const uint64_t attn = (q * h + q + 2 * (kv * h + kv) + h * q + h + 64) * 2;
  // MXFP4 [E, N, K]: N*K/2 value bytes + N*K/32 E8M0 bytes per expert; biases BF16.
  const uint64_t experts = e * (2 * i * h / 2 + 2 * i * h / 32 + 2 * i * 2) + e * (h * i / 2 + h * i / 32 + h * 2);
  const uint64_t layer = attn + 2 * h * 2 + e * h * 2 + e * 2 + experts;
  EXPECT_EQ(2 * v * h * 2 + h * 2 + 36 * layer, 65'248'815'744ull);
  EXPECT_EQ(p.canonical_bytes(), 65'248'815'744ull);

  std::vector<TensorSpec> t = p.canonical_tensors();
  ASSERT_EQ(t.size(), 687u);
  EXPECT_EQ(t[9], (TensorSpec{"model.layers.0.self_attn.o_proj.bias", DType::BF16, {2880}}));
  EXPECT_EQ(t[10], (TensorSpec{"model.layers.0.self_attn.sinks", DType::BF16, {64}}));
  EXPECT_EQ(t[13], (TensorSpec{"model.layers.0.mlp.router.bias", DType::BF16, {128}}));
  EXPECT_EQ(t[14], (TensorSpec{"model.layers.0.mlp.experts.gate_up_proj_blocks", DType::U8, {128, 5760, 90, 16}}));
  EXPECT_EQ(t[15], (TensorSpec{"model.layers.0.mlp.experts.gate_up_proj_scales", DType::U8, {128, 5760, 90}}));
  EXPECT_EQ(t[16], (TensorSpec{"model.layers.0.mlp.experts.gate_up_proj_bias", DType::BF16, {128, 5760}}));
  EXPECT_EQ(t[17], (TensorSpec{"model.layers.0.mlp.experts.down_proj_blocks", DType::U8, {128, 2880, 90, 16}}));
  EXPECT_EQ(t[18], (TensorSpec{"model.layers.0.mlp.experts.down_proj_scales", DType::U8, {128, 2880, 90}}));
  EXPECT_EQ(t[19], (TensorSpec{"model.layers.0.mlp.experts.down_proj_bias", DType::BF16, {128, 2880}}));
  EXPECT_EQ(t[686], (TensorSpec{"lm_head.weight", DType::BF16, {201088, 2880}}));
}

TEST(MoeProfiles, GptOss120bBf16RealDimsAndBytes) {
  ModelProfile p = find_profile("gpt-oss-120b-bf16", kProfiles);
  ModelProfile mx = find_profile("gpt-oss-120b-mxfp4", kProfiles);
  EXPECT_EQ(p.family, "gpt_oss");
  EXPECT_EQ(p.quantization, "none");
  EXPECT_EQ(p.dtype, DType::BF16);
  EXPECT_FALSE(p.tiny);
  // The same model: every dim equals the MXFP4 profile's.
  EXPECT_EQ(p.raw.at("dims"), mx.raw.at("dims"));
  EXPECT_EQ(p.dims.intermediate, 2880);
  EXPECT_EQ(p.dims.experts, 128);

  const uint64_t h = 2880, q = 64 * 64, kv = 8 * 64, e = 128, i = 2880, v = 201088;
  const uint64_t attn = (q * h + q + 2 * (kv * h + kv) + h * q + h + 64) * 2;
  // BF16 gate_up_proj [E, H, 2I] + bias [E, 2I], down_proj [E, I, H] + bias [E, H].
  const uint64_t experts = e * (h * 2 * i * 2 + 2 * i * 2) + e * (i * h * 2 + h * 2);
  const uint64_t layer = attn + 2 * h * 2 + e * h * 2 + e * 2 + experts;
  EXPECT_EQ(2 * v * h * 2 + h * 2 + 36 * layer, 233'658'313'344ull);
  EXPECT_EQ(p.canonical_bytes(), 233'658'313'344ull);

  std::vector<TensorSpec> t = p.canonical_tensors();
  ASSERT_EQ(t.size(), 3u + 36u * 17u);
  EXPECT_EQ(t[10], (TensorSpec{"model.layers.0.self_attn.sinks", DType::BF16, {64}}));
  EXPECT_EQ(t[13], (TensorSpec{"model.layers.0.mlp.router.bias", DType::BF16, {128}}));
  EXPECT_EQ(t[14], (TensorSpec{"model.layers.0.mlp.experts.gate_up_proj", DType::BF16, {128, 2880, 5760}}));
  EXPECT_EQ(t[15], (TensorSpec{"model.layers.0.mlp.experts.gate_up_proj_bias", DType::BF16, {128, 5760}}));
  EXPECT_EQ(t[16], (TensorSpec{"model.layers.0.mlp.experts.down_proj", DType::BF16, {128, 2880, 2880}}));
  EXPECT_EQ(t[17], (TensorSpec{"model.layers.0.mlp.experts.down_proj_bias", DType::BF16, {128, 2880}}));
  EXPECT_EQ(t[18], (TensorSpec{"model.layers.1.input_layernorm.weight", DType::BF16, {2880}}));
  EXPECT_EQ(t.back(), (TensorSpec{"lm_head.weight", DType::BF16, {201088, 2880}}));
  // Non-expert tensors are the MXFP4 profile's, name for name.
  const std::vector<TensorSpec> m = mx.canonical_tensors();
  for (size_t k = 0; k < 14; ++k) EXPECT_EQ(t[k], m[k]) << k;
}

TEST(MoeProfiles, TinyPresetsKeepTheStructure) {
  ModelProfile glm = find_profile("glm-tiny-fp8", kProfiles);
  EXPECT_TRUE(glm.tiny);
  EXPECT_EQ(glm.dims.first_dense_layers, 1);
  EXPECT_EQ(glm.dims.experts, 8);
  EXPECT_EQ(glm.dims.shared_experts, 1);
  EXPECT_EQ(glm.canonical_bytes(), 807'744u);
  EXPECT_EQ(glm.canonical_tensors().size(), 160u);  // 3 + 19 + 2 x 69
  ModelProfile kimi = find_profile("kimi-tiny-nvfp4", kProfiles);
  EXPECT_TRUE(kimi.tiny);
  EXPECT_EQ(kimi.tensor_prefix, "language_model.");
  EXPECT_EQ(kimi.canonical_bytes(), 1'037'056u);
  EXPECT_EQ(kimi.canonical_tensors().size(), 235u);  // 3 + 12 + 2 x 110
  ModelProfile oss = find_profile("gpt-oss-tiny-mxfp4", kProfiles);
  EXPECT_TRUE(oss.tiny);
  EXPECT_EQ(oss.canonical_bytes(), 915'328u);
  EXPECT_EQ(oss.canonical_tensors().size(), 41u);
  ModelProfile oss_bf16 = find_profile("gpt-oss-tiny-bf16", kProfiles);
  EXPECT_TRUE(oss_bf16.tiny);
  EXPECT_EQ(oss_bf16.quantization, "none");
  EXPECT_EQ(oss_bf16.raw.at("dims"), oss.raw.at("dims"));
  EXPECT_EQ(oss_bf16.canonical_bytes(), 2'431'360u);
  EXPECT_EQ(oss_bf16.canonical_tensors().size(), 37u);  // 3 + 2 x 17
  for (const ModelProfile* p : {&glm, &kimi, &oss, &oss_bf16}) {
    EXPECT_GE(p->dims.vocab, 256);
    EXPECT_EQ(p->dims.vocab % 8, 0);
    EXPECT_LE(p->dims.top_k, 4);
    EXPECT_GE(p->dims.top_k, 2);
  }
}

TEST(MoeProfiles, ScaleExpertsKeepsPerExpertShapes) {
  ModelProfile full = find_profile("glm-4.5-air-fp8", kProfiles);
  ModelProfile s = scale_profile(full, ProfileScale{2, 8});
  EXPECT_EQ(s.id, "glm-4.5-air-fp8@layers=2@experts=8");
  EXPECT_EQ(s.dims.experts, 8);
  EXPECT_EQ(s.raw.at("scale").at("experts"), 8);
  EXPECT_EQ(s.raw.at("scale").at("full_experts"), 128);
  std::vector<TensorSpec> t = s.canonical_tensors();
  ASSERT_EQ(t.size(), 3u + 19u + 69u);
  EXPECT_EQ(t[33], (TensorSpec{"model.layers.1.mlp.gate.weight", DType::BF16, {8, 4096}}));
  EXPECT_EQ(t[34], (TensorSpec{"model.layers.1.mlp.gate.e_score_correction_bias", DType::F32, {8}}));
  EXPECT_EQ(t[35 + 7 * 6], (TensorSpec{"model.layers.1.mlp.experts.7.gate_proj.weight", DType::F8_E4M3, {1408, 4096}}));
  EXPECT_EQ(s.canonical_bytes(), 2'991'989'280ull);

  ModelProfile oss = scale_profile(find_profile("gpt-oss-120b-mxfp4", kProfiles), ProfileScale{std::nullopt, 4});
  EXPECT_EQ(oss.id, "gpt-oss-120b-mxfp4@experts=4");
  EXPECT_EQ(oss.dims.layers, 36);
  // Stacked expert tensors keep every per-expert dim and shrink the expert dim.
  EXPECT_EQ(oss.canonical_tensors()[14].shape, (Shape{4, 5760, 90, 16}));
  EXPECT_EQ(oss.canonical_tensors()[12].shape, (Shape{4, 2880}));
  ModelProfile oss_bf16 = scale_profile(find_profile("gpt-oss-120b-bf16", kProfiles), ProfileScale{2, 4});
  EXPECT_EQ(oss_bf16.id, "gpt-oss-120b-bf16@layers=2@experts=4");
  EXPECT_EQ(oss_bf16.canonical_tensors()[14].shape, (Shape{4, 2880, 5760}));
  EXPECT_EQ(oss_bf16.canonical_tensors()[16].shape, (Shape{4, 2880, 2880}));

  ModelProfile kimi = scale_profile(find_profile("kimi-k2.6-nvfp4", kProfiles), ProfileScale{3, 8});
  EXPECT_EQ(kimi.canonical_tensors().size(), 3u + 12u + 2u * (12u + 8u * 12u + 2u));
  EXPECT_EQ(kimi.canonical_tensors()[25].shape, (Shape{2048, 448}));

  expect_error(
      [&] {
        scale_profile(full, ProfileScale{std::nullopt, 7});
      },
      ErrorKind::Format, {"glm-4.5-air-fp8", "scale field 'experts'", "7 is outside 8..128"});
  expect_error(
      [&] {
        scale_profile(full, ProfileScale{std::nullopt, 129});
      },
      ErrorKind::Format, {"129 is outside 8..128"});
  expect_error(
      [&] {
        scale_profile(find_profile("llama-tiny-bf16", kProfiles), ProfileScale{std::nullopt, 2});
      },
      ErrorKind::Format, {"llama-tiny-bf16", "scale field 'experts'", "family llama has no experts"});
  expect_error([&] { scale_profile(full, ProfileScale{47}); }, ErrorKind::Format, {"47 is outside 1..46"});
}

TEST(MoeProfiles, SchemaErrorsNameFileAndField) {
  struct Case {
    std::string profile;
    std::function<void(nlohmann::json&)> edit;
    std::string part;
  };
  const std::vector<Case> cases = {
      {"glm-tiny-fp8", [](auto& j) { j["dims"]["q_lora_rank"] = 8; }, "field 'dims.q_lora_rank': unknown field"},
      {"glm-tiny-fp8", [](auto& j) { j["dims"].erase("moe_intermediate"); }, "field 'dims.moe_intermediate': missing"},
      {"glm-tiny-fp8", [](auto& j) { j["dims"]["top_k"] = 9; }, "field 'dims.top_k': 9 exceeds the 8 routed experts"},
      {"glm-tiny-fp8", [](auto& j) { j["dims"]["experts"] = 0; }, "field 'dims.experts': must be a positive integer"},
      {"glm-tiny-fp8", [](auto& j) { j["dims"]["first_dense_layers"] = 4; },
       "field 'dims.first_dense_layers': 4 exceeds the 3 layers"},
      {"glm-tiny-fp8", [](auto& j) { j["dims"]["partial_rotary_factor"] = 0.3; },
       "field 'dims.partial_rotary_factor': 0.3 must be in (0, 1]"},
      {"glm-tiny-fp8", [](auto& j) { j["dims"]["kv_heads"] = 3; }, "field 'dims.kv_heads': 3 does not divide"},
      {"glm-tiny-fp8", [](auto& j) { j["quantization"] = "nvfp4"; },
       "field 'quantization': 'nvfp4' is not supported by family glm4_moe (supported: fp8-channel, none)"},
      {"glm-tiny-fp8", [](auto& j) { j["tensor_prefix"] = "x."; },
       "field 'tensor_prefix': only family deepseek_v3 takes a tensor prefix"},
      {"kimi-tiny-nvfp4", [](auto& j) { j["dims"]["hidden"] = 120; },
       "field 'dims.hidden': 120 is not a multiple of 16"},
      {"kimi-tiny-nvfp4", [](auto& j) { j["dims"]["moe_intermediate"] = 40; },
       "field 'dims.moe_intermediate': 40 is not a multiple of 16"},
      {"kimi-tiny-nvfp4", [](auto& j) { j["dims"]["kv_heads"] = 8; }, "field 'dims.kv_heads': unknown field"},
      {"kimi-tiny-nvfp4", [](auto& j) { j["dims"]["qk_rope_head_dim"] = 7; },
       "field 'dims.qk_rope_head_dim': must be even"},
      {"kimi-tiny-nvfp4", [](auto& j) { j["dims"]["rope_scaling"]["type"] = "linear"; },
       "field 'dims.rope_scaling.type': 'linear' is not supported"},
      {"kimi-tiny-nvfp4", [](auto& j) { j["dims"]["rope_scaling"]["factr"] = 1; },
       "field 'dims.rope_scaling.factr': unknown field"},
      {"kimi-tiny-nvfp4", [](auto& j) { j["tensor_prefix"] = "language_model"; },
       "field 'tensor_prefix': 'language_model' must be non-empty and end with '.'"},
      {"gpt-oss-tiny-mxfp4", [](auto& j) { j["dims"]["intermediate"] = 200; },
       "field 'dims.intermediate': 200 is not a multiple of 32"},
      {"gpt-oss-tiny-mxfp4", [](auto& j) { j["dims"]["hidden"] = 80; },
       "field 'dims.hidden': 80 is not a multiple of 32"},
      {"gpt-oss-tiny-mxfp4", [](auto& j) { j["dims"]["swiglu_limit"] = 0; }, "field 'dims.swiglu_limit': must be > 0"},
      {"gpt-oss-tiny-mxfp4", [](auto& j) { j["dims"].erase("sliding_window"); },
       "field 'dims.sliding_window': missing"},
      {"gpt-oss-tiny-mxfp4", [](auto& j) { j["dims"]["vocab"] = 200; }, "field 'dims.vocab': must be >= 256"},
      {"gpt-oss-tiny-mxfp4", [](auto& j) { j["quantization"] = "nvfp4"; },
       "field 'quantization': 'nvfp4' is not supported by family gpt_oss (supported: mxfp4, none)"},
      {"gpt-oss-tiny-bf16", [](auto& j) { j["dims"]["swiglu_limit"] = -1; }, "field 'dims.swiglu_limit': must be > 0"},
      {"gpt-oss-tiny-mxfp4", [](auto& j) { j["family"] = "mixtral"; }, "field 'family': unsupported family 'mixtral'"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = profile_json(c.profile);
    c.edit(j);
    expect_error([&] { parse_profile(j, "profiles/x.json"); }, ErrorKind::Format, {"profiles/x.json: " + c.part});
  }
}

TEST(MoeProfiles, Bf16GptOssNeedsNoWholeMxfp4Blocks) {
  // The 32-element block rule belongs to MXFP4 experts: BF16 experts take any intermediate and hidden.
  nlohmann::json j = profile_json("gpt-oss-tiny-bf16");
  j["dims"]["intermediate"] = 196;
  j["dims"]["hidden"] = 80;
  const ModelProfile p = parse_profile(j, "profiles/x.json");
  EXPECT_EQ(p.dims.intermediate, 196);
  EXPECT_EQ(p.canonical_tensors()[14], (TensorSpec{"model.layers.0.mlp.experts.gate_up_proj", DType::BF16,
                                                   {8, 80, 392}}));
  // ... but SGLang splits the BF16 expert intermediate evenly over TP ranks.
  EXPECT_EQ(build_rank_layouts(p, 4).size(), 4u);
  expect_error([&] { build_rank_layouts(p, 8); }, ErrorKind::Mismatch,
               {"profile 'gpt-oss-tiny-bf16': tp=8 does not divide intermediate (196)"});
}

TEST(MoeProfiles, MakeForwardRejectsViewsThatDoNotMatchTheLayout) {
  ModelProfile p = find_profile("glm-tiny-fp8", kProfiles);
  std::vector<RankLayout> layouts = build_rank_layouts(p, 1);
  std::vector<RankStorageView> views(1);  // no storage views at all
  expect_error([&] { make_forward(p, layouts, views); }, ErrorKind::Mismatch, {"rank 0:", "0 views"});
}

}  // namespace
}  // namespace wsb
