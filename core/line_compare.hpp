#pragma once
// Finding the 64-byte lines where two buffers differ, fast enough that comparing a rank image with the bytes about
// to replace it costs little more than reading both: most lines of a sparse update do not change.
#include <cstddef>
#include <cstdint>

namespace wsb {

/// Index of the first of the 64-byte lines [0, lines) at which `a` and `b` differ (line i: bytes [64 i, 64 i + 64)
/// of each), or `lines` when they are equal. No alignment needed. Uses AVX-512 where the CPU has it (several lines
/// per step), eight 64-bit words per line otherwise; both give the same answer.
size_t first_differing_line(const uint8_t* a, const uint8_t* b, size_t lines);

/// The same with eight 64-bit words per line whatever the CPU (what first_differing_line falls back to).
size_t first_differing_line_words(const uint8_t* a, const uint8_t* b, size_t lines);

}  // namespace wsb
