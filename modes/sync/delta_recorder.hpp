#pragma once
// Recording, while prepare writes the target version into the rank image, which runtime bytes change: every write
// goes through copy(), which compares each word with the one it replaces (the fold's placements from each final
// chunk; storages the loader transforms from the piece built in scratch). When recording starts the image holds exactly the live bytes, so "differs from the bytes it replaces" is "differs
// from the live storage": no second image is needed, and no change can be missed, whatever the transform (a
// swizzle that moves one canonical byte to several runtime bytes included): every byte of every storage is written
// once per prepare, and each write is compared.
//
// Out of a recording come, per storage, the digest64 term-sum change (so the digest of the live bytes is kept
// incrementally, never recomputed from a whole image) and the entries of the device-delta pack
// (staged_delta.hpp), written straight into one pinned host pack per staging area, allocated once and reused by
// every prepare: each thread fills blocks of it claimed with one atomic add, and digests each entry as it writes
// it, so the pack is complete and digested when the last write is.
//
// A storage turns dense once its changed 32-bit words pass kDenseLimit of its bytes (staged_delta.hpp), or at its
// first change when it can never be staged (not word-addressable, or its area's pack ran out of room): it will be
// copied in full, so from then on its writes are plain copies, no word is compared, and its digest is left to the
// caller, to take from its new bytes (DeviceDeltaCommit does so after the commit, off the update's critical path:
// digesting every word as it is written ran the dense copy at a third of a plain copy's speed).
//
// A 64-bit digest word or a 32-bit pack word that two writes share (a range that starts or ends inside it, each
// possibly on its own thread) is deferred: each write records its own bytes' xor, and finish() resolves the word
// once every write is done.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "modes/sync/host_buffer.hpp"

namespace wsb {

/// One runtime storage as the recorder sees it (flat index over TP ranks).
struct DeltaStorage {
  std::span<uint8_t> image;  ///< its bytes in the rank image, holding the live bytes when recording begins
  int group = -1;            ///< index of its staging area's pack; -1: never staged (its digest is still kept)
  uint64_t address = 0;      ///< where the storage lives (the pack's segment address)
};

/// What one recording found for one storage.
struct DeltaChanges {
  uint64_t digest_delta = 0;   ///< digest64 term sum of the new bytes minus that of the old ones (mod 2^64)
  /// 64-bit words whose bytes differ; of a dense storage, those found before it turned dense (at least one).
  uint64_t changed_words = 0;
  uint64_t entries = 0;        ///< pack entries recorded (changed 32-bit words)
  /// Bytes the recording's writes covered. Every byte of a storage is written once per prepare, so anything but
  /// the storage's size means a write bypassed the recorder: its changes and digest are unknown.
  uint64_t covered_bytes = 0;
  /// Its entries do not record every change (not word-addressable, past kDenseLimit, or its pack ran out of room):
  /// a changed storage that is incomplete must be copied in full.
  bool incomplete = false;
  /// A dense storage: its writes stopped comparing words part way, so digest_delta is partial and its digest must be
  /// taken from its new bytes (its entries are incomplete too).
  bool dense = false;
  bool changed() const { return changed_words > 0; }
  /// digest64 term sum of the storage's bytes after the recording, given `old_sum`, that of the bytes it began
  /// with. Only for a storage that is not dense.
  uint64_t new_sum(uint64_t old_sum) const { return old_sum + digest_delta; }
};

/// A finished pack (staged_delta.hpp layout) in the recorder's pinned host memory.
struct RecordedPack {
  std::span<const uint8_t> bytes;
  uint64_t digest = 0;  ///< digest64 of bytes
  uint64_t segments = 0;
  uint64_t slots = 0;
};

class DeltaRecorder {
 public:
  /// `budgets[g]`: bytes of the host pack of staging area g (header, entries and table), allocated here, pinned by
  /// `pinner` when given (the upload reads it directly). Throws what HostBuffer throws.
  DeltaRecorder(std::vector<uint64_t> budgets, const HostPinner* pinner);
  ~DeltaRecorder();
  DeltaRecorder(const DeltaRecorder&) = delete;
  DeltaRecorder& operator=(const DeltaRecorder&) = delete;

  /// Starts a recording over `storages`; drops the previous one. A storage that is not word-addressable (bytes not
  /// a multiple of 4, or word indices beyond u32) is never staged. Throws Error(Mismatch) for a group out of range.
  void begin(std::vector<DeltaStorage> storages);

  /// Writes `src` into storage `flat` at byte `offset` of its image, recording every byte that differs from the
  /// one it replaces (unchanged words are not written). Thread-safe for disjoint ranges. Throws Error(Mismatch) when
  /// the range exceeds the storage or `flat` is not one.
  void copy(size_t flat, uint64_t offset, std::span<const uint8_t> src);

  /// Ends the recording once every write is done: resolves the words two writes shared and returns one result per
  /// storage.
  std::vector<DeltaChanges> finish();
  /// The pack of group `g` holding the segments of the storages with include[flat] (after finish()); nullopt when
  /// the group ran out of room (the table does not fit, or a block could not be claimed).
  std::optional<RecordedPack> pack(int g, const std::vector<bool>& include);

  /// Host memory held (the packs), bytes.
  uint64_t held_bytes() const;

 private:
  struct Group;
  struct StorageState;
  struct ThreadState;
  class Writer;
  ThreadState& thread_state();
  /// Bytes [a, b) of dense storage `flat`: copied from `src`.
  void record_dense(size_t flat, uint64_t a, uint64_t b, const uint8_t* src);

  std::vector<std::unique_ptr<Group>> groups_;
  std::vector<DeltaStorage> storages_;
  std::unique_ptr<StorageState[]> states_;
  uint64_t generation_ = 0;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<ThreadState>> threads_;  ///< every state ever made (reused across recordings)
  std::vector<std::pair<std::thread::id, ThreadState*>> active_;  ///< this recording's, by thread
  size_t used_threads_ = 0;  ///< threads_[0, used_threads_) serve this recording
  std::unique_ptr<ThreadState> finisher_;
  bool finished_ = false;
};

}  // namespace wsb
