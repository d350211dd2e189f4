// profile_from_hf_dir's check of a Hugging Face checkpoint against its config (models/profile/
// hf_checkpoint_check.hpp): every tiny preset written as a checkpoint passes (sharded and single-file); the first
// disagreement is reported with the file, the tensor and both descriptions; quantization disagreements name
// config.json's quantization_config; a missing shard and an index entry no shard holds name the index; MTP layers
// and the Kimi vision tower are accepted exactly where they can be named.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "models/profile/hf_config_write.hpp"
#include "models/profile/profile.hpp"
#include "tests/models/checkpoint_test_util.hpp"
#include "tests/models/hf_checkpoint_util.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/profile_dims.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_message;
using testutil::TempDir;

const fs::path kProfiles = WSBENCH_PROFILES_DIR;

ModelProfile profile(const std::string& id) { return find_profile(id, kProfiles); }

json config_of(const ModelProfile& p) { return json::parse(hf_config_text(p)); }

/// A checkpoint of `p` in `dir`: its config and canonical tensors, sharded at 64 KiB (0 = one model.safetensors).
void write_profile(const fs::path& dir, const ModelProfile& p, uint64_t shard_bytes = 65536) {
  test::write_hf_checkpoint(dir, config_of(p), p.canonical_tensors(), shard_bytes);
}

std::vector<TensorSpec> replace(std::vector<TensorSpec> tensors, const std::string& name, const TensorSpec& with) {
  auto it = std::find_if(tensors.begin(), tensors.end(), [&](const TensorSpec& t) { return t.name == name; });
  EXPECT_NE(it, tensors.end()) << name;
  if (it != tensors.end()) *it = with;
  return tensors;
}

std::vector<TensorSpec> without(std::vector<TensorSpec> tensors, const std::string& name) {
  std::erase_if(tensors, [&](const TensorSpec& t) { return t.name == name; });
  return tensors;
}

/// The shard holding `name` in a checkpoint directory.
std::string shard_of(const fs::path& dir, const std::string& name) {
  return CheckpointReader(dir).shard_of(name).path().string();
}

class EveryPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPreset, ACheckpointOfThePresetGivesThePresetBack) {
  const ModelProfile p = profile(GetParam());
  for (uint64_t shard : {uint64_t{65536}, uint64_t{0}}) {
    SCOPED_TRACE(shard);
    TempDir dir;
    write_profile(dir.path(), p, shard);
    const ModelProfile back = profile_from_hf_dir(dir.path());
    test::expect_same_dims(back.dims, p.dims);
    EXPECT_EQ(back.family, p.family);
    EXPECT_EQ(back.quantization, p.quantization);
    EXPECT_EQ(back.tensor_prefix, p.tensor_prefix);
    EXPECT_EQ(back.hf_dir, dir.path());
    EXPECT_EQ(test::tensor_lines(back), test::tensor_lines(p));
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, EveryPreset,
                         ::testing::Values("llama-tiny-bf16", "glm-tiny-fp8", "glm-tiny-bf16", "kimi-tiny-nvfp4",
                                           "kimi-tiny-bf16", "gpt-oss-tiny-mxfp4"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(HfCheckpointCheck, TheFirstDisagreementNamesFileTensorAndBothDescriptions) {
  const ModelProfile p = profile("glm-tiny-bf16");
  const std::vector<TensorSpec> tensors = p.canonical_tensors();
  {
    TempDir dir;  // a dtype
    const std::string norm = "model.layers.0.input_layernorm.weight";
    test::write_hf_checkpoint(dir.path(), config_of(p), replace(tensors, norm, {norm, DType::F32, {128}}), 65536);
    EXPECT_EQ(error_message([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch),
              shard_of(dir.path(), norm) + ": tensor '" + norm + "': expected BF16 [128] from " +
                  (dir.path() / "config.json").string() + ", found F32 [128]");
  }
  {
    TempDir dir;  // a shape, in a single-file checkpoint
    test::write_hf_checkpoint(dir.path(), config_of(p),
                              replace(tensors, "lm_head.weight", {"lm_head.weight", DType::BF16, {511, 128}}), 0);
    EXPECT_EQ(error_message([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch),
              (dir.path() / "model.safetensors").string() +
                  ": tensor 'lm_head.weight': expected BF16 [512, 128] from " +
                  (dir.path() / "config.json").string() + ", found BF16 [511, 128]");
  }
  {
    TempDir dir;  // an absent tensor
    test::write_hf_checkpoint(dir.path(), config_of(p), without(tensors, "model.norm.weight"), 65536);
    EXPECT_EQ(error_message([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch),
              (dir.path() / kIndexFileName).string() + ": tensor 'model.norm.weight' (BF16 [128] from " +
                  (dir.path() / "config.json").string() + ") is absent");
  }
  {
    TempDir dir;  // a tensor the family does not have (transformers' fused experts, say)
    std::vector<TensorSpec> more = tensors;
    more.push_back({"model.layers.1.mlp.experts.gate_up_proj", DType::BF16, {8, 96, 128}});
    test::write_hf_checkpoint(dir.path(), config_of(p), more, 65536);
    EXPECT_EQ(error_message([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch),
              shard_of(dir.path(), "model.layers.1.mlp.experts.gate_up_proj") +
                  ": tensor 'model.layers.1.mlp.experts.gate_up_proj' (BF16 [8, 96, 128]) is not part of the glm4_moe "
                  "model " +
                  (dir.path() / "config.json").string() + " describes");
  }
}

TEST(HfCheckpointCheck, AQuantizationConfigThatDoesNotMatchTheTensorsNamesIt) {
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  {
    TempDir dir;  // config says channel FP8, the weights are BF16
    test::write_hf_checkpoint(dir.path(), config_of(profile("glm-tiny-fp8")),
                              profile("glm-tiny-bf16").canonical_tensors(), 65536);
    EXPECT_EQ(error_message([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch),
              (dir.path() / "config.json").string() +
                  ": field 'quantization_config' (compressed-tensors channel FP8) does not match tensor '" + q +
                  "' in " + shard_of(dir.path(), q) + ": expected F8_E4M3 [128, 128], found BF16 [128, 128]");
  }
  {
    TempDir dir;  // no quantization_config, the weights are FP8
    test::write_hf_checkpoint(dir.path(), config_of(profile("glm-tiny-bf16")),
                              profile("glm-tiny-fp8").canonical_tensors(), 65536);
    EXPECT_EQ(error_message([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch),
              (dir.path() / "config.json").string() +
                  ": field 'quantization_config' (absent: unquantized BF16 weights) does not match tensor '" + q +
                  "' in " + shard_of(dir.path(), q) + ": expected BF16 [128, 128], found F8_E4M3 [128, 128]");
  }
  {
    TempDir dir;  // NVFP4 experts without their global scale
    const ModelProfile kimi = profile("kimi-tiny-nvfp4");
    const std::string s2 = "language_model.model.layers.1.mlp.experts.0.gate_proj.weight_scale_2";
    test::write_hf_checkpoint(dir.path(), config_of(kimi), without(kimi.canonical_tensors(), s2), 65536);
    EXPECT_EQ(error_message([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch),
              (dir.path() / "config.json").string() +
                  ": field 'quantization_config' (ModelOpt NVFP4 routed experts) does not match the checkpoint: "
                  "tensor '" +
                  s2 + "' (F32 []) is absent from " + (dir.path() / kIndexFileName).string());
  }
  {
    TempDir dir;  // a static activation scale the config does not declare
    const ModelProfile glm = profile("glm-tiny-fp8");
    std::vector<TensorSpec> more = glm.canonical_tensors();
    more.push_back({"model.layers.0.self_attn.q_proj.input_scale", DType::F32, {}});
    test::write_hf_checkpoint(dir.path(), config_of(glm), more, 65536);
    EXPECT_EQ(error_message([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch),
              (dir.path() / "config.json").string() +
                  ": field 'quantization_config' (compressed-tensors channel FP8) does not match tensor "
                  "'model.layers.0.self_attn.q_proj.input_scale' in " +
                  shard_of(dir.path(), "model.layers.0.self_attn.q_proj.input_scale") +
                  " (F32 []): the config's layout has no such tensor");
  }
}

TEST(HfCheckpointCheck, AMissingShardAndAnIndexEntryNoShardHoldsNameTheIndex) {
  const ModelProfile p = profile("llama-tiny-bf16");
  {
    TempDir dir;
    write_profile(dir.path(), p);
    const CheckpointIndex index = read_checkpoint_index(dir.path() / kIndexFileName);
    const std::string last = index.weight_map.at("lm_head.weight");
    fs::remove(dir.path() / last);
    test::expect_error([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Missing,
                       {(dir.path() / kIndexFileName).string() + ": shard '" + last + "' (" +
                        (dir.path() / last).string() + "): No such file or directory"});
  }
  {
    TempDir dir;
    write_profile(dir.path(), p);
    CheckpointIndex index = read_checkpoint_index(dir.path() / kIndexFileName);
    const std::string first = index.weight_map.at("model.embed_tokens.weight");
    index.weight_map["model.layers.0.self_attn.rotary_emb.inv_freq"] = first;
    write_checkpoint_index(dir.path() / kIndexFileName, index);
    EXPECT_EQ(error_message([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Missing),
              (dir.path() / kIndexFileName).string() +
                  ": tensor 'model.layers.0.self_attn.rotary_emb.inv_freq' is indexed to shard '" + first +
                  "' but absent from " + (dir.path() / first).string());
  }
}

/// The tensors of MTP layer `layer` of a glm-tiny checkpoint: a MoE decoder layer plus the MTP leaves.
std::vector<TensorSpec> mtp_layer(const ModelProfile& p, int layer) {
  ModelProfile longer = p;
  longer.dims.layers = layer + 1;
  std::vector<TensorSpec> out;
  const std::string base = "model.layers." + std::to_string(layer) + ".";
  for (const TensorSpec& t : longer.canonical_tensors())
    if (t.name.starts_with(base)) out.push_back(t);
  const int64_t h = p.dims.hidden, v = p.dims.vocab;
  for (const TensorSpec& t : std::vector<TensorSpec>{{base + "embed_tokens.weight", DType::BF16, {v, h}},
                                                     {base + "enorm.weight", DType::BF16, {h}},
                                                     {base + "hnorm.weight", DType::BF16, {h}},
                                                     {base + "eh_proj.weight", DType::BF16, {h, 2 * h}},
                                                     {base + "shared_head.norm.weight", DType::BF16, {h}},
                                                     {base + "shared_head.head.weight", DType::BF16, {v, h}}})
    out.push_back(t);
  return out;
}

TEST(HfCheckpointCheck, MtpLayersAreAcceptedWhenTheConfigDeclaresThem) {
  const ModelProfile p = profile("glm-tiny-fp8");
  std::vector<TensorSpec> tensors = p.canonical_tensors();
  const std::vector<TensorSpec> mtp = mtp_layer(p, 3);
  // q/k/v (weight, scale, bias), o (weight, scale), 2 norms, router + bias, 8 experts x 3 FP8 linears, the shared
  // expert's 3, and the 6 MTP leaves
  EXPECT_EQ(mtp.size(), 3u * 3 + 2 + 2 + 2 + 8 * 6 + 6 + 6);
  tensors.insert(tensors.end(), mtp.begin(), mtp.end());
  tensors.push_back({"model.layers.3.eh_proj.weight_scale", DType::F32, {128, 1}});
  json config = config_of(p);
  config["num_nextn_predict_layers"] = 1;
  {
    TempDir dir;
    test::write_hf_checkpoint(dir.path(), config, tensors, 65536);
    EXPECT_EQ(test::tensor_lines(profile_from_hf_dir(dir.path())), test::tensor_lines(p));
  }
  {
    TempDir dir;  // without num_nextn_predict_layers layer 3 is unknown
    test::write_hf_checkpoint(dir.path(), config_of(p), tensors, 65536);
    test::expect_error([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch,
                       {": tensor 'model.layers.3.eh_proj.weight' (BF16 [128, 256]) is not part of the glm4_moe "
                        "model"});
  }
  {
    TempDir dir;  // an MTP tensor wsbench cannot name
    std::vector<TensorSpec> odd = tensors;
    odd.push_back({"model.layers.3.mtp_extra.weight", DType::BF16, {128}});
    test::write_hf_checkpoint(dir.path(), config, odd, 65536);
    test::expect_error([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch,
                       {": tensor 'model.layers.3.mtp_extra.weight' (BF16 [128]) is not part of the glm4_moe model"});
  }
}

TEST(HfCheckpointCheck, TheKimiVisionTowerIsAcceptedOnlyInTheKimiWrapper) {
  const std::vector<TensorSpec> vision = {{"vision_tower.patch_embed.proj.weight", DType::BF16, {64, 3, 14, 14}},
                                          {"mm_projector.proj.0.weight", DType::BF16, {128, 64}}};
  const ModelProfile kimi = profile("kimi-tiny-bf16");
  std::vector<TensorSpec> tensors = kimi.canonical_tensors();
  tensors.insert(tensors.end(), vision.begin(), vision.end());
  {
    TempDir dir;
    test::write_hf_checkpoint(dir.path(), config_of(kimi), tensors, 65536);
    EXPECT_EQ(test::tensor_lines(profile_from_hf_dir(dir.path())), test::tensor_lines(kimi));
  }
  {
    TempDir dir;  // another tower is not the Kimi wrapper's
    std::vector<TensorSpec> odd = tensors;
    odd.push_back({"audio_tower.conv.weight", DType::BF16, {8}});
    test::write_hf_checkpoint(dir.path(), config_of(kimi), odd, 65536);
    test::expect_error([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch,
                       {": tensor 'audio_tower.conv.weight' (BF16 [8]) is not part of the deepseek_v3 model"});
  }
  {
    TempDir dir;  // glm4_moe has no vision tower
    const ModelProfile glm = profile("glm-tiny-bf16");
    std::vector<TensorSpec> glm_tensors = glm.canonical_tensors();
    glm_tensors.push_back(vision[1]);
    test::write_hf_checkpoint(dir.path(), config_of(glm), glm_tensors, 65536);
    test::expect_error([&] { profile_from_hf_dir(dir.path()); }, ErrorKind::Mismatch,
                       {": tensor 'mm_projector.proj.0.weight' (BF16 [128, 64]) is not part of the glm4_moe model"});
  }
}

}  // namespace
}  // namespace wsb
