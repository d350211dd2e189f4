#pragma once
// Applying an xor payload by streaming: the zstd output is xored into the tensor chunk by chunk, so no
// tensor-sized mask is allocated or zero-filled (the xor format: one zstd frame of a mask as long as the tensor).
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace wsb {

/// out[i] ^= mask[i] for i < n (bytes), a 64-bit word at a time: the xor of every streamed apply.
void xor_into(uint8_t* out, const uint8_t* mask, size_t n);

/// data ^= decompress(payload), with the framing rules of decode_delta (exactly one frame, declared content size
/// == data.size(), nothing after the frame). On any error `data` is restored before Error(Format) naming the
/// tensor is thrown. Applying the same payload twice restores the original bytes.
void apply_xor_payload(std::span<const uint8_t> payload, std::span<uint8_t> data, const std::string& tensor);

/// Called with the end offset (bytes) of data that has been xored so far, in increasing order, after each chunk:
/// lets a caller hash or scan the result while it is still in cache. Reaches data.size() when the apply succeeds.
using XorProgress = std::function<void(size_t xored_upto)>;

/// apply_xor_payload, calling `progress` after every chunk (not during the restore that follows an error).
void apply_xor_payload(std::span<const uint8_t> payload, std::span<uint8_t> data, const std::string& tensor,
                       const XorProgress& progress);

}  // namespace wsb
