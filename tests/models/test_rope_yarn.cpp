// YaRN frequencies and softmax scale (models/forward/rope_yarn.hpp): plain RoPE is unchanged, the ramp splits the
// frequencies into extrapolated (high), interpolated (low, divided by the factor) and blended ones exactly where
// transformers' find_correction_range puts the boundaries (truncated or not), and the attention factors are the
// get_mscale values that rope_angles puts on cos and sin.
// The end-to-end check against transformers is test_hf_moe_forward.cpp (deepseek_v3 and gpt_oss YaRN configs).
#include <gtest/gtest.h>

#include <cmath>

#include "models/forward/dense_ops.hpp"
#include "models/forward/rope_yarn.hpp"

namespace wsb {
namespace {

/// YaRN scaling over `original` positions (mscale keys 0 = absent, truncate as transformers' default).
RopeScaling yarn(double factor, int original, double beta_fast, double beta_slow) {
  RopeScaling s;
  s.factor = factor;
  s.original_max_position = original;
  s.beta_fast = beta_fast;
  s.beta_slow = beta_slow;
  return s;
}

TEST(RopeYarn, WithoutScalingItIsPlainRope) {
  const RopeFrequencies f = rope_frequencies(500000.0, 16, RopeScaling{});
  EXPECT_EQ(f.inv_freq, rope_inv_freq(500000.0, 16));
  EXPECT_EQ(f.attention_scaling, 1.0f);
}

TEST(RopeYarn, DeepseekTinyRampAndFactors) {
  // kimi-tiny / hf-deepseek_v3-tiny: qk_rope 8, theta 5e4, factor 32, original 4096, beta 1/1, mscale 1/1.
  RopeScaling s = yarn(32.0, 4096, 1.0, 1.0);
  s.mscale = 1.0;
  s.mscale_all_dim = 1.0;
  const RopeFrequencies f = rope_frequencies(50000.0, 8, s);
  const std::vector<float> plain = rope_inv_freq(50000.0, 8);
  // find_correction_dim(1) = 8 ln(4096 / 2pi) / (2 ln 5e4) = 2.396: low = floor = 2, high = ceil = 3, so the ramp
  // is 0, 0, 0, 1: three extrapolated frequencies, the last one divided by the factor.
  ASSERT_EQ(f.inv_freq.size(), 4u);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(f.inv_freq[static_cast<size_t>(j)], plain[static_cast<size_t>(j)]) << j;
  EXPECT_EQ(f.inv_freq[3], 1.0f / (32.0f * std::pow(50000.0f, 6.0f / 8.0f)));
  EXPECT_EQ(f.attention_scaling, 1.0f);  // get_mscale(32, 1) / get_mscale(32, 1)
  // DeepseekV3Attention: 24^-0.5 * (1 + 0.1 ln 32)^2.
  const double m = 1.0 + 0.1 * std::log(32.0);
  EXPECT_EQ(mla_softmax_scale(24, s), static_cast<float>(std::pow(24.0, -0.5) * m * m));
  EXPECT_EQ(mla_softmax_scale(24, RopeScaling{}), static_cast<float>(std::pow(24.0, -0.5)));
}

TEST(RopeYarn, GptOssUntruncatedRampAndAttentionFactor) {
  // gpt-oss: head_dim 16, theta 150000, factor 32, original 4096, beta_fast 32, beta_slow 1, truncate false.
  RopeScaling s = yarn(32.0, 4096, 32.0, 1.0);
  s.truncate = false;
  const RopeFrequencies f = rope_frequencies(150000.0, 16, s);
  EXPECT_EQ(f.attention_scaling, static_cast<float>(1.0 + 0.1 * std::log(32.0)));  // get_mscale(32), no mscale keys
  const double low = 16 * std::log(4096 / (32 * 2 * M_PI)) / (2 * std::log(150000.0));
  const double high = 16 * std::log(4096 / (1 * 2 * M_PI)) / (2 * std::log(150000.0));
  const std::vector<float> plain = rope_inv_freq(150000.0, 16);
  for (int j = 0; j < 8; ++j) {
    const float pos = std::pow(150000.0f, static_cast<float>(2 * j) / 16.0f);
    const float ramp =
        std::clamp((static_cast<float>(j) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f, 1.0f);
    const float want = (1.0f / (32.0f * pos)) * ramp + (1.0f / pos) * (1.0f - ramp);
    EXPECT_EQ(f.inv_freq[static_cast<size_t>(j)], want) << j;
  }
  EXPECT_EQ(f.inv_freq[0], plain[0]);              // j = 0 < low (2.02): extrapolated
  EXPECT_NE(f.inv_freq[7], plain[7]);              // j = 7 > high (4.35): interpolated
  EXPECT_EQ(f.inv_freq[7], 1.0f / (32.0f * std::pow(150000.0f, 14.0f / 16.0f)));
  // truncate (transformers' default) widens the range to whole dims [2, 5]: dim 2 keeps its plain frequency, dim 4
  // moves.
  s.truncate = true;
  const RopeFrequencies t = rope_frequencies(150000.0, 16, s);
  EXPECT_EQ(t.inv_freq[2], plain[2]);
  EXPECT_NE(t.inv_freq[4], f.inv_freq[4]);
}

TEST(RopeYarn, CosAndSinBothCarryTheAttentionScaling) {
  const RopeFrequencies f = rope_frequencies(150000.0, 16, yarn(32.0, 4096, 32.0, 1.0));
  float c[8], sn[8], c1[8], s1[8];
  rope_angles(f.inv_freq, 5, c, sn, f.attention_scaling);
  rope_angles(f.inv_freq, 5, c1, s1);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(c[j], c1[j] * f.attention_scaling) << j;
    EXPECT_EQ(sn[j], s1[j] * f.attention_scaling) << j;
  }
}

}  // namespace
}  // namespace wsb
