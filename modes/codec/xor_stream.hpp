#pragma once
// Applying an xor payload by streaming: the zstd output is xored into the tensor chunk by chunk, so no
// tensor-sized mask is allocated or zero-filled (the xor format: one zstd frame of a mask as long as the tensor).
#include <cstdint>
#include <span>
#include <string>

namespace wsb {

/// data ^= decompress(payload), with the framing rules of decode_delta (exactly one frame, declared content size
/// == data.size(), nothing after the frame). On any error `data` is restored before Error(Format) naming the
/// tensor is thrown. Applying the same payload twice restores the original bytes.
void apply_xor_payload(std::span<const uint8_t> payload, std::span<uint8_t> data, const std::string& tensor);

}  // namespace wsb
