#pragma once
// Delta payload encodings of the publication format (docs/design.md, compatible with the Stitch/SGLang-fork layout):
//  xor:       zstd( mask ), mask length == tensor byte length, target = base ^ mask
//  overwrite: zstd( u32 count | count x u32 byte position (strictly increasing, < size) | count x u8 value ),
//             little-endian, nothing after the values.
// "zstd(...)" is framed as the manifest's compression_format says (PayloadFraming): "zstd", exactly one frame, or
// "zstd-frames", one or more consecutive frames (each declaring its content size) whose contents concatenate to
// the mask / body. Several frames let a reader decode one large tensor on several threads; a reader of "zstd"
// only (the Stitch/SGLang fork reads the first frame of a payload) refuses the unknown compression_format before
// it mutates anything, instead of failing a checksum after.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/scratch_bytes.hpp"

namespace wsb {

enum class DeltaEncoding { Xor, Overwrite };

/// How a payload's zstd data is framed (the manifest's compression_format).
enum class PayloadFraming { OneFrame, Frames };
inline constexpr std::string_view kZstdOneFrame = "zstd";
inline constexpr std::string_view kZstdFrames = "zstd-frames";
/// "zstd" | "zstd-frames".
std::string_view compression_format_name(PayloadFraming framing);
/// PayloadFraming of a compression_format name; nullopt for any other.
std::optional<PayloadFraming> parse_compression_format(std::string_view name);

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

/// Content bytes per frame of an overwrite body split into frames (PayloadFraming::Frames): the body of a large
/// tensor (about 5 bytes per changed byte) is then decoded on several threads, as the frames of an xor mask are.
inline constexpr uint64_t kOverwriteFrameBytes = uint64_t{4} << 20;

/// Encodes base -> target (equal sizes) as a compressed payload. `frame_bytes` > 0 (PayloadFraming::Frames) splits
/// an xor mask into frames of that many mask bytes (the last one shorter), and an overwrite body longer than
/// kOverwriteFrameBytes into frames of kOverwriteFrameBytes body bytes; 0 writes one frame.
std::vector<uint8_t> encode_delta(DeltaEncoding encoding, std::span<const uint8_t> base,
                                  std::span<const uint8_t> target, int zstd_level, uint64_t frame_bytes = 0);

/// Decompresses and validates a payload against the tensor size. Throws Error(Format) naming `tensor` and the
/// reason: mask length != size, count larger than the payload, positions unsorted / duplicated / out of range,
/// trailing bytes, decompressed size beyond the bound (overwrite: 4 + 5 * tensor_bytes), a zstd window beyond
/// 128 MiB (zstd_declared_size).
/// (The prepare path applies xor payloads with apply_xor_payload, which streams; this materializes the mask.)
DecodedDelta decode_delta(DeltaEncoding encoding, std::span<const uint8_t> payload, uint64_t tensor_bytes,
                          const std::string& tensor);
/// decode_delta of a payload framed as `framing`. Frames: the frames are walked first (zstd_frame_extents: each
/// complete, declaring its size, the sizes adding up to the mask / at most the body bound), then decoded one by
/// one; errors name the frame ("xor mask of tensor 'T', frame 2 at byte 4180: ...").
DecodedDelta decode_delta(DeltaEncoding encoding, PayloadFraming framing, std::span<const uint8_t> payload,
                          uint64_t tensor_bytes, const std::string& tensor);

/// A decoded, validated overwrite payload kept as its body (u32le count, count u32le positions, count values) in
/// reusable scratch: no per-decode allocation once warm, and no copy of the positions into a vector.
class OverwriteBody {
 public:
  /// Decompresses `payload` (framed as `framing`) for a tensor of `tensor_bytes` bytes and validates it: the
  /// rules and error texts of decode_delta(Overwrite) (bound 4 + 5 * tensor_bytes, count against the size, no
  /// trailing bytes, positions strictly increasing and < tensor_bytes). Throws Error(Format) naming `tensor`;
  /// the body is then empty.
  void decode(std::span<const uint8_t> payload, PayloadFraming framing, uint64_t tensor_bytes,
              const std::string& tensor);
  /// Number of positions.
  uint64_t count() const { return count_; }
  /// Position i (< count()).
  uint32_t position(uint64_t i) const;
  /// The count() values, writable: the fold swaps the bytes it replaces into them (its undo data).
  uint8_t* values() { return buffer_.data() + 4 + 4 * count_; }
  /// Index of the first position >= `byte` (count() when none).
  uint64_t lower_bound(uint64_t byte) const;
  /// Bytes of scratch held (capacity, kept for the next decode).
  size_t held_bytes() const { return buffer_.capacity(); }

 private:
  ScratchBytes buffer_;
  uint64_t count_ = 0;
};

/// Applies `delta` to `data` in place and turns `delta` into its own inverse (xor: unchanged; overwrite: the
/// previous bytes are swapped into `values`), so applying it a second time restores the original bytes.
void apply_delta_swap(DecodedDelta& delta, std::span<uint8_t> data);

}  // namespace wsb
