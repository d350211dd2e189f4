// BF16 conversions against torch 2.11's float32 -> bfloat16 cast results (tests/fixtures/dtypes/dtype_tables.json).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <nlohmann/json.hpp>

#include "checkpoint_test_util.hpp"
#include "core/numeric.hpp"

namespace wsb {
namespace {

nlohmann::json load_tables() {
  return nlohmann::json::parse(
      testutil::read_bytes(std::filesystem::path(WSBENCH_FIXTURES_DIR) / "dtypes" / "dtype_tables.json"));
}

TEST(DtypeTables, Float32ToBf16MatchesTorch) {
  const nlohmann::json tables = load_tables();
  // Inputs are float32 bit patterns; torch's outputs are the bf16 codes read as int16 (hence negatives).
  const auto in = tables.at("f32_to_bf16_in").get<std::vector<uint32_t>>();
  const auto out = tables.at("f32_to_bf16_out").get<std::vector<int16_t>>();
  ASSERT_EQ(in.size(), 6u);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(i);
    const uint16_t code = static_cast<uint16_t>(out[i]);
    EXPECT_EQ(float_to_bf16(std::bit_cast<float>(in[i])), code);
    // torch's bf16 -> float32 widening is exact: the code becomes the upper 16 bits.
    EXPECT_EQ(std::bit_cast<uint32_t>(bf16_to_float(code)), static_cast<uint32_t>(code) << 16);
  }
  // Spot values, so a reordered fixture cannot hide an error: 1.0 exact, 3.14159f rounds down,
  // 65504 (0x477FE000) rounds up to 65536, -0.0 keeps its sign.
  EXPECT_EQ(in[1], 0x40490FD0u);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x40490FD0u)), 0x4049);
  EXPECT_EQ(float_to_bf16(65504.0f), 0x4780);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
}

TEST(DtypeTables, Bf16RoundTripsEveryNonNanCode) {
  for (uint32_t code = 0; code <= 0xFFFF; ++code) {
    const float value = bf16_to_float(static_cast<uint16_t>(code));
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(value)))) << code;
      continue;
    }
    ASSERT_EQ(float_to_bf16(value), code);
  }
}

TEST(DtypeTables, Bf16RoundsHalfwayToEven) {
  // 1 + 2^-8 lies halfway between bf16 1.0 (0x3F80) and 1.0078125 (0x3F81): ties go to the even code.
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);
  // 1.0078125 + 2^-8 is halfway between 0x3F81 and 0x3F82: the even one is 0x3F82.
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3F808001u)), 0x3F81);
  // The largest float rounds to infinity, as in torch.
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7F7FFFFFu)), 0x7F80);
}

}  // namespace
}  // namespace wsb
