// Building blocks of the MoE forward passes: the quantized matrix-vector kernels read the runtime storages (after
// sharding and the post-load transform) and agree with a direct dequantization of the canonical tensors for every
// rank and expert at TP 1/2/4/8 (BF16, FP8 channel, NVFP4 with straddled w2 blocks, MXFP4 with padded ranks,
// gpt_oss's K-major BF16); the routing, RoPE, attention and activation helpers give the exact values of their
// transformers counterparts.
#include <gtest/gtest.h>

#include <cmath>

#include "models/forward/dense_ops.hpp"
#include "models/forward/moe_ops.hpp"
#include "models/forward/quant_linear.hpp"
#include "models/layout/llama_layout.hpp"
#include "models/layout/moe_layout.hpp"
#include "models/profile/llama_family.hpp"
#include "models/profile/moe_family.hpp"
#include "tests/models/moe_forward_test_util.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

using test::RankImages;

float f32_of(const std::vector<uint8_t>& b, uint64_t index) {
  float v;
  std::memcpy(&v, &b[index * 4], 4);
  return v;
}

uint8_t nibble(const std::vector<uint8_t>& packed, uint64_t element) { return e2m1_packed_at(packed.data(), element); }

/// A bound kernel and its logical [rows, cols] weight dequantized straight from the canonical tensors.
struct Case {
  QuantLinear linear;
  std::vector<double> value;  // row-major [rows, cols]
  std::string what;
};

/// Fills case.value from value(n, k) (called once per element).
template <class F>
Case make_case(const QuantLinear& linear, std::string what, F value) {
  Case c{linear, std::vector<double>(static_cast<size_t>(linear.rows * linear.cols)), std::move(what)};
  for (int64_t n = 0; n < linear.rows; ++n)
    for (int64_t k = 0; k < linear.cols; ++k) c.value[static_cast<size_t>(n * linear.cols + k)] = value(n, k);
  return c;
}

/// y = linear(x) against sum_k value(n, k) x[k] in double, for one expert.
void expect_matches(const Case& c, int64_t expert) {
  std::vector<float> x(static_cast<size_t>(c.linear.cols)), y(static_cast<size_t>(c.linear.rows));
  std::vector<float> scratch(x.size() + 1);
  test::Draws u(c.what, static_cast<uint64_t>(expert) + 11);
  for (float& v : x) v = 2.0f * u.next() - 1.0f;
  linear_matvec(c.linear, expert, x.data(), y.data(), scratch.data());
  for (int64_t n = 0; n < c.linear.rows; ++n) {
    double want = 0.0, magnitude = 0.0;
    for (int64_t k = 0; k < c.linear.cols; ++k) {
      const double term = c.value[static_cast<size_t>(n * c.linear.cols + k)] * x[static_cast<size_t>(k)];
      want += term;
      magnitude += std::abs(term);
    }
    ASSERT_NEAR(y[static_cast<size_t>(n)], want, 1e-5 * magnitude + 1e-30)
        << c.what << " expert " << expert << " row " << n;
  }
}

class ExpertKernels : public ::testing::TestWithParam<std::string> {
 protected:
  ModelProfile profile = test::moe_profile(GetParam());
  std::map<std::string, std::vector<uint8_t>> w = test::synth_checkpoint(profile);
  CanonicalLookup lookup = [this](const std::string& n) { return std::span<const uint8_t>(w.at(n)); };
  const int layer = profile.dims.first_dense_layers;  // first MoE layer

  const std::vector<uint8_t>& canon(int expert, const std::string& leaf) {
    return w.at(profile.tensor_prefix + expert_tensor_name(layer, expert, leaf));
  }
  const std::vector<uint8_t>& canon_layer(const std::string& leaf) {
    return w.at(profile.tensor_prefix + llama_layer_name(layer, leaf));
  }
  StorageRef ref(const RankImages& images, int rank, const std::string& leaf) {
    const std::string name = llama_layer_name(layer, leaf);
    return {&images.spec(rank, name), images.bytes[static_cast<size_t>(rank)][images.layouts[static_cast<size_t>(
                                                                                  rank)].index_of(name)].data()};
  }

  /// w13 and w2 of `expert` on `rank`, bound as the family's forward binds them, with canonical references.
  std::vector<Case> cases(const RankImages& images, int tp, int rank, int expert);
};

