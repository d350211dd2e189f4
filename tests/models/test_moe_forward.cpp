// Reference forward passes of the MoE families (glm4_moe FP8 and BF16, deepseek_v3 NVFP4 and BF16, gpt_oss MXFP4 and
// BF16) on their tiny presets with synthetic canonical weights: finite logits; bitwise determinism across
// instances, sequences and reloads; TP 1/2/4/8 agreement; a byte of an expert weight or block scale changes the
// logits exactly when the expert is routed to; the step is fast; mismatched inputs are rejected naming the storage.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "models/layout/moe_access.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"
#include "models/quant/codecs.hpp"
#include "tests/models/moe_forward_test_util.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

using test::Logits;
using test::RankImages;

using test::expect_error;

class MoeForward : public ::testing::TestWithParam<std::string> {
 protected:
  ModelProfile profile = test::moe_profile(GetParam());
  std::map<std::string, std::vector<uint8_t>> weights = test::synth_checkpoint(profile);
  CanonicalLookup lookup = [this](const std::string& n) { return std::span<const uint8_t>(weights.at(n)); };
  // Longer than gpt-oss-tiny's sliding window (8), so the window and the sinks both matter.
  std::vector<int32_t> tokens = tokenize_bytes("MoE, quantized: 0123456789");

  Logits run_tp(int tp) {
    RankImages images(profile, tp, lookup);
    std::vector<RankStorageView> views = images.views();
    return test::run_tokens(*make_forward(profile, images.layouts, views), tokens);
  }
  /// The last MoE layer, whose routed experts see exactly one token in a one-token probe.
  int last_moe_layer() const { return profile.dims.layers - 1; }
};

TEST_P(MoeForward, LogitsAreFiniteAndVaried) {
  const Logits logits = run_tp(2);
  ASSERT_EQ(logits.size(), tokens.size());
  std::set<size_t> argmaxes;
  for (const auto& step : logits) {
    ASSERT_EQ(step.size(), 512u);
    size_t best = 0;
    for (size_t v = 0; v < step.size(); ++v) {
      ASSERT_TRUE(std::isfinite(step[v])) << v;
      if (step[v] > step[best]) best = v;
    }
    argmaxes.insert(best);
    const auto [lo, hi] = std::minmax_element(step.begin(), step.end());
    EXPECT_GT(*hi - *lo, 0.1f);  // not a degenerate (constant) output
  }
  EXPECT_GT(argmaxes.size(), 1u);  // the input moves the output
}

TEST_P(MoeForward, BitwiseDeterministicAcrossInstancesSequencesAndReloads) {
  for (int tp : {1, 2}) {
    RankImages images(profile, tp, lookup);
    std::vector<RankStorageView> views = images.views();
    auto a = make_forward(profile, images.layouts, views);
    auto b = make_forward(profile, images.layouts, views);
    const Logits ra = test::run_tokens(*a, tokens);
    EXPECT_TRUE(test::bitwise_equal(ra, test::run_tokens(*b, tokens))) << "tp " << tp;
    // Two sequences stepped alternately on one model: each is computed alone (batch invariance).
    auto s1 = a->new_sequence();
    auto s2 = a->new_sequence();
    Logits r1, r2;
    for (int32_t t : tokens) {
      r1.emplace_back();
      a->step(*s1, t, r1.back());
      r2.emplace_back();
      a->step(*s2, t, r2.back());
    }
    EXPECT_TRUE(test::bitwise_equal(ra, r1)) << "tp " << tp;
    EXPECT_TRUE(test::bitwise_equal(ra, r2)) << "tp " << tp;
    // A second, independent load at the same TP gives the same bits.
    EXPECT_TRUE(test::bitwise_equal(ra, run_tp(tp))) << "tp " << tp;
  }
}

TEST_P(MoeForward, TpDegreesAgreeClosely) {
  const Logits base = run_tp(1);
  // TP 8 replicates kv heads (glm, gpt-oss), starts deepseek's w2 shards inside a 16-block (K phase 8) and leaves
  // gpt-oss's last rank without any expert block (7 blocks over 8 ranks).
  for (int tp : {2, 4, 8}) {
    const Logits other = run_tp(tp);
    double worst = 0.0;
    for (size_t t = 0; t < tokens.size(); ++t)
      for (size_t v = 0; v < 512; ++v)
        worst = std::max(worst, static_cast<double>(std::abs(other[t][v] - base[t][v])));
    // Same math; only the rank-order reduction (and split NVFP4/MX blocks) regroup float32 additions.
    EXPECT_LT(worst, 1e-3) << GetParam() << " tp " << tp;
    EXPECT_FALSE(test::bitwise_equal(base, other)) << "tp " << tp << " should regroup sums";
    std::printf("%s tp=%d max |logit - tp1| = %.3g\n", GetParam().c_str(), tp, worst);
  }
}

