#include "models/quant/codecs.hpp"

#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {
namespace {

/// |value| / 2^ulp_exponent rounded to nearest, ties to even, for a finite non-negative float: exact integer
/// arithmetic on the float's significand, so no floating-point rounding mode is involved.
uint32_t round_to_ulp(float magnitude, int ulp_exponent) {
  const uint32_t bits = std::bit_cast<uint32_t>(magnitude);
  const uint32_t biased = bits >> 23;
  uint64_t significand = bits & 0x7FFFFFu;
  int exponent = -149;  // value = significand * 2^exponent
  if (biased != 0) {
    significand |= 0x800000u;
    exponent = static_cast<int>(biased) - 150;
  }
  if (exponent >= ulp_exponent) return static_cast<uint32_t>(significand << (exponent - ulp_exponent));
  const int shift = ulp_exponent - exponent;
  if (shift > 40) return 0;  // significand < 2^24, so the value is below a quarter ulp
  const uint64_t kept = significand >> shift;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  return static_cast<uint32_t>(kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0));
}

/// floor(log2(magnitude)) of a finite positive float.
int floor_log2(float magnitude) {
  const uint32_t bits = std::bit_cast<uint32_t>(magnitude);
  const uint32_t biased = bits >> 23;
  if (biased != 0) return static_cast<int>(biased) - 127;
  return -149 + (31 - std::countl_zero(bits & 0x7FFFFFu));  // float32 subnormal
}

std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> table{};
  for (uint32_t code = 0; code < 256; ++code) {
    const uint32_t sign = (code & 0x80) << 24;
    const uint32_t exponent = (code >> 3) & 0xF;
    const uint32_t mantissa = code & 0x7;
    float magnitude = 0;
    if (e4m3_is_nan(static_cast<uint8_t>(code))) {
      table[code] = std::bit_cast<float>(sign | 0x7FF00000u);  // torch's NaN pattern (dtype_tables.json)
      continue;
    }
    if (exponent == 0) {
      magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 * 2^(1 - 7)
    } else {
      magnitude = std::ldexp(static_cast<float>(8 + mantissa), static_cast<int>(exponent) - 7 - 3);
    }
    table[code] = std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return table;
}

std::array<float, 256> make_e8m0_table() {
  std::array<float, 256> table{};
  for (uint32_t code = 0; code < 255; ++code) table[code] = std::ldexp(1.0f, static_cast<int>(code) - 127);
  table[kE8M0Nan] = std::bit_cast<float>(0x7FC00001u);  // torch's NaN pattern (dtype_tables.json)
  return table;
}

}  // namespace

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = make_e4m3_table();
  return table;
}

uint8_t float_to_e4m3(float value) {
  const uint32_t all = std::bit_cast<uint32_t>(value);
  const uint8_t sign = static_cast<uint8_t>((all >> 24) & 0x80);
  const uint32_t bits = all & 0x7FFFFFFFu;
  // 464 = 0x43E80000; NaN and infinity have larger magnitude bits, so they take this branch too.
  if (bits > 0x43E80000u) return sign | 0x7F;
  // Below the smallest normal E4M3 (2^-6 = 0x3C800000) the step is the subnormal 2^-9 (rare for weights, so the
  // exact integer path costs nothing); 8 * 2^-9 rounds up into code 0x08 = 2^-6 by itself.
  if (bits < 0x3C800000u) return static_cast<uint8_t>(sign | round_to_ulp(std::bit_cast<float>(bits), -9));
  // Normal: rebias the exponent (127 -> 7) and round the 23-bit mantissa to 3 bits at bit 20, ties to even; a
  // carry out of the mantissa correctly bumps the exponent. 464 has exactly half an ulp above 448 and an even
  // kept mantissa, so it stays at 0x7E as torch rounds it.
  const uint32_t odd = (bits >> 20) & 1u;
  const uint32_t rounded = bits - (120u << 23) + 0x7FFFFu + odd;
  return static_cast<uint8_t>(sign | (rounded >> 20));
}

float e2m1_to_float(uint8_t nibble) {
  static constexpr std::array<float, 8> kMagnitudes{0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float magnitude = kMagnitudes[nibble & 0x7];
  return (nibble & 0x8) ? -magnitude : magnitude;
}

uint8_t float_to_e2m1(float value) {
  if (std::isnan(value)) throw Error(ErrorKind::Format, "float_to_e2m1: NaN has no E2M1 code");
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint8_t sign = static_cast<uint8_t>((bits >> 28) & 0x8);
  const float magnitude = std::fabs(value);
  if (magnitude >= kE2M1Max) return sign | 0x7;
  if (magnitude == 0.0f) return sign;
  const int exponent = floor_log2(magnitude);
  if (exponent < 0) return static_cast<uint8_t>(sign | round_to_ulp(magnitude, -1));  // subnormal step 0.5
  const uint32_t q = round_to_ulp(magnitude, exponent - 1);                            // 2..4
  const uint32_t code = (static_cast<uint32_t>(exponent + 1) << 1) + q - 2;
  return static_cast<uint8_t>(sign | (code > 7 ? 7 : code));
}

const std::array<float, 256>& e8m0_table() {
  static const std::array<float, 256> table = make_e8m0_table();
  return table;
}

uint8_t float_to_e8m0(float value) {
  // torch (c10 fp8e8m0fnu_from_fp32_value) works on the raw float32 bits: keep the exponent field, round up
  // when the guard bit (mantissa bit 22) is set and either a lower bit is set or the implied bit is 1.
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  uint32_t exponent = (bits >> 23) & 0xFF;
  if (exponent == 0xFF) return kE8M0Nan;
  const bool guard = (bits & 0x400000u) != 0;
  const bool lower = (bits & 0x3FFFFFu) != 0;
  const bool implied = exponent != 0;
  if (guard && (lower || implied)) ++exponent;  // 254 + 1 = 0xFF: too large, NaN as in torch
  return static_cast<uint8_t>(exponent);
}

}  // namespace wsb