std::vector<Case> ExpertKernels::cases(const RankImages& img, int tp, int rank, int e) {
  const ModelDims& d = profile.dims;
  const int64_t h = d.hidden;
  std::vector<Case> out;
  if (profile.quantization == kQuantNone && profile.family != kGptOssFamily) {
    // Unquantized experts (glm4_moe and deepseek_v3 BF16): w13 = [gate slice; up slice], w2 input columns.
    const RankSlice im = moe_intermediate_slice(d, tp, rank);
    auto bf16 = [&](const std::string& proj, int64_t row, int64_t k, int64_t cols) {
      const std::vector<uint8_t>& b = canon(e, proj + ".weight");
      uint16_t code;
      std::memcpy(&code, &b[static_cast<size_t>(row * cols + k) * 2], 2);
      return double{bf16_to_float(code)};
    };
    const QuantLinear w13 = dense_linear(ref(img, rank, "mlp.experts.w13_weight"), 2 * im.length, h);
    out.push_back(make_case(w13, "bf16 w13", [&](int64_t n, int64_t k) {
      return n < im.length ? bf16("gate_proj", im.start + n, k, h) : bf16("up_proj", im.start + n - im.length, k, h);
    }));
    const QuantLinear w2 = dense_linear(ref(img, rank, "mlp.experts.w2_weight"), h, im.length);
    out.push_back(make_case(w2, "bf16 w2", [&](int64_t n, int64_t k) {
      return bf16("down_proj", n, im.start + k, d.moe_intermediate);
    }));
  } else if (profile.family == kGlm4MoeFamily) {
    // FP8 channel: value = e4m3(weight[row][k]) * weight_scale[row] (compressed-tensors, moe_family.hpp).
    const RankSlice im = moe_intermediate_slice(d, tp, rank);
    // Canonical tensors resolved once per expert: (weight, weight_scale) of each projection.
    using Fp8 = std::pair<const std::vector<uint8_t>*, const std::vector<uint8_t>*>;
    auto tensors = [&](const std::string& proj) {
      return Fp8{&canon(e, proj + ".weight"), &canon(e, proj + ".weight_scale")};
    };
    const Fp8 gate = tensors("gate_proj"), up = tensors("up_proj"), down = tensors("down_proj");
    auto fp8 = [](const Fp8& t, int64_t row, int64_t k, int64_t cols) {
      return double{e4m3_to_float((*t.first)[static_cast<size_t>(row * cols + k)])} *
             f32_of(*t.second, static_cast<uint64_t>(row));
    };
    const QuantLinear w13 = fp8_linear(ref(img, rank, "mlp.experts.w13_weight"),
                                       ref(img, rank, "mlp.experts.w13_weight_scale"), 2 * im.length, h);
    out.push_back(make_case(w13, "glm w13", [&](int64_t n, int64_t k) {  // [gate slice; up slice]
      return n < im.length ? fp8(gate, im.start + n, k, h) : fp8(up, im.start + n - im.length, k, h);
    }));
    const QuantLinear w2 = fp8_linear(ref(img, rank, "mlp.experts.w2_weight"),
                                      ref(img, rank, "mlp.experts.w2_weight_scale"), h, im.length);
    out.push_back(make_case(w2, "glm w2", [&](int64_t n, int64_t k) {
      return fp8(down, n, im.start + k, d.moe_intermediate);
    }));
  } else if (profile.family == kDeepseekV3Family) {
    // NVFP4: value = e2m1 * e4m3(block scale) * weight_scale_2 (ModelOpt, moe_family.hpp).
    const RankSlice im = moe_intermediate_slice(d, tp, rank);
    struct Nvfp4 {
      const std::vector<uint8_t>*weight, *scale;
      float scale_2;
    };
    auto tensors = [&](const std::string& proj) {
      return Nvfp4{&canon(e, proj + ".weight"), &canon(e, proj + ".weight_scale"),
                   f32_of(canon(e, proj + ".weight_scale_2"), 0)};
    };
    const Nvfp4 gate = tensors("gate_proj"), up = tensors("up_proj"), down = tensors("down_proj");
    auto nvfp4 = [](const Nvfp4& t, int64_t row, int64_t k, int64_t cols) {
      const double code = e2m1_to_float(nibble(*t.weight, static_cast<uint64_t>(row * cols + k)));
      const double block = e4m3_to_float((*t.scale)[static_cast<size_t>(row * (cols / 16) + k / 16)]);
      return code * block * t.scale_2;
    };
    const std::string x = "mlp.experts.";
    const QuantLinear w13 = nvfp4_linear(ref(img, rank, x + "w13_weight"), ref(img, rank, x + "w13_weight_scale"),
                                         ref(img, rank, x + "w13_alpha"), ref(img, rank, x + "w13_input_scale"),
                                         2 * im.length, h, 0);
    out.push_back(make_case(w13, "kimi w13", [&](int64_t n, int64_t k) {  // [up slice; gate slice]
      return n < im.length ? nvfp4(up, im.start + n, k, h) : nvfp4(gate, im.start + n - im.length, k, h);
    }));
    const QuantLinear w2 = nvfp4_linear(ref(img, rank, x + "w2_weight"), ref(img, rank, x + "w2_weight_scale"),
                                        ref(img, rank, x + "w2_alpha"), ref(img, rank, x + "w2_input_scale"), h,
                                        im.length, im.start % kNvfp4Block);
    out.push_back(make_case(w2, "kimi w2 (K phase " + std::to_string(im.start % 16) + ")", [&](int64_t n, int64_t k) {
      return nvfp4(down, n, im.start + k, d.moe_intermediate);
    }));
  } else if (profile.family == kGptOssFamily && profile.quantization == kQuantNone) {
    // gpt_oss BF16: canonical gate_up_proj [E, H, 2I] and down_proj [E, I, H] are x @ W (value(n, k) = W[e][k][n]);
    // the rank holds outputs [2 start, 2 end) of gate_up (interleave kept) and inputs [start, end) of down.
    const RankSlice im = gpt_oss_bf16_intermediate_slice(d, tp, rank);
    const std::vector<uint8_t>& gate_up = canon_layer("mlp.experts.gate_up_proj");
    const std::vector<uint8_t>& down = canon_layer("mlp.experts.down_proj");
    auto bf16 = [e](const std::vector<uint8_t>& t, int64_t k_dim, int64_t n_dim, int64_t k, int64_t n) {
      uint16_t code;
      std::memcpy(&code, &t[static_cast<size_t>((e * k_dim + k) * n_dim + n) * 2], 2);
      return double{bf16_to_float(code)};
    };
    const QuantLinear w13 = dense_kmajor_linear(ref(img, rank, "mlp.experts.w13_weight"), 2 * im.length, h);
    out.push_back(make_case(w13, "gpt-oss bf16 w13", [&](int64_t n, int64_t k) {
      return bf16(gate_up, h, 2 * d.intermediate, k, 2 * im.start + n);
    }));
    const QuantLinear w2 = dense_kmajor_linear(ref(img, rank, "mlp.experts.w2_weight"), h, im.length);
    out.push_back(make_case(w2, "gpt-oss bf16 w2", [&](int64_t n, int64_t k) {
      return bf16(down, d.intermediate, h, im.start + k, n);
    }));
  } else {
    // MXFP4: value = e2m1 * 2^(e8m0 - 127) over [E, rows, K/32, 16] blocks and [E, rows, K/32] scales.
    const RankSlice im = gpt_oss_intermediate_slice(d, tp, rank);
    using Mxfp4 = std::pair<const std::vector<uint8_t>*, const std::vector<uint8_t>*>;  // blocks, scales
    auto tensors = [&](const std::string& proj) {
      return Mxfp4{&canon_layer("mlp.experts." + proj + "_blocks"), &canon_layer("mlp.experts." + proj + "_scales")};
    };
    const Mxfp4 gate_up = tensors("gate_up_proj"), down = tensors("down_proj");
    auto mxfp4 = [e](const Mxfp4& t, int64_t rows, int64_t row, int64_t k, int64_t cols) {
      const uint64_t r = static_cast<uint64_t>(e * rows + row), kb = static_cast<uint64_t>(cols / 32);
      const double code = e2m1_to_float(nibble(*t.first, r * static_cast<uint64_t>(cols) + static_cast<uint64_t>(k)));
      return code * e8m0_to_float((*t.second)[r * kb + static_cast<uint64_t>(k) / 32]);
    };
    const QuantLinear w13 = mxfp4_linear(ref(img, rank, "mlp.experts.w13_weight"),
                                         ref(img, rank, "mlp.experts.w13_weight_scale"), 2 * im.length, h);
    out.push_back(make_case(w13, "gpt-oss w13", [&](int64_t n, int64_t k) {  // interleaved rows kept
      return mxfp4(gate_up, 2 * d.intermediate, 2 * im.start + n, k, h);
    }));
    const QuantLinear w2 = mxfp4_linear(ref(img, rank, "mlp.experts.w2_weight"),
                                        ref(img, rank, "mlp.experts.w2_weight_scale"), h, im.length);
    out.push_back(make_case(w2, "gpt-oss w2 (" + std::to_string(im.length) + " of " + std::to_string(im.padded) + ")",
                            [&](int64_t n, int64_t k) { return mxfp4(down, h, n, im.start + k, d.intermediate); }));
  }
  return out;
}

