#pragma once
// Device-staged delta commit (cpu mode, commit strategy "device-delta"): during prepare, each runtime storage's
// new rank image is compared with the live one in runtime space, 32-bit word by word; the changed words of the
// sparse storages are uploaded, before the pause, into a bounded staging area where the storages live; the pause
// applies them in place (a scatter kernel on CUDA) and copies the remaining storages in full from the rank image.
//
// Encoding (chosen by measurement against a changed-chunk bitmap, docs/validation/2026-12-01-device-delta-commit): per storage,
// the ascending indices of its changed 32-bit words (u32) and their new values (u32), 8 bytes per changed word.
// At the default densities (1% of BF16 values, 0.3-0.6% of FP8/FP4 codes, every value an independent draw) about
// 2% of words change; a bitmap of 64-byte chunks would stage ~25% of the bytes instead. A storage whose words
// changed so densely that its encoding is not below kDenseLimit of its bytes is copied in full.
//
// Staged layout of one area (a "pack", identical on the host and in device memory, little-endian):
//   u64 segment_count S, u64 entry_count T,
//   S x {u64 storage address (where it lives), u64 first entry, u64 entries, u64 storage bytes},
//   T x u32 word index, T x u32 value (segments in order, each segment's entries ascending).
// Its digest64 (core/digest64.hpp), computed on the host while packing and again where it is staged,
// proves the upload intact before the pause; commit re-checks it before the gate closes.
#include <cstdint>
#include <span>
#include <vector>

namespace wsb {

/// Changed words of one storage of one TP rank.
struct StorageDelta {
  int rank = 0;
  size_t index = 0;              ///< storage index in RankLayout::storages
  uint64_t storage_bytes = 0;    ///< bytes of the storage
  std::vector<uint32_t> positions;  ///< changed 32-bit word indices, ascending
  std::vector<uint32_t> values;     ///< their new values
  /// Bytes this storage adds to a pack (entries and its segment record).
  uint64_t staged_bytes() const { return 8 * positions.size() + 32; }
};

/// A storage is staged only when its encoding is below this fraction of its bytes; denser ones are copied in full.
inline constexpr double kDenseLimit = 0.5;

/// Compares `live` with `next` (equal sizes, a multiple of 4 bytes, below 16 GiB so word indices fit in u32) and
/// records every differing word in `out` while fewer than `max_entries` differ (after that it only counts: the
/// storage will be copied in full, `out.positions` is cleared). Returns digest64(live) (computed in the same pass,
/// to compare with the live storage's own digest). `changed` receives the number of differing words.
uint64_t diff_storage(std::span<const uint8_t> live, std::span<const uint8_t> next, uint64_t max_entries,
                      StorageDelta& out, uint64_t* changed);

/// Bytes pack_deltas writes for `deltas`.
uint64_t pack_bytes(std::span<const StorageDelta* const> deltas);

/// Writes the pack of `deltas` into `out` (pack_bytes() bytes), `addresses[i]` being where storage i lives.
/// Returns digest64 of the pack.
uint64_t pack_deltas(std::span<const StorageDelta* const> deltas, std::span<const uint64_t> addresses,
                     std::span<uint8_t> out);

/// Applies a pack in place to host storages (the CPU backend's apply; the CUDA kernel does the same on the
/// device): for every segment, *(u32*)(address + 4 * index) = value. Throws Error(Mismatch) when the pack is
/// malformed (counts beyond the pack, a word index beyond its storage).
void apply_pack_on_host(std::span<const uint8_t> pack);

}  // namespace wsb
