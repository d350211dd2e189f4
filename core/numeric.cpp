#include "core/numeric.hpp"

#include <bit>
#include <cmath>

namespace wsb {

float bf16_to_float(uint16_t code) { return std::bit_cast<float>(static_cast<uint32_t>(code) << 16); }

uint16_t float_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040);  // keep sign, force quiet NaN
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);                               // round to nearest even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_float(uint16_t code) {
  uint32_t sign = static_cast<uint32_t>(code & 0x8000) << 16;
  uint32_t exponent = (code >> 10) & 0x1F;
  uint32_t mantissa = code & 0x3FF;
  if (exponent == 0) {
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

}  // namespace wsb
