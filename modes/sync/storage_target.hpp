#pragma once
// The engine side of a commit: the live runtime storages of every TP rank. Modes only see this interface, so
// they stay below the engine in the dependency order (models <- modes <- engine).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/phase_log.hpp"
#include "models/layout/tp_layout.hpp"
#include "modes/sync/staged_delta.hpp"

namespace wsb {

/// One runtime storage of one TP rank: `index` into RankLayout::storages of `rank`.
struct StorageIndex {
  int rank = 0;
  size_t index = 0;
};

/// One staging area's pack (modes/sync/staged_delta.hpp layout) in host memory (pinned where the target uploads
/// from it), valid until stage_packs returns.
struct StagedPack {
  int group = 0;  ///< delta_staging_group of the ranks whose storages it patches
  std::span<const uint8_t> bytes;
  uint64_t digest = 0;  ///< digest64 of bytes
};

/// Live runtime storages (host memory on the CPU backend, device memory with CUDA). Storage `index` follows
/// RankLayout::storages of that rank.
class StorageTarget {
 public:
  virtual ~StorageTarget() = default;
  virtual int tp() const = 0;
  /// Starts copying `src` into storage `index` of `rank` at byte `offset`; `src` stays valid until synchronize().
  /// Throws Error(Mismatch) when the range exceeds the storage.
  virtual void write(int rank, size_t index, uint64_t offset, std::span<const uint8_t> src) = 0;
  /// Waits until every write issued so far has landed.
  virtual void synchronize() = 0;
  /// The physical floor a copy into these storages is judged against (host memcpy, or pinned H2D).
  virtual Floor copy_floor() const = 0;
  /// True when this target runs `spec`'s post-load transform itself, on the device, from the gathered bytes
  /// (docs/design.md: a method's device transform through bounded device staging). Default: none, the caller
  /// transforms on the host and write()s the result.
  virtual bool transforms_on_device(const RuntimeStorageSpec& /*spec*/) const { return false; }
  /// Writes storage `index` of `rank` from its gathered, untransformed bytes (spec.gathered_bytes()), running
  /// spec.transform on the device; returns once every byte of the storage is written (`gathered` may be reused).
  /// Only for specs where transforms_on_device() is true; otherwise throws Error(State).
  virtual void write_transformed(int rank, size_t index, const RuntimeStorageSpec& spec,
                                 std::span<const uint8_t> gathered);

  // Device-staged delta commit (modes/sync/staged_delta.hpp). A target without a staging area returns 0 from
  // delta_staging_bytes and the mode copies in full; the other calls then throw Error(State).

  /// Bytes of the staging area that serves `rank` (0: none). Ranks with equal delta_staging_group share one.
  virtual uint64_t delta_staging_bytes(int /*rank*/) const { return 0; }
  virtual int delta_staging_group(int rank) const { return rank; }
  /// Allocates every staging area (and loads what applies a pack) now instead of at the first stage_packs, so that
  /// an engine's first prepare.delta_upload times the upload alone. Default: nothing to allocate. Throws
  /// Error(Resource) when an area cannot be allocated.
  virtual void reserve_delta_staging() {}
  /// Where storage `index` of `rank` lives: the address a pack's segment names.
  virtual uint64_t delta_address(int rank, size_t index) const;
  /// digest64 of storage `index` of `rank`, computed where the storage lives (on the device: a kernel), after
  /// every issued write landed.
  virtual uint64_t live_digest(int rank, size_t index);
  /// live_digest of every listed storage, in order (a target with several devices works on all of them at once).
  virtual std::vector<uint64_t> live_digests(std::span<const StorageIndex> storages);
  /// Replaces whatever was staged with `packs` (at most one per staging group, each laid out as staged_delta.hpp
  /// says): uploads every pack, all areas at once, then checks each staged copy's digest64, computed where it is
  /// staged, against the pack's. Outside the pause. Throws Error(Resource) when a pack exceeds its area,
  /// Error(Mismatch) for a malformed pack, Error(Checksum) when a staged copy differs; nothing is staged then.
  virtual void stage_packs(std::span<const StagedPack> packs);
  /// Recomputes every staged pack's digest where it is staged; false when one differs from the upload's.
  virtual bool staged_deltas_intact();
  /// Applies every staged pack to the live storages (enqueued; synchronize() waits). The pause's part.
  virtual void apply_staged_deltas();
  /// Tests of the checks only: xors byte `offset` of the first staged pack with 0x01.
  virtual void corrupt_staged_delta(uint64_t offset);
};

}  // namespace wsb
