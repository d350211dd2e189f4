// E4M3 / E8M0 / E2M1 codecs against torch 2.11's tables (tests/fixtures/dtypes/dtype_tables.json: every
// float8_e4m3fn and float8_e8m0fnu code as float32 bits, torch's float32 -> e4m3fn cast grid, the OCP MX E2M1
// table), plus exhaustive round-trip and round-to-nearest-even checks, and the quant_role naming rule.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <nlohmann/json.hpp>

#include "checkpoint_test_util.hpp"
#include "models/quant/code_step.hpp"
#include "models/quant/codecs.hpp"
#include "models/quant/quant_role.hpp"

namespace wsb {
namespace {

using test::expect_error;

const nlohmann::json& tables() {
  static const nlohmann::json j = nlohmann::json::parse(
      testutil::read_bytes(std::filesystem::path(WSBENCH_FIXTURES_DIR) / "dtypes" / "dtype_tables.json"));
  return j;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

TEST(QuantCodecs, E4M3AllCodesMatchTorchBitForBit) {
  const auto expected = tables().at("float8_e4m3fn_to_f32_bits").get<std::vector<uint32_t>>();
  ASSERT_EQ(expected.size(), 256u);
  for (uint32_t code = 0; code < 256; ++code) {
    EXPECT_EQ(bits(e4m3_to_float(static_cast<uint8_t>(code))), expected[code]) << "code " << code;
  }
  // Anchors, so a reordered fixture cannot hide an error: min subnormal 2^-9, 1.0 = 0x38, max 448, NaN.
  EXPECT_EQ(expected[0x01], bits(0x1p-9f));
  EXPECT_EQ(expected[0x38], bits(1.0f));
  EXPECT_EQ(expected[0x7E], bits(448.0f));
  EXPECT_EQ(expected[0xFE], bits(-448.0f));
  EXPECT_EQ(expected[0x7F], 0x7FF00000u);
  EXPECT_EQ(expected[0xFF], 0xFFF00000u);
  EXPECT_EQ(kE4M3Max, 448.0f);
  for (uint32_t code = 0; code < 256; ++code) {
    EXPECT_EQ(e4m3_is_nan(static_cast<uint8_t>(code)), code == 0x7F || code == 0xFF) << code;
  }
}

TEST(QuantCodecs, E8M0AllCodesMatchTorchBitForBit) {
  const auto expected = tables().at("float8_e8m0fnu_to_f32_bits").get<std::vector<uint32_t>>();
  ASSERT_EQ(expected.size(), 256u);
  for (uint32_t code = 0; code < 256; ++code) {
    EXPECT_EQ(bits(e8m0_to_float(static_cast<uint8_t>(code))), expected[code]) << "code " << code;
  }
  EXPECT_EQ(expected[0], 0x00400000u);  // 2^-127, a float32 subnormal
  EXPECT_EQ(expected[127], bits(1.0f));
  EXPECT_EQ(expected[254], bits(0x1p127f));
  EXPECT_EQ(expected[255], 0x7FC00001u);
}

TEST(QuantCodecs, E4M3CastGridMatchesTorch) {
  const auto in = tables().at("f32_to_e4m3fn_grid_in").get<std::vector<uint32_t>>();
  const auto out = tables().at("f32_to_e4m3fn_grid_out_code").get<std::vector<uint32_t>>();
  ASSERT_EQ(in.size(), 23u);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(float_to_e4m3(from_bits(in[i])), out[i]) << "grid point " << i << " = " << from_bits(in[i]);
  }
  // The grid's overflow points: 448 and 464 -> 0x7E, 480 -> NaN, +inf and NaN -> 0x7F, -0.75 -> 0xB4.
  EXPECT_EQ(in[15], bits(448.0f));
  EXPECT_EQ(out[15], 0x7Eu);
  EXPECT_EQ(in[16], bits(464.0f));
  EXPECT_EQ(out[16], 0x7Eu);
  EXPECT_EQ(in[17], bits(480.0f));
  EXPECT_EQ(out[17], 0x7Fu);
  EXPECT_EQ(in[21], 0x7F800000u);
  EXPECT_EQ(out[21], 0x7Fu);
  EXPECT_EQ(in[19], bits(-0.75f));
  EXPECT_EQ(out[19], 0xB4u);
}

TEST(QuantCodecs, E4M3RoundTripsAndRoundsHalfwayToEven) {
  for (uint32_t code = 0; code < 256; ++code) {
    if (e4m3_is_nan(static_cast<uint8_t>(code))) continue;
    ASSERT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(code))), code);
  }
  // Between neighbours c and c + 1 (both finite, positive): the midpoint goes to the even code, anything above
  // or below it to the nearer one. Midpoints of E4M3 neighbours are exact in float32.
  for (uint32_t c = 0; c < 0x7E; ++c) {
    const float lo = e4m3_to_float(static_cast<uint8_t>(c));
    const float hi = e4m3_to_float(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;
    const uint32_t even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(float_to_e4m3(mid), even) << "midpoint of codes " << c << " and " << c + 1;
    EXPECT_EQ(float_to_e4m3(std::nextafter(mid, 0.0f)), c) << c;
    EXPECT_EQ(float_to_e4m3(std::nextafter(mid, 1e9f)), c + 1) << c;
    EXPECT_EQ(float_to_e4m3(-mid), 0x80 | even) << c;
  }
  EXPECT_EQ(float_to_e4m3(std::nextafter(464.0f, 0.0f)), 0x7E);
  EXPECT_EQ(float_to_e4m3(std::nextafter(464.0f, 1e9f)), 0x7F);
  EXPECT_EQ(float_to_e4m3(-464.0f), 0xFE);
  EXPECT_EQ(float_to_e4m3(-1e30f), 0xFF);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::infinity()), 0xFF);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::quiet_NaN()), 0xFF);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_e4m3(0x1p-10f), 0x00);                     // half the smallest subnormal: ties to 0
  EXPECT_EQ(float_to_e4m3(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3(from_bits(1)), 0x00);                 // float32 subnormal
  EXPECT_EQ(float_to_e4m3(0.1f), 29);                           // 1.6 * 2^-4 -> 1.625 * 2^-4
}

