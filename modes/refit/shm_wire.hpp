#pragma once
// Slot-header encoding of the shared-memory transport (shm_transport.hpp): a bucket's WireEntry list serialized into
// a bounded byte area of the slot, so the receiving process can rebuild the entries without sharing any heap
// pointer. Per entry, little-endian host order (both ends run on one host): u32 name length, name bytes, u8 dtype,
// u32 rank of the shape, i64 per dimension, u64 offset, u64 bytes.
#include <cstdint>
#include <span>
#include <vector>

#include "modes/refit/bucket.hpp"

namespace wsb::refit {

/// Bytes `entry` takes in a slot header.
uint64_t encoded_entry_bytes(const WireEntry& entry);

/// Encodes `entries` into `out` (which the caller sized with encoded_entry_bytes); returns the bytes written.
uint64_t encode_entries(std::span<const WireEntry> entries, std::span<uint8_t> out);

/// Decodes `count` entries from `in`. Throws Error(Format, "refit: rank R: corrupt slot header: ...") when the
/// area ends early, a dtype is unknown or bytes are left over: a shared mapping is written by another process, so
/// nothing in it is trusted.
std::vector<WireEntry> decode_entries(int rank, std::span<const uint8_t> in, uint64_t count);

}  // namespace wsb::refit
