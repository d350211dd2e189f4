#pragma once
// The soak's publisher: FULL v0, then one DELTA per call that is either real (the synthetic publisher's next
// perturbation step) or an identity (a delta that changes nothing: every target checksum is its base's). It keeps the
// current canonical tensors in memory, so a real delta after identities continues the synthetic lineage: after k real
// steps the content equals write_full_checkpoint(profile, seed, k, default density), the native-load reference.
// (publish() cannot append such a store: it re-synthesizes the base from the version number alone.)
#include <cstdint>
#include <filesystem>
#include <vector>

#include "models/profile/profile.hpp"
#include "publication/delta_codec.hpp"

namespace wsb {

class SoakPublisher {
 public:
  /// Publishes FULL v0 into `store`, which must hold no publication. Throws the publisher's errors.
  SoakPublisher(ModelProfile profile, std::filesystem::path store, uint64_t seed, DeltaEncoding encoding);

  /// Publishes version() + 1 as a DELTA on version() and advances `latest`; returns the new version.
  /// Throws Error(Io) when the store cannot be written.
  uint32_t publish_next(bool identity);
  /// Newest published version.
  uint32_t version() const { return version_; }
  /// Real deltas published so far: the synthetic version the current content equals.
  uint32_t real_steps() const { return real_steps_; }
  /// Removes the DELTA publications below `keep_from` (FULL v0 stays), as a fleet's retention does, so a long soak
  /// keeps a bounded store. Only versions no engine still has to catch up through may go.
  void prune_before(uint32_t keep_from) const;

 private:
  ModelProfile profile_;
  std::filesystem::path store_;
  uint64_t seed_;
  DeltaEncoding encoding_;
  std::vector<TensorSpec> tensors_;
  std::vector<std::vector<uint8_t>> current_;  ///< canonical bytes at version_, per tensor
  uint32_t version_ = 0;
  uint32_t real_steps_ = 0;
};

}  // namespace wsb
