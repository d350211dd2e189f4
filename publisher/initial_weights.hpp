#pragma once
// Version 0 of the publisher's model: synthesized from (profile, seed), or the bytes of a real checkpoint directory.
// Later versions perturb it the same way in both cases (perturb_version), so a synthetic run and a run on real
// weights differ only in where version 0 comes from.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>

#include "models/checkpoint/checkpoint.hpp"
#include "models/profile/profile.hpp"

namespace wsb {

class InitialWeights {
 public:
  /// `checkpoint` empty: synthesized. Else the directory is opened and every canonical tensor of `profile` is checked
  /// in it (expect_tensor: Error(Missing) / Error(Mismatch) naming the directory and the tensor), before any byte
  /// is read; CheckpointReader's errors for a malformed directory.
  InitialWeights(const ModelProfile& profile, uint64_t seed, const std::filesystem::path& checkpoint);

  /// Version-0 bytes of `tensor` (out.size() == tensor.bytes()). The checkpoint's pages of the tensor are dropped
  /// from the resident set afterwards, so streaming every tensor never holds the checkpoint in memory. Safe to call
  /// from several threads for different tensors.
  void fill(const TensorSpec& tensor, std::span<uint8_t> out) const;

  /// Canonical bytes of `tensor` at `version`: fill, then perturb_version for versions 1..version (density nullopt =
  /// default_density(tensor)).
  void at_version(const TensorSpec& tensor, uint32_t version, std::optional<double> density,
                  std::span<uint8_t> out) const;

  /// True when version 0 is a real checkpoint's.
  bool real() const { return reader_ != nullptr; }

 private:
  const ModelProfile& profile_;
  uint64_t seed_;
  std::unique_ptr<CheckpointReader> reader_;
};

}  // namespace wsb
