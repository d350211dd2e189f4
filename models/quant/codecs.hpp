#pragma once
// Exact conversions between stored codes of the quantized formats and float32.
//
// Formats (OCP 8-bit Floating Point Specification (OFP8) rev 1.0 and OCP Microscaling Formats (MX) v1.0 spec,
// section 5; torch 2.11's c10 Float8_e4m3fn / Float8_e8m0fnu for the cast and NaN conventions, recorded in
// tests/fixtures/dtypes/dtype_tables.json):
// - E4M3 (safetensors F8_E4M3, torch float8_e4m3fn): sign, 4 exponent bits (bias 7), 3 mantissa bits; no
//   infinity; S.1111.111 (0x7F, 0xFF) is NaN, so the largest magnitude is S.1111.110 = 448.
// - E2M1 (MX FP4): sign, 2 exponent bits (bias 1), 1 mantissa bit; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; no
//   infinity or NaN. Two codes share one byte in checkpoints (low nibble = even element).
// - E8M0 (MX scale, safetensors F8_E8M0, torch float8_e8m0fnu): an unsigned biased exponent, value
//   2^(code - 127); 0xFF is NaN; code 0 is 2^-127.
// - BF16 lives in core/numeric.hpp (bf16_to_float / float_to_bf16).
#include <array>
#include <cstdint>

namespace wsb {

/// Largest finite E4M3 magnitude (code 0x7E).
inline constexpr float kE4M3Max = 448.0f;
/// Largest E2M1 magnitude (code 0x7).
inline constexpr float kE2M1Max = 6.0f;
/// E8M0 code of 1.0 (the exponent bias).
inline constexpr uint8_t kE8M0Bias = 127;
/// The only E8M0 NaN code.
inline constexpr uint8_t kE8M0Nan = 0xFF;

/// True for the two E4M3 NaN codes 0x7F and 0xFF.
constexpr bool e4m3_is_nan(uint8_t code) { return (code & 0x7F) == 0x7F; }

/// float32 value of every E4M3 code, indexed by code. NaN codes hold the bit pattern torch produces
/// (sign | 0x7FF00000), so a table entry equals torch's float8_e4m3fn -> float32 cast bit for bit.
const std::array<float, 256>& e4m3_table();
/// float32 value of E4M3 `code` (exact; see e4m3_table for NaN bits).
inline float e4m3_to_float(uint8_t code) { return e4m3_table()[code]; }
/// float32 -> E4M3 with round-to-nearest-even, non-saturating like torch's cast: |value| > 464 (halfway between
/// 448 and the first unrepresentable step 480), infinities and NaN give the NaN code with the input's sign
/// (0x7F / 0xFF); 464 itself ties to the even code 448. Values below half the smallest subnormal (2^-10) become
/// a signed zero.
uint8_t float_to_e4m3(float value);

/// float32 value of the E2M1 code in the low 4 bits of `nibble` (the high bits are ignored).
float e2m1_to_float(uint8_t nibble);
/// float32 -> E2M1 code (0..15) with round-to-nearest-even, saturating to +-6 (E2M1 has no infinity; the MX
/// spec leaves overflow to the implementation and kernels clamp). Throws Error(Format) for NaN, which has no
/// E2M1 code.
uint8_t float_to_e2m1(float value);
/// E2M1 code of element `index` in packed bytes (element 2k in the low nibble of byte k, 2k + 1 in the high).
inline uint8_t e2m1_packed_at(const uint8_t* packed, uint64_t index) {
  return static_cast<uint8_t>((packed[index / 2] >> ((index % 2) * 4)) & 0xF);
}

/// float32 value of E8M0 `code`, indexed by code: 2^(code - 127) exactly (code 0 is the float32 subnormal
/// 2^-127); code 0xFF is NaN with torch's bit pattern 0x7FC00001.
const std::array<float, 256>& e8m0_table();
inline float e8m0_to_float(uint8_t code) { return e8m0_table()[code]; }
/// float32 -> E8M0 as torch's cast does it: the sign is ignored; NaN and infinities give 0xFF; otherwise the
/// float32 exponent rounded to nearest on the linear scale (a mantissa of at least 1.5 rounds up, exactly 1.5
/// included), so 0 and tiny values give code 0 and magnitudes >= 1.5 * 2^127 give 0xFF (NaN).
uint8_t float_to_e8m0(float value);

}  // namespace wsb
