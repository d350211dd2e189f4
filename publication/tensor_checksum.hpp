#pragma once
// A tensor's checksum under a publication's `checksum_format` (docs/design.md "Publication format"):
//  "xxh3-128"        one XXH3-128 of the tensor's canonical bytes, 32 lowercase hex characters (the Stitch/SGLang-fork
//                    layout): a serial hash, so one thread verifies a whole tensor, however large;
//  "xxh3-128-ranges" one XXH3-128 per range of `checksum_range_bytes` bytes (the last range shorter; a tensor of at
//                    most one range, empty included, has exactly one), their hex concatenated in order: each range
//                    is verified on its own, so a large tensor is verified on as many threads as it is folded on.
// Every byte is covered by a 128-bit digest either way, so both are exactly as strict.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/checksum.hpp"

namespace wsb {

inline constexpr std::string_view kChecksumXxh3 = "xxh3-128";
inline constexpr std::string_view kChecksumXxh3Ranges = "xxh3-128-ranges";
/// Hex characters of one XXH3-128 digest.
inline constexpr size_t kXxh3HexChars = 32;

/// Ranges a tensor of `size` bytes has: 1 when `range_bytes` is 0 (one digest of the whole tensor) or size <=
/// range_bytes, else ceil(size / range_bytes).
size_t checksum_range_count(uint64_t size, uint64_t range_bytes);

/// "" when `range_bytes` is a valid checksum_range_bytes (0: "xxh3-128"; else a multiple of 1 MiB, so range
/// boundaries fall on the fold's chunk and segment boundaries), else why not.
std::string checksum_range_bytes_problem(uint64_t range_bytes);

/// True for one or more whole XXH3-128 digests in lowercase hex (32 characters each), the text a checksum map entry
/// holds under "xxh3-128-ranges" (exactly one under "xxh3-128": is_xxh3_128_hex).
bool is_xxh3_128_ranges_hex(std::string_view text);

/// Builds a tensor's checksum text from its bytes fed in order (publisher side): range_bytes 0 gives
/// xxh3_128_hex of everything fed, else one digest per range_bytes fed, concatenated.
class ChecksumBuilder {
 public:
  explicit ChecksumBuilder(uint64_t range_bytes) : range_bytes_(range_bytes) {}
  void update(std::span<const uint8_t> bytes);
  /// The text for the bytes fed so far (the last range may be partial); the builder can go on after.
  std::string text() const;

 private:
  uint64_t range_bytes_;
  uint64_t in_range_ = 0;  ///< bytes fed into the current range
  std::string done_;       ///< digests of the completed ranges
  Xxh3Hasher hasher_;
};

/// The checksum text of `bytes` under `range_bytes` (see ChecksumBuilder).
std::string tensor_checksum_text(std::span<const uint8_t> bytes, uint64_t range_bytes);

/// The expected checksum of one tensor of `size` bytes, split into its ranges.
class ExpectedChecksum {
 public:
  ExpectedChecksum() = default;
  /// `text` is the checksum map entry, `range_bytes` the publication's checksum_range_bytes (0: "xxh3-128").
  /// Throws Error(Format) "WHAT: checksum holds N hex characters, ..." when the number of digests is not
  /// checksum_range_count(size, range_bytes) (a checksum written for a tensor of another size); `what` names the
  /// tensor and where its checksum comes from.
  ExpectedChecksum(std::string text, uint64_t range_bytes, uint64_t size, std::string_view what);

  const std::string& text() const { return text_; }
  /// True under "xxh3-128-ranges" (even for a one-range tensor).
  bool ranged() const { return range_bytes_ != 0; }
  /// Bytes per range; 0 under "xxh3-128".
  uint64_t range_bytes() const { return range_bytes_; }
  uint64_t size() const { return size_; }
  size_t range_count() const { return count_; }
  /// [range_begin(k), range_end(k)): the bytes range k covers.
  uint64_t range_begin(size_t k) const;
  uint64_t range_end(size_t k) const;
  /// Range holding byte `offset` (< size), or range_count() for offset == size; 0 for an empty tensor (whose
  /// one range begins at 0).
  size_t range_at(uint64_t offset) const;
  std::string_view digest(size_t k) const { return std::string_view(text_).substr(k * kXxh3HexChars, kXxh3HexChars); }

 private:
  std::string text_;
  uint64_t range_bytes_ = 0;
  uint64_t size_ = 0;
  size_t count_ = 1;
};

/// The first range whose bytes do not have their expected digest.
struct ChecksumMismatch {
  size_t range = 0;
  uint64_t from = 0, to = 0;  ///< its bytes
  std::string actual;         ///< their XXH3-128 hex
};

/// Verifies the bytes of whole ranges fed in order from range_begin(first), one range at a time on a reused hash
/// state (`hasher`, reset here): the verifier of one segment of a fold, or of a whole tensor.
class RangeVerifier {
 public:
  /// Starts at range `first`. `expected` and `hasher` must outlive the verifier.
  RangeVerifier(const ExpectedChecksum& expected, Xxh3Hasher& hasher, size_t first = 0);
  /// Feeds the next bytes (a piece may span range boundaries); each completed range is compared at once. Never
  /// throws: the first mismatch is kept (mismatch()) and nothing after it is hashed.
  void update(std::span<const uint8_t> bytes);
  /// Offset in the tensor of the next byte expected.
  uint64_t position() const { return position_; }
  /// The first mismatch, or nullptr while every completed range matched.
  const ChecksumMismatch* mismatch() const { return failed_ ? &mismatch_ : nullptr; }
  /// The verdict once the bytes up to `end` (a range boundary: a segment's end, or the tensor's size) are fed:
  /// throws as throw_checksum_mismatch on a mismatch, or Error(State) "tensor 'T': checksum verified to byte P of
  /// E" when the bytes fed stopped short of `end` (a range that was never compared).
  void require_verified_to(uint64_t end, std::string_view tensor, std::string_view version) const;

 private:
  void close_range();

  const ExpectedChecksum& expected_;
  Xxh3Hasher& hasher_;
  size_t range_;
  uint64_t position_;
  bool failed_ = false;
  ChecksumMismatch mismatch_;
};

/// Error(Checksum) for a mismatch of `tensor` at `version` (its 6-digit string): "tensor 'T': xxh3-128 of version V
/// is X, publication says Y" under "xxh3-128"; under "xxh3-128-ranges" the range is named: "tensor 'T': xxh3-128
/// of version V bytes [A, B) (range K of N) is X, publication says Y" (K counted from 1).
[[noreturn]] void throw_checksum_mismatch(std::string_view tensor, std::string_view version,
                                          const ExpectedChecksum& expected, const ChecksumMismatch& mismatch);

}  // namespace wsb