/// Mutates one logical element of a runtime storage to another valid value of its format, in place.
void mutate_element(std::vector<uint8_t>& bytes, const RuntimeStorageSpec& spec, const ElementPos& pos) {
  uint8_t& byte = bytes[pos.byte];
  if (pos.nibble >= 0) {  // E2M1: flip the sign, or make a zero magnitude 1.0 (code 2)
    const int shift = 4 * pos.nibble;
    const uint8_t code = static_cast<uint8_t>((byte >> shift) & 0xF);
    const uint8_t next = (code & 0x7) == 0 ? 0x2 : static_cast<uint8_t>(code ^ 0x8);
    byte = static_cast<uint8_t>((byte & ~(0xF << shift)) | (next << shift));
  } else if (spec.dtype == DType::F8_E4M3) {  // sign flip keeps NaN codes out; zero becomes 1.0
    byte = (byte & 0x7F) == 0 ? 0x38 : static_cast<uint8_t>(byte ^ 0x80);
  } else if (spec.dtype == DType::U8) {  // E8M0 scale: one exponent step, never 0xFF
    byte = byte == 0xFE ? 0xFD : static_cast<uint8_t>(byte ^ 0x01);
  } else if (spec.dtype == DType::BF16) {  // sign flip; a zero (either sign) becomes 1.0
    uint16_t code;
    std::memcpy(&code, &byte, 2);
    code = (code & 0x7FFF) == 0 ? 0x3F80 : static_cast<uint16_t>(code ^ 0x8000);
    std::memcpy(&byte, &code, 2);
  } else {
    FAIL() << "no mutation rule for " << spec.name;
  }
}

/// Names of the routed-expert storages of a layer: the w13 weight first, then what applies per expert beside it:
/// the block/channel scale of quantized experts, the w13 bias of gpt_oss's BF16 experts, nothing for the BF16
/// experts of glm4_moe / deepseek_v3.
std::vector<std::string> w13_names(const ModelProfile& p, int layer) {
  const std::string base = llama_layer_name(layer, "mlp.experts.");
  if (p.quantization != "none") return {base + "w13_weight", base + "w13_weight_scale"};
  if (p.family == kGptOssFamily) return {base + "w13_weight", base + "w13_bias"};
  return {base + "w13_weight"};
}

TEST_P(MoeForward, ExpertWeightAndScaleBytesMatterExactlyWhenRouted) {
  // One token: the last MoE layer routes it to top_k experts. Changing one element of an expert's w13 weight, or
  // the scale of that element (quantized experts), must move the logits for exactly those experts and no other.
  const int tp = 2, layer = last_moe_layer();
  RankImages images(profile, tp, lookup);
  std::vector<RankStorageView> views = images.views();
  auto model = make_forward(profile, images.layouts, views);
  const std::vector<int32_t> probe = {'Q'};
  const Logits before = test::run_tokens(*model, probe);
  const std::vector<std::string> names = w13_names(profile, layer);
  const std::string& weight_name = names.front();
  std::set<int> weight_hits, scale_hits;
  for (int e = 0; e < profile.dims.experts; ++e) {
    for (const std::string& name : names) {
      std::vector<uint8_t>& bytes = images.storage(1, name);
      const RuntimeStorageSpec& spec = images.spec(1, name);
      const std::vector<uint8_t> saved = bytes;
      // Element (row 1, column 3) of the expert, on rank 1 (its storages are read like rank 0's).
      if (name == weight_name) {
        mutate_element(bytes, spec, weight_element(spec, e, 1, 3));
      } else if (spec.dtype == DType::BF16) {  // w13 bias [E, 2 I_r]: element 3 of expert e
        mutate_element(bytes, spec, ElementPos{static_cast<uint64_t>(e * spec.shape[1] + 3) * 2, -1});
      } else if (spec.dtype == DType::F32) {  // FP8 channel scale: double it
        const uint64_t at = scale_element(spec, e, 1, 3);
        float s;
        std::memcpy(&s, &bytes[at], 4);
        s *= 2.0f;
        std::memcpy(&bytes[at], &s, 4);
      } else {
        mutate_element(bytes, spec, ElementPos{scale_element(spec, e, 1, 3), -1});
      }
      ASSERT_NE(bytes, saved);
      const Logits after = test::run_tokens(*model, probe);
      if (!test::bitwise_equal(before, after)) (name == weight_name ? weight_hits : scale_hits).insert(e);
      bytes = saved;
    }
  }
  EXPECT_EQ(weight_hits.size(), static_cast<size_t>(profile.dims.top_k)) << GetParam();
  if (names.size() > 1) {
    EXPECT_EQ(scale_hits, weight_hits) << GetParam();
  }
  EXPECT_TRUE(test::bitwise_equal(before, test::run_tokens(*model, probe)));  // everything restored
}

