#pragma once
// digest64: a 64-bit content digest computed identically on the host and on a CUDA device, so a device can prove
// that its live bytes (or a staged upload) equal host bytes without copying them back. Not a publication checksum
// (those are xxh3-128): it guards against stale or corrupted device memory, not against an adversary.
//
// Definition: the bytes are read as little-endian 64-bit words w_i (the last word zero-padded); the digest is
// fin(sum_i mix(w_i, i) mod 2^64, byte length), with mix = the splitmix64 finalizer of w_i xor (i + 1) * golden
// ratio. A sum is order-free and exact in integers, so a parallel reduction on any grid gives the same value.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/digest64_terms.hpp"

namespace wsb {

/// Term sum of `bytes` whose first byte is word `first_word` of the whole (bytes.size() must be a multiple of 8
/// unless this piece ends the whole). Lets callers digest a buffer in pieces and on several threads.
uint64_t digest64_sum(std::span<const uint8_t> bytes, uint64_t first_word = 0);

/// digest64 of `bytes`.
inline uint64_t digest64(std::span<const uint8_t> bytes) { return digest64_close(digest64_sum(bytes), bytes.size()); }

}  // namespace wsb