TEST_P(ExpertKernels, MatchCanonicalDequantizationOnEveryRankAndExpert) {
  for (int tp : {1, 2, 4, 8}) {
    RankImages images(profile, tp, lookup);
    for (int r = 0; r < tp; ++r)
      for (int e = 0; e < profile.dims.experts; ++e)
        for (const Case& c : cases(images, tp, r, e)) {
          SCOPED_TRACE(testing::Message() << GetParam() << " tp " << tp << " rank " << r);
          expect_matches(c, e);
        }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, ExpertKernels, ::testing::ValuesIn(test::kMoeTinyProfiles), [](const auto& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

TEST(QuantLinear, Fp8AttentionProjectionMatchesCanonicalRowsWithReplicatedKvHeads) {
  ModelProfile p = test::moe_profile("glm-tiny-fp8");
  auto w = test::synth_checkpoint(p);
  const int tp = 8, rank = 5;  // 4 kv heads over 8 ranks: rank 5 holds q head 5 and kv head 2
  RankImages images(p, tp, [&](const std::string& n) { return std::span<const uint8_t>(w.at(n)); });
  const LlamaRankHeads heads = llama_rank_heads(p.dims, tp, rank);
  ASSERT_EQ(heads.kv_head_start, 2);
  const int64_t hd = p.dims.head_dim, h = p.dims.hidden, q = heads.q_heads * hd, kv = heads.kv_heads * hd;
  const std::string name = llama_layer_name(0, "self_attn.qkv_proj");
  auto at = [&](const std::string& n) {
    return StorageRef{&images.spec(rank, n), images.storage(rank, n).data()};
  };
  const QuantLinear qkv = fp8_linear(at(name + ".weight"), at(name + ".weight_scale"), q + 2 * kv, h);
  const Case c = make_case(qkv, "glm qkv", [&](int64_t n, int64_t k) {
    std::string proj = "q_proj";
    int64_t row = heads.q_head_start * hd + n;
    if (n >= q) {
      proj = n < q + kv ? "k_proj" : "v_proj";
      row = heads.kv_head_start * hd + (n - q) % kv;
    }
    const std::string base = llama_layer_name(0, "self_attn." + proj);
    return double{e4m3_to_float(w.at(base + ".weight")[static_cast<size_t>(row * h + k)])} *
           f32_of(w.at(base + ".weight_scale"), static_cast<uint64_t>(row));
  });
  expect_matches(c, 0);
}

TEST(QuantLinear, BindingRejectsStoragesOfAnotherLayoutNamingThem) {
  ModelProfile p = test::moe_profile("kimi-tiny-nvfp4");
  auto w = test::synth_checkpoint(p);
  RankImages images(p, 1, [&](const std::string& n) { return std::span<const uint8_t>(w.at(n)); });
  auto at = [&](const std::string& leaf) {
    const std::string n = llama_layer_name(1, leaf);
    return StorageRef{&images.spec(0, n), images.storage(0, n).data()};
  };
  test::expect_error([&] { fp8_linear(at("mlp.experts.w13_weight"), at("mlp.experts.w13_weight_scale"), 128, 128); },
                     ErrorKind::Mismatch,
                     {"storage 'model.layers.1.mlp.experts.w13_weight' (U8 [8, 128, 64]", "expected dtype F8_E4M3"});
  // Wrong logical size: 2 * 64 rows of w13 exist, 130 do not.
  const std::string wrong_size = test::error_text([&] {
    nvfp4_linear(at("mlp.experts.w13_weight"), at("mlp.experts.w13_weight_scale"), at("mlp.experts.w13_alpha"),
                 at("mlp.experts.w13_input_scale"), 130, 128, 0);
  });
  EXPECT_NE(wrong_size.find("expected U8 [E, 130, 64]"), std::string::npos) << wrong_size;
}

TEST(MoeOps, TopKTiesGoToTheLowerIndex) {
  const float v[] = {0.5f, 0.9f, 0.5f, 0.9f, 0.1f};
  int out[3];
  top_k_indices(v, 5, 3, out);
  EXPECT_EQ(std::vector<int>(out, out + 3), (std::vector<int>{1, 3, 0}));
}

TEST(MoeOps, SigmoidRoutingSelectsWithTheBiasButWeighsWithTheScores) {
  // sigmoid(0) = 0.5, sigmoid(ln 3) = 0.75, sigmoid(-ln 3) = 0.25. The bias lifts expert 2 (0.25 + 0.4) above
  // expert 1 (0.5) for selection; the weights are the plain scores 0.75 and 0.25 (sum 1), scaled by 2.
  const float logits[] = {std::log(3.0f), 0.0f, -std::log(3.0f), -5.0f};
  const float bias[] = {0.0f, 0.0f, 0.4f, 0.0f};
  int experts[2];
  float weights[2], scratch[8];
  sigmoid_topk_route(logits, bias, 4, 2, true, 2.0f, experts, weights, scratch);
  EXPECT_EQ(experts[0], 0);
  EXPECT_EQ(experts[1], 2);
  EXPECT_NEAR(weights[0], 1.5f, 1e-6f);
  EXPECT_NEAR(weights[1], 0.5f, 1e-6f);
  sigmoid_topk_route(logits, bias, 4, 2, false, 1.0f, experts, weights, scratch);
  EXPECT_NEAR(weights[0], 0.75f, 1e-6f);
  EXPECT_NEAR(weights[1], 0.25f, 1e-6f);
}

TEST(MoeOps, SoftmaxRoutingNormalizesOverTheChosenLogitsOnly) {
  const float logits[] = {1.0f, 3.0f, -2.0f, 3.0f + std::log(3.0f)};
  int experts[2];
  float weights[2];
  softmax_topk_route(logits, 4, 2, experts, weights);
  EXPECT_EQ(experts[0], 3);
  EXPECT_EQ(experts[1], 1);
  EXPECT_NEAR(weights[0], 0.75f, 1e-6f);
  EXPECT_NEAR(weights[1], 0.25f, 1e-6f);
}

TEST(MoeOps, ClampedSwigluFollowsGptOss) {
  // pairs (gate, up): gate clamped above only, up both ways.
  const float gate_up[] = {10.0f, -9.0f, -3.0f, 2.0f, 0.0f, 100.0f};
  float out[3];
  clamped_swiglu_interleaved(gate_up, 3, 7.0f, out);
  auto glu = [](float g) { return g / (1.0f + std::exp(-1.702f * g)); };
  EXPECT_FLOAT_EQ(out[0], (-7.0f + 1.0f) * glu(7.0f));
  EXPECT_FLOAT_EQ(out[1], (2.0f + 1.0f) * glu(-3.0f));
  EXPECT_FLOAT_EQ(out[2], 0.0f);
}

TEST(MoeOps, PartialRopeRotatesOnlyTheLeadingDims) {
  // head_dim 8, rotary 4: pairs (0, 2) and (1, 3) turn; elements 4..7 pass through.
  float x[16] = {1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 0, 0, 9, 9, 9, 9};
  const float cos[] = {0.0f, 1.0f}, sin[] = {1.0f, 0.0f};
  apply_partial_rope(x, 2, 8, 4, cos, sin);
  EXPECT_EQ(std::vector<float>(x, x + 8), (std::vector<float>{-3, 2, 1, 4, 5, 6, 7, 8}));
  EXPECT_EQ(std::vector<float>(x + 8, x + 16), (std::vector<float>{0, 0, 1, 0, 9, 9, 9, 9}));
}

TEST(MoeOps, InterleavedRopeTurnsAdjacentPairsAndDeinterleaves) {
  // Stored pairs (x0, x1) and (x2, x3); angle 0 turns by 90 degrees, angle 1 not at all. Output order
  // [even..., odd...] as transformers' view/transpose leaves it.
  float x[4] = {1, 2, 3, 4}, tmp[4];
  const float cos[] = {0.0f, 1.0f}, sin[] = {1.0f, 0.0f};
  apply_rope_interleaved(x, 4, cos, sin, tmp);
  EXPECT_EQ(std::vector<float>(x, x + 4), (std::vector<float>{-2, 3, 1, 4}));
}

TEST(MoeOps, SinkJoinsTheDenominatorAndWindowDropsOldPositions) {
  // Two positions with equal scores 0 and values 1 / 3; a sink logit of ln 2 takes half the mass.
  const float q[2] = {0.0f, 0.0f}, k[4] = {1, 1, 1, 1}, v[4] = {1, 1, 3, 3};
  float scores[2], out[2];
  const float sink = std::log(2.0f);
  attend_head_window(q, k, 2, 2, v, 2, 2, 0, 2, 1.0f, &sink, scores, out);
  EXPECT_NEAR(out[0], 0.25f * 1 + 0.25f * 3, 1e-6f);
  attend_head_window(q, k, 2, 2, v, 2, 2, 0, 2, 1.0f, nullptr, scores, out);
  EXPECT_NEAR(out[0], 2.0f, 1e-6f);
  attend_head_window(q, k, 2, 2, v, 2, 2, 1, 1, 1.0f, nullptr, scores, out);  // window of one: position 1 only
  EXPECT_EQ(out[0], 3.0f);
}

}  // namespace
}  // namespace wsb