TEST_P(MoeForward, WeightChangeShowsAtTheNextStep) {
  RankImages images(profile, 2, lookup);
  std::vector<RankStorageView> views = images.views();
  auto model = make_forward(profile, images.layouts, views);
  const Logits before = test::run_tokens(*model, tokens);
  auto seq = model->new_sequence();
  std::vector<float> logits;
  for (size_t t = 0; t < 5; ++t) {
    model->step(*seq, tokens[t], logits);
    ASSERT_EQ(std::memcmp(logits.data(), before[t].data(), 512 * sizeof(float)), 0);
  }
  // Every expert's element (0, 0) of the last layer's w2 on rank 0: whichever experts the next token picks, one
  // changed weight is among them (the model re-reads its storages at every step).
  const std::string name = llama_layer_name(last_moe_layer(), "mlp.experts.w2_weight");
  std::vector<uint8_t>& bytes = images.storage(0, name);
  const RuntimeStorageSpec& spec = images.spec(0, name);
  for (int e = 0; e < profile.dims.experts; ++e) mutate_element(bytes, spec, weight_element(spec, e, 0, 0));
  model->step(*seq, tokens[5], logits);
  EXPECT_NE(std::memcmp(logits.data(), before[5].data(), 512 * sizeof(float)), 0);
}

TEST_P(MoeForward, RejectsMismatchedInputs) {
  RankImages images(profile, 2, lookup);
  std::vector<RankStorageView> views = images.views();
  std::vector<RankStorageView> one(views.begin(), views.begin() + 1);
  expect_error([&] { make_forward(profile, images.layouts, one); }, ErrorKind::Mismatch,
               {profile.id, "2 rank layouts but 1 storage views"});
  // The w13 scale of quantized experts (a transformed storage); the w13 weight of unquantized ones.
  const bool scaled = profile.quantization != "none";
  const std::string expert =
      llama_layer_name(last_moe_layer(), scaled ? "mlp.experts.w13_weight_scale" : "mlp.experts.w13_weight");
  const size_t index = images.layouts[1].index_of(expert);
  std::vector<RankStorageView> short_view = views;
  short_view[1].storages[index] = short_view[1].storages[index].first(8);
  expect_error([&] { make_forward(profile, images.layouts, short_view); }, ErrorKind::Mismatch,
               {"rank 1 storage '" + expert + "': view has 8 bytes"});
  // A layout whose storage skipped its post-load transform (or claims one an unquantized storage never has) is
  // not the family's runtime layout.
  std::vector<RankLayout> untransformed = images.layouts;
  const std::string other = scaled ? "none" : "fp8_channel_weight";
  untransformed[1].storages[index].transform = other;
  expect_error([&] { make_forward(profile, untransformed, views); }, ErrorKind::Mismatch,
               {"rank 1 storage", expert, "(" + other + ")"});
  ModelProfile fewer = scale_profile(profile, ProfileScale{1});
  expect_error([&] { make_forward(fewer, images.layouts, views); }, ErrorKind::Mismatch, {fewer.id, "rank 0"});

  auto model = make_forward(profile, images.layouts, views);
  auto twin = make_forward(profile, images.layouts, views);
  auto seq = model->new_sequence();
  std::vector<float> logits;
  expect_error([&] { model->step(*seq, 512, logits); }, ErrorKind::Format, {"token id 512", "[0, 512)"});
  expect_error([&] { twin->step(*seq, 1, logits); }, ErrorKind::Mismatch, {"another forward model"});
  EXPECT_EQ(seq->position(), 0);
}

