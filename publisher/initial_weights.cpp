#include "publisher/initial_weights.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "publisher/publisher.hpp"

namespace wsb {

InitialWeights::InitialWeights(const ModelProfile& profile, uint64_t seed, const std::filesystem::path& checkpoint)
    : profile_(profile), seed_(seed) {
  if (checkpoint.empty()) return;
  reader_ = std::make_unique<CheckpointReader>(checkpoint);
  for (const TensorSpec& tensor : profile.canonical_tensors()) expect_tensor(*reader_, tensor, checkpoint.string());
}

void InitialWeights::fill(const TensorSpec& tensor, std::span<uint8_t> out) const {
  if (!reader_) return synthesize_initial(profile_, tensor, seed_, out);
  const std::span<const uint8_t> bytes = reader_->data(tensor.name);
  if (bytes.size() != out.size()) {
    throw Error(ErrorKind::Mismatch, fmt::format("{}: tensor '{}' has {} bytes, the buffer {}", reader_->dir().string(),
                                                 tensor.name, bytes.size(), out.size()));
  }
  std::copy(bytes.begin(), bytes.end(), out.begin());
  reader_->release(tensor.name);
}

void InitialWeights::at_version(const TensorSpec& tensor, uint32_t version, std::optional<double> density,
                                std::span<uint8_t> out) const {
  fill(tensor, out);
  if (version == 0) return;
  const double d = density ? *density : default_density(tensor);
  for (uint32_t k = 1; k <= version; ++k) perturb_version(profile_, tensor, seed_, k, d, out);
}

}  // namespace wsb