TEST(QuantCodecs, E4M3CastAgreesWithNearestTableEntry) {
  // Random float32 bit patterns from 0 to beyond 480: the cast must pick the nearest finite code (ties to the
  // even code), or NaN above 464.
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> pattern(0, 0x43F80000u);  // 0 .. 496
  for (int n = 0; n < 200000; ++n) {
    const float x = from_bits(pattern(rng));
    uint32_t best = 0;
    for (uint32_t c = 1; c <= 0x7E; ++c) {
      const double d_best = std::fabs(static_cast<double>(e4m3_to_float(static_cast<uint8_t>(best))) - x);
      const double d = std::fabs(static_cast<double>(e4m3_to_float(static_cast<uint8_t>(c))) - x);
      if (d < d_best || (d == d_best && c % 2 == 0)) best = c;
    }
    const uint32_t expected = x > 464.0f ? 0x7F : best;
    ASSERT_EQ(float_to_e4m3(x), expected) << x;
    ASSERT_EQ(float_to_e4m3(-x), expected | 0x80) << -x;
  }
}

TEST(QuantCodecs, E2M1TableMatchesTheMxSpec) {
  const auto expected = tables().at("e2m1_to_f32").get<std::vector<float>>();
  ASSERT_EQ(expected.size(), 16u);
  for (uint32_t code = 0; code < 16; ++code) {
    EXPECT_EQ(bits(e2m1_to_float(static_cast<uint8_t>(code))), bits(expected[code])) << code;
    EXPECT_EQ(float_to_e2m1(expected[code]), code);
    EXPECT_EQ(e2m1_to_float(static_cast<uint8_t>(0xF0 | code)), e2m1_to_float(static_cast<uint8_t>(code)));
  }
  EXPECT_EQ(expected[7], 6.0f);
  EXPECT_EQ(bits(expected[8]), 0x80000000u);  // -0
  // Halfway cases go to the even code: 0.25 -> 0, 0.75 -> 1.0 (code 2), 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2,
  // 3.5 -> 4, 5 -> 4; others to the nearer one. Overflow saturates to +-6.
  const std::vector<std::pair<float, uint8_t>> cases{
      {0.25f, 0}, {0.2501f, 1}, {0.75f, 2}, {0.7499f, 1}, {1.25f, 2}, {1.75f, 4}, {2.5f, 4}, {2.51f, 5},
      {3.5f, 6},  {5.0f, 6},    {5.01f, 7}, {6.5f, 7},    {1e30f, 7}, {-5.0f, 14}, {-7.0f, 15}, {-0.1f, 8}};
  for (auto [value, code] : cases) EXPECT_EQ(float_to_e2m1(value), code) << value;
  EXPECT_EQ(float_to_e2m1(std::numeric_limits<float>::infinity()), 7);
  expect_error([] { float_to_e2m1(std::numeric_limits<float>::quiet_NaN()); }, ErrorKind::Format,
               {"float_to_e2m1", "NaN"});
  // Packing: element 2k in the low nibble of byte k.
  const uint8_t packed[2] = {0x7A, 0x1F};
  EXPECT_EQ(e2m1_packed_at(packed, 0), 0xA);
  EXPECT_EQ(e2m1_packed_at(packed, 1), 0x7);
  EXPECT_EQ(e2m1_packed_at(packed, 2), 0xF);
  EXPECT_EQ(e2m1_packed_at(packed, 3), 0x1);
}