/// gpt-oss-tiny-bf16 weights that are the exact dequantization of gpt-oss-tiny-mxfp4's: every MXFP4 expert value
/// e2m1 * 2^(scale - 127) written as BF16 (exact: two mantissa bits) at [E, K, N] (transformers' x @ W layout, gate
/// and up interleaved along N as the MXFP4 rows are); every other tensor copied by name.
std::map<std::string, std::vector<uint8_t>> dequantized_bf16(const ModelProfile& bf16,
                                                             const std::map<std::string, std::vector<uint8_t>>& mx) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const TensorSpec& t : bf16.canonical_tensors()) {
    if (mx.count(t.name)) {
      out[t.name] = mx.at(t.name);
      continue;
    }
    const std::vector<uint8_t>& blocks = mx.at(t.name + "_blocks");  // [E, N, K/32, 16]
    const std::vector<uint8_t>& scales = mx.at(t.name + "_scales");  // [E, N, K/32]
    const int64_t experts = t.shape[0], k_dim = t.shape[1], n_dim = t.shape[2], kb = k_dim / 32;
    std::vector<uint8_t>& w = out[t.name];
    w.resize(t.bytes());
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t n = 0; n < n_dim; ++n)
        for (int64_t k = 0; k < k_dim; ++k) {
          const int64_t block = (e * n_dim + n) * kb + k / 32;
          const uint8_t code = static_cast<uint8_t>((blocks[static_cast<size_t>(block * 16 + (k % 32) / 2)] >>
                                                     (4 * (k % 2))) & 0xF);
          const float v = e2m1_to_float(code) * e8m0_to_float(scales[static_cast<size_t>(block)]);
          const uint16_t bits = float_to_bf16(v);
          EXPECT_EQ(bf16_to_float(bits), v) << t.name;  // exact, so both models hold the same weights
          std::memcpy(&w[static_cast<size_t>((e * k_dim + k) * n_dim + n) * 2], &bits, 2);
        }
  }
  return out;
}

TEST(GptOssBf16Forward, EqualsTheMxfp4ForwardOfTheSameWeights) {
  // The same model in both forms must give the same logits at every TP: this pins the BF16 experts' K-major
  // layout, their gate/up interleave and the even TP split of the intermediate against the MXFP4 path (whose
  // sums group per 32-block, so agreement is to float32 rounding, not bitwise).
  const ModelProfile mx = test::moe_profile("gpt-oss-tiny-mxfp4"), bf = test::moe_profile("gpt-oss-tiny-bf16");
  const auto mx_weights = test::synth_checkpoint(mx);
  const auto bf_weights = dequantized_bf16(bf, mx_weights);
  const std::vector<int32_t> tokens = tokenize_bytes("MoE, quantized: 0123456789");
  auto run = [&](const ModelProfile& p, const std::map<std::string, std::vector<uint8_t>>& w, int tp) {
    RankImages images(p, tp, [&](const std::string& n) { return std::span<const uint8_t>(w.at(n)); });
    std::vector<RankStorageView> views = images.views();
    return test::run_tokens(*make_forward(p, images.layouts, views), tokens);
  };
  for (int tp : {1, 2, 4}) {
    const Logits a = run(mx, mx_weights, tp), b = run(bf, bf_weights, tp);
    double worst = 0.0, spread = 0.0;
    for (size_t t = 0; t < tokens.size(); ++t)
      for (size_t v = 0; v < 512; ++v) {
        worst = std::max(worst, static_cast<double>(std::abs(a[t][v] - b[t][v])));
        spread = std::max(spread, static_cast<double>(std::abs(a[t][v])));
      }
    EXPECT_LT(worst, 1e-5) << "tp " << tp;
    EXPECT_GT(spread, 0.1) << "tp " << tp;  // the logits are not trivially equal
    std::printf("gpt-oss-tiny bf16 vs mxfp4 tp=%d max |dlogit| = %.3g\n", tp, worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, MoeForward, ::testing::ValuesIn(test::kMoeTinyProfiles), [](const auto& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

}  // namespace
}  // namespace wsb
