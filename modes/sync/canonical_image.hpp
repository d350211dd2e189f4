#pragma once
// The canonical checkpoint of one version in host memory, tensor by tensor, moved to a newer version by folding
// the store's deltas in canonical space (delta_fold.hpp). The cpu mode keeps one per host; the refit mode's trainer
// simulator keeps one as the trainer's copy of the weights.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/checkpoint/checkpoint.hpp"
#include "core/phase_log.hpp"
#include "models/profile/profile.hpp"
#include "modes/sync/delta_fold.hpp"
#include "modes/sync/parallel_fold.hpp"
#include "modes/sync/host_buffer.hpp"

namespace wsb {

class CanonicalImage {
 public:
  /// Allocates (zero-filled) every canonical tensor of `profile`, each 64 B aligned, in one buffer of kind
  /// `memory` (Shared when another process must map it: the refit's cuda-ipc sender process). `owner` prefixes
  /// error messages ("cpu mode", "refit trainer"). `homes`, empty or one span per canonical tensor (profile order):
  /// a non-empty span is where that tensor lives instead of the buffer, memory the caller owns and keeps alive for
  /// the image's life (cpu mode: a rank-image storage that holds exactly the tensor, modes/cpu/canonical_homes.hpp).
  /// Throws Error(Mismatch) naming the tensor for a home whose size is not the tensor's or that is not 64 B aligned,
  /// or for a homes list of another length; std::bad_alloc, or what HostBuffer throws.
  CanonicalImage(const ModelProfile& profile, std::string owner, HostMemory memory = HostMemory::Private,
                 std::vector<std::span<uint8_t>> homes = {});

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  /// Index of tensor `name` in tensors(); nullopt when the profile has no such tensor.
  std::optional<size_t> index_of(std::string_view name) const;
  std::span<uint8_t> tensor(size_t index);
  std::span<const uint8_t> tensor(size_t index) const;
  /// Throws Error(Missing, "<owner>: no tensor 'NAME'").
  std::span<const uint8_t> tensor(const std::string& name) const;
  /// Bytes of the image's own buffer (alignment padding included; tensors kept in their homes not counted).
  uint64_t bytes() const { return buffer_.size(); }
  bool loaded() const { return loaded_; }
  /// Someone else wrote a home (a native load staging a rank-image storage): the image no longer knows what it
  /// holds, so it is not loaded() until the next load().
  void invalidate() { loaded_ = false; }
  /// The buffer holding every tensor (its shared_fd() when Shared).
  const HostBuffer& buffer() const { return buffer_; }
  /// The version the image holds (meaningful once loaded()).
  uint32_t version() const { return version_; }
  /// Decode scratch kept between prepares (overwrite bodies), in bytes.
  uint64_t scratch_bytes() const { return workspace_.held_bytes(); }

  /// Copies every canonical tensor of `checkpoint` (the native load's, at `version`) into the image, releasing each
  /// from the reader once copied (bounded resident set). `present[i]` (empty: none): homed tensor i already holds
  /// the checkpoint's bytes (the native load wrote them into its home), so it is checked but not copied; ignored
  /// for a tensor without a home. Phase "load.canonical_image" (bytes: those copied). Throws what expect_tensor
  /// throws (Missing/Mismatch naming the tensor and the checkpoint directory).
  void load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log, const std::vector<bool>& present = {});

  /// Folds the deltas of `store` from version() to `target` (> version()) on `threads` threads
  /// (fold_in_parallel: large tensors split across threads where their payloads have several frames), verifying
  /// every tensor's checksum; phases "<phase_prefix>.plan", ".stage" (the compressed payloads faulted in, DiskRead
  /// floor) and ".apply_verify" (HostMemcpy floor). Planning errors (Missing: not published, Lineage,
  /// Missing/Mismatch tensor set) throw before anything changes; `before_mutation` runs right after the plan
  /// checks out. `listener` sees every folded chunk of tensor i (FoldListener: concurrently, before
  /// verification). On a fold error (Format/Checksum naming the tensor) every folded tensor is put back, so the
  /// image still holds version(). Throws Error(State) when not loaded or target <= version(); when restoring fails
  /// (Error(State) from fold_in_parallel) the image is no longer loaded().
  void advance(const std::filesystem::path& store, uint32_t target, int threads, PhaseLog& log,
               std::string_view phase_prefix, const std::function<void()>& before_mutation,
               const FoldListener& listener = {});

 private:
  std::string owner_;
  std::vector<TensorSpec> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::vector<uint64_t> offsets_;  ///< in buffer_, for the tensors without a home
  std::vector<std::span<uint8_t>> homes_;  ///< per tensor; empty: in buffer_
  HostBuffer buffer_;
  FoldWorkspace workspace_;
  uint32_t version_ = 0;
  bool loaded_ = false;
};

}  // namespace wsb