TEST(QuantCodecs, E8M0FromFloatFollowsTorch) {
  for (uint32_t code = 0; code < 255; ++code) {
    ASSERT_EQ(float_to_e8m0(e8m0_to_float(static_cast<uint8_t>(code))), code);
  }
  // Rounding on the linear scale between powers of two: mantissa >= 1.5 rounds up (1.5 itself too).
  EXPECT_EQ(float_to_e8m0(1.0f), 127);
  EXPECT_EQ(float_to_e8m0(std::nextafter(1.5f, 0.0f)), 127);
  EXPECT_EQ(float_to_e8m0(1.5f), 128);
  EXPECT_EQ(float_to_e8m0(3.0f), 129);
  EXPECT_EQ(float_to_e8m0(-4.0f), 129);  // sign ignored
  EXPECT_EQ(float_to_e8m0(0.0f), 0);
  EXPECT_EQ(float_to_e8m0(0x1p127f), 254);
  EXPECT_EQ(float_to_e8m0(0x1.8p127f), 0xFF);  // beyond the largest scale: NaN
  EXPECT_EQ(float_to_e8m0(std::numeric_limits<float>::infinity()), 0xFF);
  EXPECT_EQ(float_to_e8m0(std::numeric_limits<float>::quiet_NaN()), 0xFF);
  // float32 subnormals, by torch's bit rule: 2^-127 stays code 0; anything above it rounds up to 2^-126.
  EXPECT_EQ(float_to_e8m0(from_bits(0x00400000u)), 0);
  EXPECT_EQ(float_to_e8m0(from_bits(0x00400001u)), 1);
  EXPECT_EQ(float_to_e8m0(from_bits(0x003FFFFFu)), 0);
  EXPECT_EQ(kE8M0Nan, 0xFF);
}

TEST(QuantRole, NamingRule) {
  auto role = [](std::string name, DType dtype, Shape shape = {4, 8}) {
    return quant_role(TensorSpec{std::move(name), dtype, std::move(shape)});
  };
  const std::string expert = "model.layers.1.mlp.experts.3.gate_proj.";
  // NVFP4 (ModelOpt): packed weight, E4M3 block scales, F32 global and input scales.
  EXPECT_EQ(role(expert + "weight", DType::U8),
            (QuantRole{CodeFormat::E2M1x2, QuantPart::Weight, QuantMethod::Nvfp4}));
  EXPECT_EQ(role(expert + "weight_scale", DType::F8_E4M3),
            (QuantRole{CodeFormat::E4M3, QuantPart::BlockScale, QuantMethod::Nvfp4}));
  EXPECT_EQ(role(expert + "weight_scale_2", DType::F32, {}),
            (QuantRole{CodeFormat::Ieee, QuantPart::GlobalScale, QuantMethod::Nvfp4}));
  EXPECT_EQ(role(expert + "input_scale", DType::F32, {}),
            (QuantRole{CodeFormat::Ieee, QuantPart::InputScale, QuantMethod::None}));
  // FP8 per channel (compressed-tensors).
  EXPECT_EQ(role("model.layers.0.self_attn.q_proj.weight", DType::F8_E4M3),
            (QuantRole{CodeFormat::E4M3, QuantPart::Weight, QuantMethod::Fp8}));
  EXPECT_EQ(role("model.layers.0.self_attn.q_proj.weight_scale", DType::F32, {4, 1}),
            (QuantRole{CodeFormat::Ieee, QuantPart::ChannelScale, QuantMethod::Fp8}));
  EXPECT_EQ(role("model.layers.0.self_attn.q_proj.weight_scale_inv", DType::F32, {1, 1}),
            (QuantRole{CodeFormat::Ieee, QuantPart::BlockScale, QuantMethod::Fp8}));
  // MXFP4 (gpt-oss): U8 blocks and U8 E8M0 scales; F8_E8M0 scales too.
  EXPECT_EQ(role("model.layers.0.mlp.experts.gate_up_proj_blocks", DType::U8, {2, 4, 3, 16}),
            (QuantRole{CodeFormat::E2M1x2, QuantPart::Weight, QuantMethod::Mxfp4}));
  EXPECT_EQ(role("model.layers.0.mlp.experts.down_proj_scales", DType::U8, {2, 4, 3}),
            (QuantRole{CodeFormat::E8M0, QuantPart::BlockScale, QuantMethod::Mxfp4}));
  EXPECT_EQ(role("model.layers.0.mlp.experts.down_proj_scales", DType::F8_E8M0, {2, 4, 3}),
            (QuantRole{CodeFormat::E8M0, QuantPart::BlockScale, QuantMethod::Mxfp4}));
  // Unquantized and opaque tensors.
  EXPECT_EQ(role("model.layers.0.mlp.experts.gate_up_proj_bias", DType::BF16),
            (QuantRole{CodeFormat::Ieee, QuantPart::Plain, QuantMethod::None}));
  EXPECT_EQ(role("model.norm.weight", DType::F32, {8}),
            (QuantRole{CodeFormat::Ieee, QuantPart::Plain, QuantMethod::None}));
  EXPECT_EQ(role("kv_cache.k_scale", DType::F8_E4M3, {}),
            (QuantRole{CodeFormat::E4M3, QuantPart::Plain, QuantMethod::None}));
  EXPECT_EQ(role("x.e5", DType::F8_E5M2), (QuantRole{CodeFormat::E5M2, QuantPart::Plain, QuantMethod::None}));
  EXPECT_EQ(role("token_type_ids", DType::U8), QuantRole{});
  EXPECT_EQ(role("model.layers.0.mlp.gate.weight_bias", DType::U8), QuantRole{});
  EXPECT_EQ(role("position_ids", DType::I64), QuantRole{});
  EXPECT_EQ(role(expert + "input_scale", DType::I32, {}), QuantRole{});
  // Element counts in the code format: two E2M1 codes per byte.
  const TensorSpec packed{expert + "weight", DType::U8, {4, 8}};
  EXPECT_EQ(code_count(packed, quant_role(packed)), 64u);
  const TensorSpec scales{"a_scales", DType::U8, {4, 8}};
  EXPECT_EQ(code_count(scales, quant_role(scales)), 32u);
  EXPECT_EQ(code_format_name(CodeFormat::E2M1x2), "E2M1x2");
  EXPECT_EQ(code_format_name(CodeFormat::Ieee), "IEEE");
}

