#pragma once
// Delta payload encodings of the publication format (docs/design.md, compatible with the Stitch/SGLang-fork layout):
//  xor:       zstd( mask ), mask length == tensor byte length, target = base ^ mask
//  overwrite: zstd( u32 count | count x u32 byte position (strictly increasing, < size) | count x u8 value ),
//             little-endian, nothing after the values.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace wsb {

enum class DeltaEncoding { Xor, Overwrite };

std::string_view delta_encoding_name(DeltaEncoding encoding);
/// "xor" | "overwrite"; nullopt otherwise.
std::optional<DeltaEncoding> parse_delta_encoding(std::string_view name);

/// A decoded, validated delta for one tensor of `tensor_bytes` bytes.
struct DecodedDelta {
  DeltaEncoding encoding = DeltaEncoding::Xor;
  uint64_t tensor_bytes = 0;
  std::vector<uint8_t> mask;        ///< xor: tensor_bytes long
  std::vector<uint32_t> positions;  ///< overwrite: strictly increasing, < tensor_bytes
  std::vector<uint8_t> values;      ///< overwrite: one per position
};

/// Encodes base -> target (equal sizes) as a compressed payload.
std::vector<uint8_t> encode_delta(DeltaEncoding encoding, std::span<const uint8_t> base,
                                  std::span<const uint8_t> target, int zstd_level);

/// Decompresses and validates a payload against the tensor size. Throws Error(Format) naming `tensor` and the
/// reason: mask length != size, count larger than the payload, positions unsorted / duplicated / out of range,
/// trailing bytes, decompressed size beyond the bound (overwrite: 4 + 5 * tensor_bytes), a zstd window beyond
/// 128 MiB (zstd_declared_size).
/// (The prepare path applies xor payloads with apply_xor_payload, which streams; this materializes the mask.)
DecodedDelta decode_delta(DeltaEncoding encoding, std::span<const uint8_t> payload, uint64_t tensor_bytes,
                          const std::string& tensor);

/// Applies `delta` to `data` in place and turns `delta` into its own inverse (xor: unchanged; overwrite: the
/// previous bytes are swapped into `values`), so applying it a second time restores the original bytes.
void apply_delta_swap(DecodedDelta& delta, std::span<uint8_t> data);

}  // namespace wsb
