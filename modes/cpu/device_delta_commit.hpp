#pragma once
// cpu mode, commit strategy "device-delta" (modes/sync/staged_delta.hpp): what the strategy adds to the cpu mode.
// The mode keeps one set of rank images, as with the full copy; prepare writes the target into them through a
// DeltaRecorder (delta_recorder.hpp), which finds every changed word as it is written, and this class turns the
// recording into packs, uploads them before the pause, and lets the commit copy only the storages no pack covers.
//
// Checks: every byte of every storage must have gone through the recorder once (else that storage is copied in
// full and its digest taken from the image); the live storages' device digests must equal the digests kept for
// the bytes the recording started from (computed on the devices while the fold runs); the packs' digests must
// survive the upload and still hold when the commit's preflight runs. Anything else (a failed or repeated prepare,
// a live check that fails, a pack that ran out of room) makes the commit copy those storages, or all of them, in
// full, which is always exact.
//
// Kept digests: digest64 is a sum of per-word terms, so the digest of the bytes a prepare built is the previous
// one plus, for each changed word, the new word's term minus the old one's: no pass over an image, old or new.
// A dense storage (copied in full anyway) is digested from its new bytes instead: from the image, on a background
// task the commit starts once it has copied them, so the digest costs the update nothing; anything that writes the
// images again (the next prepare, a native load) waits for it first. Only when no recording was possible (the
// images did not hold the live bytes when the prepare began) are all digests recomputed from the images, so that
// the next update can stage again.
#include <cstdint>
#include <future>
#include <memory>
#include <vector>

#include "core/phase_log.hpp"
#include "modes/sync/delta_recorder.hpp"
#include "modes/sync/rank_image.hpp"
#include "modes/sync/sync_mode.hpp"

namespace wsb {

/// Host pack budget of one staging area: an eighth of the bytes of the storages it serves, at least 1 MiB, at most
/// 1 GiB, and never more than the area itself. At the default densities a pack is ~4% of its storages' bytes
/// (8 bytes per changed 32-bit word, ~2% of words); a pack that does not fit is not staged (full copy).
uint64_t delta_pack_budget(uint64_t storage_bytes, uint64_t area_bytes);

class DeviceDeltaCommit {
 public:
  /// `context` and `images` (the cpu mode's rank images, one per TP rank) outlive this object. Allocates the pinned host
  /// packs (context.pinner) when context.live has a staging area for every rank; otherwise every commit copies in
  /// full. Throws what HostBuffer throws.
  DeviceDeltaCommit(const SyncContext& context, std::vector<RankImage>& images);
  ~DeviceDeltaCommit();

  /// Before a native load writes the images: waits for the digests of the last commit's dense storages.
  void before_native_load();
  /// After the native load: `images_hold_live` when it staged every storage in the images (which then hold the live
  /// bytes). Reserves the device staging areas (phase "load.delta_staging": StorageTarget::reserve_delta_staging,
  /// Error(Resource) when an area cannot be allocated), then digests the images (phase "load.delta_digest"), outside
  /// any update.
  void on_native_load(bool images_hold_live, PhaseLog& log);
  /// Called once per prepare, right before the images are first written: waits for the last commit's dense digests
  /// (phase "prepare.delta_digest_wait", when there were any), starts the live-digest check (on the devices, while
  /// the fold runs) and returns the recorder every write must go through, or null when this prepare cannot record
  /// (the images do not hold the live bytes, or no staging area).
  DeltaRecorder* begin_writes(PhaseLog& log);
  /// After the images hold the target: packs what the recording found and uploads it (phases
  /// "prepare.delta_verify_live", "prepare.delta_pack", "prepare.delta_upload"), or digests the images
  /// ("prepare.delta_digest") when nothing was recorded. Throws what the staging throws (the commit then copies in
  /// full: nothing is marked staged).
  void finish_writes(PhaseLog& log);
  /// Before the gate closes: drops the staged packs when their staged copies no longer match (that commit copies
  /// everything). Mutates nothing live.
  void preflight();
  /// The pause: applies the staged packs and copies every storage they do not cover; then starts digesting the
  /// dense storages' new bytes from the images, in the background.
  void commit(StorageTarget& storages, PhaseLog& log);
  /// Host memory held (pinned packs, scratch), bytes.
  uint64_t host_bytes() const;
  /// Storages the next commit leaves to the staged packs (flat index over ranks); empty: everything is copied.
  const std::vector<bool>& staged() const { return staged_; }

 private:
  /// digest64 term sums of every storage of the images (a timed phase), or of the storages `flats`, in parallel.
  std::vector<uint64_t> image_sums(PhaseLog& log, const char* phase) const;
  std::vector<uint64_t> image_sums(const std::vector<size_t>& flats) const;
  /// Waits for the background digests of dense_pending_ and files them into sums_ (sums_known_ stays as it was:
  /// false when the commit never ran and they were not started). Returns the seconds waited.
  double settle_dense_sums();

  const SyncContext& context_;
  std::vector<RankImage>& images_;
  std::vector<StorageIndex> storages_;  ///< flat index -> (rank, index)
  std::vector<uint64_t> bytes_;         ///< flat index -> storage bytes
  std::vector<int> group_of_rank_;      ///< recorder group of each rank's staging area
  std::vector<int> group_ids_;          ///< delta_staging_group of each recorder group
  std::unique_ptr<DeltaRecorder> recorder_;  ///< null: no staging area
  std::vector<uint64_t> sums_;      ///< digest64 term sums of the images' storages, when sums_known_
  bool sums_known_ = false;
  bool live_known_ = false;         ///< the live storages hold the images' bytes
  bool recording_ = false;          ///< this prepare writes through the recorder
  std::vector<uint64_t> base_sums_;  ///< sums_ when the recording began (the live bytes')
  /// Storages the last recording found dense: their sums_ entries come from dense_sums_, started by the commit.
  std::vector<size_t> dense_pending_;
  std::future<std::vector<uint64_t>> dense_sums_;
  struct LiveCheck {
    std::vector<uint64_t> digests;
    double seconds = 0;
  };
  std::future<LiveCheck> live_check_;
  std::vector<bool> staged_;
  bool packs_staged_ = false;
  bool rejected_ = false;
};

}  // namespace wsb