TEST(QuantCodeStep, EveryCodeMovesOneStepToAValidCode) {
  for (uint32_t c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    SCOPED_TRACE(c);
    // E4M3: same sign and exponent, magnitude code +-1, never NaN; 0x7E / 0xFE step toward zero.
    const uint8_t e4 = e4m3_step(code);
    EXPECT_FALSE(e4m3_is_nan(e4));
    EXPECT_EQ(e4 & 0x80, code & 0x80);
    if (!e4m3_is_nan(code)) {
      EXPECT_EQ(std::abs((e4 & 0x7F) - (code & 0x7F)), 1);
      EXPECT_EQ(e4 >> 3, code >> 3);  // the exponent never changes: one ulp of the binade
      if ((code & 0x7F) != 0x7E) {
        EXPECT_EQ(e4m3_step(e4), code);
      }
    }
    // E8M0: exponent +-1, never 0xFF.
    const uint8_t e8 = e8m0_step(code);
    EXPECT_NE(e8, 0xFF);
    EXPECT_EQ(std::abs(e8 - code), 1);
    if (code < 0xFE) {
      EXPECT_EQ(e8m0_step(e8), code);
    }
  }
  EXPECT_EQ(e4m3_step(0x7E), 0x7D);
  EXPECT_EQ(e4m3_step(0xFE), 0xFD);
  EXPECT_EQ(e4m3_step(0x7F), 0x7E);
  EXPECT_EQ(e4m3_step(0x00), 0x01);
  EXPECT_EQ(e4m3_step(0x38), 0x39);  // 1.0 -> 1.125
  EXPECT_EQ(e8m0_step(0xFE), 0xFD);
  EXPECT_EQ(e8m0_step(0x00), 0x01);
  EXPECT_EQ(e8m0_step(127), 126);
  // E2M1: sign kept, magnitude index +-1 within 0..7.
  for (uint8_t nibble = 0; nibble < 16; ++nibble) {
    const uint8_t s = e2m1_step(nibble);
    EXPECT_EQ(s & 0x8, nibble & 0x8);
    EXPECT_EQ(std::abs((s & 7) - (nibble & 7)), 1);
    EXPECT_EQ(e2m1_step(s), nibble);
  }
  EXPECT_EQ(e2m1_to_float(e2m1_step(0x7)), 4.0f);   // 6 -> 4
  EXPECT_EQ(e2m1_to_float(e2m1_step(0x8)), -0.5f);  // -0 -> -0.5
}

}  // namespace
}  // namespace wsb
