// write_full_checkpoint(): the canonical checkpoint at any version as a plain FULL directory, the reference a
// native load reads.
#include "modes/publisher/publisher.hpp"
#include "modes/store/publication.hpp"

namespace wsb {

void write_full_checkpoint(const ModelProfile& profile, uint64_t seed, uint32_t version, std::optional<double> density,
                           const std::filesystem::path& dir, uint64_t max_shard_bytes) {
  const std::vector<TensorSpec> tensors = profile.canonical_tensors();
  PublicationManifest manifest;
  manifest.version = version;
  PublicationWriter writer(dir, manifest, max_shard_bytes, /*atomic=*/false, /*fsync=*/false);
  std::vector<uint64_t> sizes;
  for (const TensorSpec& t : tensors) sizes.push_back(t.bytes());
  std::vector<uint8_t> buffer;
  for (auto [begin, end] : split_shards(sizes, max_shard_bytes)) {
    writer.begin_shard(std::vector<TensorSpec>(tensors.begin() + static_cast<std::ptrdiff_t>(begin),
                                               tensors.begin() + static_cast<std::ptrdiff_t>(end)));
    for (size_t i = begin; i < end; ++i) {
      buffer.resize(tensors[i].bytes());
      synthesize_canonical(profile, tensors[i], seed, version, density, buffer);
      writer.append(buffer);
    }
    writer.end_shard();
  }
  writer.commit();
}

}  // namespace wsb
