// Profiles: the shipped JSON profiles (exact dims and canonical bytes), the schema's error messages, Hugging Face
// config.json import (against the transformers-saved fixture tests/fixtures/hf-llama-tiny) and layer scaling.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "models/checkpoint/checkpoint.hpp"
#include "core/errors.hpp"
#include "models/profile/profile.hpp"
#include "tests/models/checkpoint_test_util.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

const std::filesystem::path kProfiles = WSBENCH_PROFILES_DIR;
const std::filesystem::path kHfTiny = std::filesystem::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny";

using testutil::TempDir;

void write_json(const std::filesystem::path& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(2); }

nlohmann::json tiny_json() {
  std::ifstream in(kProfiles / "llama-tiny-bf16.json");
  return nlohmann::json::parse(in);
}

using test::expect_error;

TEST(Profile, Llama31_8bHasTheRealDimsAndBytes) {
  ModelProfile p = find_profile("llama-3.1-8b-bf16", kProfiles);
  EXPECT_EQ(p.id, "llama-3.1-8b-bf16");
  EXPECT_EQ(p.family, "llama");
  EXPECT_EQ(p.quantization, "none");
  EXPECT_EQ(p.dtype, DType::BF16);
  EXPECT_FALSE(p.tiny);
  EXPECT_EQ(p.dims.layers, 32);
  EXPECT_EQ(p.dims.hidden, 4096);
  EXPECT_EQ(p.dims.intermediate, 14336);
  EXPECT_EQ(p.dims.heads, 32);
  EXPECT_EQ(p.dims.kv_heads, 8);
  EXPECT_EQ(p.dims.head_dim, 128);
  EXPECT_EQ(p.dims.vocab, 128256);
  EXPECT_EQ(p.dims.rope_theta, 500000.0);
  EXPECT_EQ(p.dims.rms_eps, 1e-5);
  EXPECT_FALSE(p.dims.tie_embeddings);
  EXPECT_NE(p.raw.at("source").get<std::string>().find("meta-llama/Llama-3.1-8B"), std::string::npos);
  // 8,030,261,248 parameters x 2 bytes (BF16).
  EXPECT_EQ(p.canonical_bytes(), 16'060'522'496ull);

  std::vector<TensorSpec> t = p.canonical_tensors();
  ASSERT_EQ(t.size(), 1u + 9u * 32u + 2u);
  EXPECT_EQ(t[0], (TensorSpec{"model.embed_tokens.weight", DType::BF16, {128256, 4096}}));
  EXPECT_EQ(t[1], (TensorSpec{"model.layers.0.input_layernorm.weight", DType::BF16, {4096}}));
  EXPECT_EQ(t[2], (TensorSpec{"model.layers.0.self_attn.q_proj.weight", DType::BF16, {4096, 4096}}));
  EXPECT_EQ(t[3], (TensorSpec{"model.layers.0.self_attn.k_proj.weight", DType::BF16, {1024, 4096}}));
  EXPECT_EQ(t[4], (TensorSpec{"model.layers.0.self_attn.v_proj.weight", DType::BF16, {1024, 4096}}));
  EXPECT_EQ(t[5], (TensorSpec{"model.layers.0.self_attn.o_proj.weight", DType::BF16, {4096, 4096}}));
  EXPECT_EQ(t[6], (TensorSpec{"model.layers.0.post_attention_layernorm.weight", DType::BF16, {4096}}));
  EXPECT_EQ(t[7], (TensorSpec{"model.layers.0.mlp.gate_proj.weight", DType::BF16, {14336, 4096}}));
  EXPECT_EQ(t[8], (TensorSpec{"model.layers.0.mlp.up_proj.weight", DType::BF16, {14336, 4096}}));
  EXPECT_EQ(t[9], (TensorSpec{"model.layers.0.mlp.down_proj.weight", DType::BF16, {4096, 14336}}));
  EXPECT_EQ(t[10].name, "model.layers.1.input_layernorm.weight");
  EXPECT_EQ(t[288].name, "model.layers.31.mlp.down_proj.weight");
  EXPECT_EQ(t[289], (TensorSpec{"model.norm.weight", DType::BF16, {4096}}));
  EXPECT_EQ(t[290], (TensorSpec{"lm_head.weight", DType::BF16, {128256, 4096}}));
}

TEST(Profile, TinyPresetDims) {
  ModelProfile p = find_profile("llama-tiny-bf16", kProfiles);
  EXPECT_TRUE(p.tiny);
  EXPECT_EQ(p.dims.layers, 2);
  EXPECT_EQ(p.dims.hidden, 128);
  EXPECT_EQ(p.dims.intermediate, 256);
  EXPECT_EQ(p.dims.heads, 8);
  EXPECT_EQ(p.dims.kv_heads, 4);
  EXPECT_EQ(p.dims.head_dim, 16);
  EXPECT_EQ(p.dims.vocab, 512);
  // embed 131072 + 2 x 295424 per layer + norm 256 + lm_head 131072
  EXPECT_EQ(p.canonical_bytes(), 853'248u);
  EXPECT_EQ(p.canonical_tensors().size(), 21u);
}

TEST(Profile, TiedEmbeddingsDropLmHead) {
  nlohmann::json j = tiny_json();
  j["dims"]["tie_embeddings"] = true;
  ModelProfile p = parse_profile(j, "mem.json");
  std::vector<TensorSpec> t = p.canonical_tensors();
  ASSERT_EQ(t.size(), 20u);
  EXPECT_EQ(t.back().name, "model.norm.weight");
  EXPECT_EQ(p.canonical_bytes(), 853'248u - 512u * 128u * 2u);
}

TEST(Profile, ListAndFindInADirectory) {
  TempDir dir;
  nlohmann::json a = tiny_json();
  nlohmann::json b = tiny_json();
  b["id"] = "aaa-first";
  write_json(dir.path() / "llama-tiny-bf16.json", a);
  write_json(dir.path() / "aaa-first.json", b);
  std::ofstream(dir.path() / "README.md") << "not a profile";
  std::vector<ModelProfile> all = list_profiles(dir.path());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "aaa-first");
  EXPECT_EQ(all[1].id, "llama-tiny-bf16");

  expect_error([&] { find_profile("nope", dir.path()); }, ErrorKind::Missing,
               {"profile 'nope'", "known: aaa-first, llama-tiny-bf16"});
  b["id"] = "other";
  write_json(dir.path() / "aaa-first.json", b);
  expect_error([&] { find_profile("aaa-first", dir.path()); }, ErrorKind::Format,
               {"aaa-first.json", "field 'id'", "'other' does not match the file name"});
}

TEST(Profile, ShippedProfilesAllParse) {
  std::set<std::string> ids;
  for (const ModelProfile& p : list_profiles(kProfiles)) ids.insert(p.id);
  EXPECT_TRUE(ids.count("llama-3.1-8b-bf16"));
  EXPECT_TRUE(ids.count("llama-tiny-bf16"));
}

TEST(Profile, SchemaErrorsNameFileAndField) {
  auto with = [](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = tiny_json();
    edit(j);
    return j;
  };
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {[](auto& j) { j["dims"].erase("hidden"); }, {"field 'dims.hidden': missing"}},
      {[](auto& j) { j["dims"]["hidden"] = "128"; }, {"field 'dims.hidden': expected an integer"}},
      {[](auto& j) { j["dims"]["hidden"] = 128.5; }, {"field 'dims.hidden': expected an integer"}},
      {[](auto& j) { j["dims"]["layers"] = 0; }, {"field 'dims.layers': must be a positive integer, got 0"}},
      {[](auto& j) { j["dims"]["hiden"] = 1; }, {"field 'dims.hiden': unknown field"}},
      {[](auto& j) { j["extra"] = 1; }, {"field 'extra': unknown field"}},
      {[](auto& j) { j["dims"]["kv_heads"] = 3; }, {"field 'dims.kv_heads': 3 does not divide the 8 attention heads"}},
      {[](auto& j) { j["dims"]["head_dim"] = 15; }, {"field 'dims.head_dim': must be even"}},
      {[](auto& j) { j["dims"]["vocab"] = 255; }, {"field 'dims.vocab': must be >= 256"}},
      {[](auto& j) { j["dims"]["rms_eps"] = 0; }, {"field 'dims.rms_eps': must be in (0, 1)"}},
      {[](auto& j) { j["dims"]["rope_theta"] = -1; }, {"field 'dims.rope_theta': must be > 0"}},
      {[](auto& j) { j["dims"]["tie_embeddings"] = "no"; }, {"field 'dims.tie_embeddings': expected true or false"}},
      {[](auto& j) { j["family"] = "gpt2"; }, {"field 'family': unsupported family 'gpt2'"}},
      {[](auto& j) { j["quantization"] = "fp8"; }, {"field 'quantization': 'fp8' is not supported"}},
      {[](auto& j) { j["dtype"] = "F8_E4M3"; }, {"field 'dtype': 'F8_E4M3' is not an unquantized weight dtype"}},
      {[](auto& j) { j["dtype"] = "bf16"; }, {"field 'dtype': 'bf16'"}},
      {[](auto& j) { j.erase("source"); }, {"field 'source': missing"}},
      {[](auto& j) { j["id"] = "a/b"; }, {"field 'id': 'a/b' may use only"}},
      {[](auto& j) { j["dims"] = 3; }, {"field 'dims': expected a JSON object"}},
  };
  for (const Case& c : cases) {
    nlohmann::json j = with(c.edit);
    expect_error([&] { parse_profile(j, "profiles/x.json"); }, ErrorKind::Format, {"profiles/x.json: "});
    for (const std::string& part : c.parts)
      expect_error([&] { parse_profile(j, "profiles/x.json"); }, ErrorKind::Format, {part});
  }
  expect_error([] { parse_profile(nlohmann::json::array(), "arr.json"); }, ErrorKind::Format,
               {"arr.json: top level: expected a JSON object"});
}

TEST(Profile, LoadProfileFileErrors) {
  TempDir dir;
  expect_error([&] { load_profile(dir.path() / "absent.json"); }, ErrorKind::Missing, {"absent.json"});
  std::ofstream(dir.path() / "bad.json") << "{ not json";
  expect_error([&] { load_profile(dir.path() / "bad.json"); }, ErrorKind::Format, {"bad.json: invalid JSON"});
}

TEST(Profile, FromHfDirMatchesTheTransformersCheckpoint) {
  ModelProfile p = profile_from_hf_dir(kHfTiny);
  EXPECT_EQ(p.id, "hf:hf-llama-tiny");
  EXPECT_EQ(p.family, "llama");
  EXPECT_EQ(p.dtype, DType::BF16);  // "dtype": "bfloat16" (transformers 5 spelling)
  EXPECT_EQ(p.dims.layers, 3);
  EXPECT_EQ(p.dims.hidden, 64);
  EXPECT_EQ(p.dims.intermediate, 96);
  EXPECT_EQ(p.dims.heads, 4);
  EXPECT_EQ(p.dims.kv_heads, 2);
  EXPECT_EQ(p.dims.head_dim, 16);
  EXPECT_EQ(p.dims.vocab, 256);
  EXPECT_EQ(p.dims.rope_theta, 500000.0);  // from rope_parameters.rope_theta
  EXPECT_EQ(p.dims.rms_eps, 1e-6);
  EXPECT_FALSE(p.dims.tie_embeddings);
  EXPECT_EQ(p.hf_dir, kHfTiny);
  EXPECT_EQ(p.raw.at("model_type"), "llama");

  // The canonical tensor list is exactly what transformers saved.
  CheckpointReader reader(kHfTiny);
  std::vector<TensorSpec> t = p.canonical_tensors();
  std::vector<std::string> names;
  for (const TensorSpec& s : t) {
    names.push_back(s.name);
    EXPECT_EQ(reader.entry(s.name).spec(), s) << s.name;
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, reader.tensor_names());
  EXPECT_EQ(p.canonical_bytes(), 250'752u);
  EXPECT_EQ(p.canonical_bytes(), reader.index().total_size);
}

nlohmann::json minimal_hf_config() {
  return {{"model_type", "llama"},    {"num_hidden_layers", 2}, {"hidden_size", 64},       {"intermediate_size", 128},
          {"num_attention_heads", 8}, {"vocab_size", 300},      {"torch_dtype", "float16"}};
}

TEST(Profile, FromHfConfigDefaultsFollowLlamaConfig) {
  TempDir dir;
  write_json(dir.path() / "config.json", minimal_hf_config());
  ModelProfile p = profile_from_hf_config(dir.path());
  EXPECT_EQ(p.dtype, DType::F16);
  EXPECT_EQ(p.dims.kv_heads, 8);  // num_key_value_heads defaults to num_attention_heads
  EXPECT_EQ(p.dims.head_dim, 8);  // hidden_size / num_attention_heads
  EXPECT_EQ(p.dims.rope_theta, 10000.0);
  EXPECT_EQ(p.dims.rms_eps, 1e-6);
  EXPECT_FALSE(p.dims.tie_embeddings);

  nlohmann::json j = minimal_hf_config();
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  j["tie_word_embeddings"] = true;
  j["head_dim"] = nullptr;  // null counts as absent
  write_json(dir.path() / "config.json", j);
  p = profile_from_hf_config(dir.path());
  EXPECT_EQ(p.dims.rope_theta, 500000.0);
  EXPECT_TRUE(p.dims.tie_embeddings);
  EXPECT_EQ(p.dims.head_dim, 8);
  EXPECT_EQ(p.canonical_tensors().back().name, "model.norm.weight");
}

TEST(Profile, FromHfDirNeedsTheCheckpointBesideItsConfig) {
  TempDir dir;
  write_json(dir.path() / "config.json", minimal_hf_config());
  expect_error([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Missing,
               {dir.path().string() + ": neither model.safetensors.index.json nor model.safetensors found"});
}

TEST(Profile, FromHfConfigErrorsNameConfigField) {
  TempDir dir;
  const std::string cfg = (dir.path() / "config.json").string();
  expect_error([&] { profile_from_hf_config(dir.path()); }, ErrorKind::Missing, {cfg});
  expect_error([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Missing, {cfg});
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    std::string part;
  };
  const std::vector<Case> cases = {
      {[](auto& j) { j["model_type"] = "mistral"; }, "field 'model_type': 'mistral' is not supported (supported: "
                                                    "llama, glm4_moe, deepseek_v3, kimi_k25, gpt_oss)"},
      {[](auto& j) { j.erase("hidden_size"); }, "field 'hidden_size': missing"},
      {[](auto& j) { j["num_key_value_heads"] = 3; }, "field 'num_key_value_heads': 3 does not divide"},
      {[](auto& j) { j["torch_dtype"] = "int8"; }, "field 'torch_dtype': 'int8' is not a supported weight dtype"},
      {[](auto& j) { j.erase("torch_dtype"); }, "field 'torch_dtype': missing"},
      {[](auto& j) {
         j["rope_scaling"] = {{"rope_type", "yarn"}};
       },
       "field 'rope_scaling.rope_type': unsupported rope type 'yarn' (supported by family llama: default, llama3)"},
      {[](auto& j) { j["quantization_config"] = {{"quant_method", "mxfp4"}}; },
       "field 'quantization_config.quant_method': 'mxfp4' (MXFP4) is not supported by family llama (supported: "
       "none)"},
      {[](auto& j) { j["attention_bias"] = true; }, "field 'attention_bias': biases are not supported"},
      {[](auto& j) { j["hidden_act"] = "gelu"; }, "field 'hidden_act': 'gelu' is not supported"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = minimal_hf_config();
    c.edit(j);
    write_json(dir.path() / "config.json", j);
    expect_error([&] { profile_from_hf_config(dir.path()); }, ErrorKind::Format, {cfg + ": " + c.part});
  }
}

TEST(Profile, ScaleDropsLayersKeepingShapes) {
  ModelProfile full = find_profile("llama-3.1-8b-bf16", kProfiles);
  ModelProfile two = scale_profile(full, ProfileScale{2});
  EXPECT_EQ(two.id, "llama-3.1-8b-bf16@layers=2");
  EXPECT_EQ(two.dims.layers, 2);
  std::vector<TensorSpec> t = two.canonical_tensors();
  ASSERT_EQ(t.size(), 21u);
  EXPECT_EQ(t[18].name, "model.layers.1.mlp.down_proj.weight");
  EXPECT_EQ(t[18].shape, (Shape{4096, 14336}));
  // 2 x embed/lm_head (1,050,673,152 each) + norm 8192 + 2 layers x 436,224,000
  EXPECT_EQ(two.canonical_bytes(), 2u * 1'050'673'152u + 8'192u + 2u * 436'224'000u);
  EXPECT_EQ(two.raw.at("scale").at("layers"), 2);

  EXPECT_EQ(scale_profile(full, ProfileScale{}).id, full.id);
  expect_error([&] { scale_profile(full, ProfileScale{0}); }, ErrorKind::Format,
               {"llama-3.1-8b-bf16", "'layers'", "0 is outside 1..32"});
  expect_error([&] { scale_profile(full, ProfileScale{33}); }, ErrorKind::Format, {"33 is outside 1..32"});
}

}  // namespace
}  // namespace wsb
