#pragma once
// Device-staged delta commit (cpu mode, commit strategy "device-delta"): while prepare writes the target version
// into the rank image (the fold's placements, the transforms), every write is compared with the bytes it replaces,
// which are the live ones (delta_recorder.hpp), so the changed 32-bit words of every runtime storage are known
// without a second image. Before the pause they are uploaded, as one pack per staging area, where the storages
// live; the pause applies them in place (a scatter kernel on CUDA) and copies only the remaining storages in full.
//
// Encoding (chosen by measurement against a changed-chunk bitmap, docs/validation/2026-12-01-device-delta-commit):
// the changed 32-bit words, each as (u32 word index, u32 new value), 8 bytes per changed word. At the default
// densities (1% of BF16 values, 0.3-0.6% of FP8/FP4 codes, every value an independent draw) about 2% of words
// change; a bitmap of 64-byte chunks would stage ~25% of the bytes instead. A storage whose entries would reach
// kDenseLimit of its bytes is copied in full.
//
// Layout of one pack (identical on the host and where it is staged, little-endian):
//   u64 segment_count S, u64 slot_count T,
//   T x u64 entry slots: word index in the low 32 bits, new value in the high 32 bits,
//   S x {u64 storage address, u64 first slot, u64 entries, u64 storage bytes}.
// A segment is a run of entries of one storage, ascending, at most kSegmentEntries long (the scatter kernel gives
// each segment one thread block, so a segment's size bounds the work of one block). Slots no segment refers to are
// ignored (the zeroed tail of a recording block, entries of a storage left out). Entries are written where they are
// recorded, so the table comes last, once every segment is known.
// Its digest64 (core/digest64.hpp), computed on the host while packing and again where it is staged, proves the
// upload intact before the pause; commit re-checks it before the gate closes.
#include <cstdint>
#include <span>

namespace wsb {

/// A storage is staged only while its entries stay below this fraction of its bytes; denser ones are copied in full.
inline constexpr double kDenseLimit = 0.5;
/// Most entries in one segment of a pack.
inline constexpr uint64_t kSegmentEntries = 4096;
inline constexpr uint64_t kPackHeaderBytes = 16;
inline constexpr uint64_t kPackSegmentBytes = 32;

/// One entry slot: `word` (index of the 32-bit word in its storage) and its new `value`.
constexpr uint64_t pack_entry(uint32_t word, uint32_t value) { return word | (static_cast<uint64_t>(value) << 32); }

/// Bytes of a pack of `segments` segments and `slots` entry slots.
constexpr uint64_t pack_bytes(uint64_t segments, uint64_t slots) {
  return kPackHeaderBytes + 8 * slots + kPackSegmentBytes * segments;
}

/// Segment count and entry slot count of a pack, validated against its size: Error(Mismatch) "staged delta pack of
/// N bytes: ..." when shorter than its header or when the counts do not fill it exactly.
struct PackCounts {
  uint64_t segments = 0;
  uint64_t slots = 0;
};
PackCounts pack_counts(std::span<const uint8_t> pack);

/// Applies a pack in place to host storages (the CPU backend's apply; the CUDA kernel does the same on the
/// device): for every segment entry, *(u32*)(address + 4 * word) = value. Throws Error(Mismatch) naming the pack
/// and the segment when it is malformed (counts that do not fill it, a segment's slots beyond the pack or longer
/// than kSegmentEntries, a word index beyond its storage); every check runs before the first write.
void apply_pack_on_host(std::span<const uint8_t> pack);

}  // namespace wsb
