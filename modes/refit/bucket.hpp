#pragma once
// Wire vocabulary of the refit mode (docs/design.md "refit"): one transport bucket is a fixed-capacity byte buffer
// (bucket_size_bytes, agreed by sender and receiver at setup) holding whole weights back to back, each described by
// an entry (name, dtype, shape, byte offset, byte count). Buckets may mix dtypes.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/tensor_spec.hpp"

namespace wsb::refit {

/// Byte alignment of every entry's offset inside a bucket (64 B, as rank-image segments), so an apply step may read
/// any dtype in place.
inline constexpr uint64_t kEntryAlignment = 64;

/// One weight inside a bucket: its spec and where its bytes lie, [offset, offset + bytes) of the bucket, in bytes.
struct WireEntry {
  TensorSpec spec;
  uint64_t offset = 0;  ///< bytes from the bucket start, a multiple of kEntryAlignment
  uint64_t bytes = 0;   ///< spec.bytes()
  bool operator==(const WireEntry&) const = default;
};

/// A packed bucket as the sender hands it to a transport: entries in stream order and the payload bytes
/// (payload.size() <= bucket_size_bytes; the tail after the last entry is not sent).
struct Bucket {
  std::vector<WireEntry> entries;
  std::vector<uint8_t> payload;
};

/// What a receiver got for one transport batch: the entries, and how many payload bytes were written into the
/// receive buffer it supplied. `end` is true (and entries empty) when the sender finished its stream.
struct ReceivedBatch {
  bool end = false;
  std::vector<WireEntry> entries;
  uint64_t payload_bytes = 0;
};

}  // namespace wsb::refit
