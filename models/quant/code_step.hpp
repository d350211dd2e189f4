#pragma once
// One stored-code step that always lands on a valid code (docs/design.md, "Synthetic publisher": E4M3 mantissa, E2M1
// magnitude, E8M0 exponent never 0xFF). The synthetic publisher moves a selected value with these; applying a step
// twice returns to the start except at the top codes, so repeated versions never drift far from v0.
#include <cstdint>

namespace wsb {

/// E4M3: flips the lowest mantissa bit (value moves by one ulp of its binade, exponent and sign kept). The top
/// finite magnitude 0x7E / 0xFE would flip into NaN (0x7F / 0xFF), so it steps toward zero instead (0x7D / 0xFD).
/// A NaN input lands on the top finite code. Never returns a NaN code.
constexpr uint8_t e4m3_step(uint8_t code) {
  return static_cast<uint8_t>((code & 0x7F) == 0x7E ? code - 1 : code ^ 1);
}

/// E2M1 (low 4 bits of `nibble`): flips the lowest magnitude bit (0 <-> 0.5, 1 <-> 1.5, 2 <-> 3, 4 <-> 6), sign
/// kept. Every E2M1 code is valid.
constexpr uint8_t e2m1_step(uint8_t nibble) { return static_cast<uint8_t>((nibble ^ 1) & 0xF); }

/// E8M0: moves the exponent by one (flips its lowest bit); the largest scale 0xFE steps down to 0xFD instead of
/// reaching the NaN code 0xFF (and 0xFF itself lands on 0xFE). Never returns 0xFF.
constexpr uint8_t e8m0_step(uint8_t code) { return static_cast<uint8_t>(code >= 0xFE ? 0xFD + (code & 1) : code ^ 1); }

}  // namespace wsb
