// The MoE reference forwards against transformers: each tiny checkpoint of tests/fixtures (made by
// make_hf_tiny.py with transformers 5.17), loaded through profile_from_hf_dir + CheckpointReader + the TP layout,
// gives transformers' float32 teacher-forced logits (expected_logits.json) at TP 1, 2 and 4 within 1e-5, as the
// llama forward does for hf-llama-tiny (test_forward.cpp); a copy of hf-kimi-tiny-nvfp4 whose gate and up differ in
// their NVFP4 global scale is refused by the fused w13 layout (the last test). The gpt_oss fixtures (BF16 experts written by
// transformers' save_pretrained, and the same weights quantized to MXFP4 in the openai/gpt-oss layout) pin what
// synthetic weights cannot: YaRN RoPE with its attention factor, sinks, the sliding window of layer 0, the gate/up
// interleave of the experts and the clamped SwiGLU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/checkpoint/checkpoint.hpp"
#include "models/forward/forward.hpp"
#include "tests/models/moe_forward_test_util.hpp"
#include "tests/support/checkpoint_copy.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

const std::filesystem::path kFixtures = WSBENCH_FIXTURES_DIR;

/// transformers computes in float32 from the same weights (dequantized for the FP8 / NVFP4 / MXFP4 forms); the
/// remaining differences come from summation order and libm, and expected_logits.json keeps float32 values.
constexpr double kTolerance = 1e-5;

struct Expected {
  std::vector<int32_t> sequence;
  std::vector<std::vector<float>> logits;
};

Expected expected_logits(const std::filesystem::path& dir) {
  std::ifstream in(dir / "expected_logits.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j.at("sequence").get<std::vector<int32_t>>(), j.at("logits").get<std::vector<std::vector<float>>>()};
}

/// Max |logit - transformers| over every position and token of `fixture` at `tp`.
double max_error(const std::string& fixture, int tp) {
  const std::filesystem::path dir = kFixtures / fixture;
  const ModelProfile p = profile_from_hf_dir(dir);
  const CheckpointReader reader(dir);
  test::RankImages images(p, tp, [&](const std::string& name) { return reader.data(name); });
  const std::vector<RankStorageView> views = images.views();
  const auto model = make_forward(p, images.layouts, views);
  const Expected want = expected_logits(dir);
  EXPECT_EQ(want.sequence.size(), 22u);
  const test::Logits got = test::run_tokens(*model, want.sequence);
  double err = 0.0;
  for (size_t t = 0; t < want.sequence.size(); ++t) {
    EXPECT_EQ(got[t].size(), want.logits[t].size());
    double row = 0.0;
    for (size_t v = 0; v < got[t].size(); ++v)
      row = std::max(row, std::abs(static_cast<double>(got[t][v]) - want.logits[t][v]));
    EXPECT_LE(row, kTolerance) << fixture << " tp=" << tp << " position " << t;
    err = std::max(err, row);
  }
  return err;
}

class HfMoeForward : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(HfMoeForward, MatchesTransformersLogits) {
  const auto& [fixture, tp] = GetParam();
  const double err = max_error(fixture, tp);
  std::printf("%s tp=%d max |logit - transformers| = %.3g\n", fixture.c_str(), tp, err);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, HfMoeForward,
    ::testing::Combine(::testing::Values(std::string("hf-glm4_moe-tiny"), std::string("hf-glm4_moe-tiny-step1"),
                                         std::string("hf-glm4_moe-tiny-fp8"), std::string("hf-glm4_moe-tiny-fp8-step1"),
                                         std::string("hf-deepseek_v3-tiny"), std::string("hf-deepseek_v3-tiny-step1"),
                                         std::string("hf-gpt_oss-tiny"), std::string("hf-gpt_oss-tiny-step1"),
                                         std::string("hf-gpt_oss-tiny-mxfp4"), std::string("hf-kimi-tiny-nvfp4")),
                       ::testing::Values(1, 2, 4)),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_tp" + std::to_string(std::get<1>(info.param));
      for (char& c : name)
        if (c == '-') c = '_';
      return name;
    });

TEST(HfMoeForwardKimi, DifferingGateAndUpGlobalScalesAreRefusedByTheFusedW13Layout) {
  // The NVFP4 layout runs w13 as one GEMM with one alpha per expert (FlashInfer CUTLASS; SGLang's
  // ModelOptNvFp4FusedMoEMethod warns "w1_weight_scale_2 must match w3_weight_scale_2" and keeps the gate's), so
  // exporters give gate_proj and up_proj one global scale (llm-compressor update_fused_layer_weight_global_scales).
  // A checkpoint where they differ is well-formed, but loading its experts is refused naming both tensors.
  test::TempDir tmp;
  const std::filesystem::path dir = tmp / "kimi";
  test::copy_checkpoint(kFixtures / "hf-kimi-tiny-nvfp4", dir);
  const std::string up = "language_model.model.layers.1.mlp.experts.0.up_proj.weight_scale_2";
  test::edit_checkpoint_tensor(dir, up, [](test::EditableTensor& t) {
    const float half = 0.5f;
    ASSERT_EQ(t.bytes.size(), sizeof half);
    std::memcpy(t.bytes.data(), &half, sizeof half);
  });
  const ModelProfile p = profile_from_hf_dir(dir);
  EXPECT_EQ(p.quantization, "nvfp4");
  EXPECT_EQ(p.tensor_prefix, "language_model.");
  const CheckpointReader reader(dir);
  test::expect_error([&] { test::RankImages(p, 1, [&](const std::string& n) { return reader.data(n); }); },
                     ErrorKind::Mismatch,
                     {"storage 'model.layers.1.mlp.experts.w13_weight_scale_2': transform 'nvfp4_w13_scale_2': "
                      "weight_scale_2 of 'language_model.model.layers.1.mlp.experts.0.gate_proj.weight_scale_2' (",
                      ") differs from '" + up + "' (0.5); the fused w13 GEMM needs one"});
}

}  // namespace
}  // namespace wsb
