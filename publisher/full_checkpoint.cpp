// write_full_checkpoint(): the canonical checkpoint at any version as a plain FULL directory, the reference a
// native load reads.
#include "models/profile/hf_config_write.hpp"
#include "publisher/initial_weights.hpp"
#include "publisher/ordered_pipeline.hpp"
#include "publisher/publisher.hpp"
#include "publication/publication.hpp"

namespace wsb {

void write_full_checkpoint(const ModelProfile& profile, uint64_t seed, uint32_t version, std::optional<double> density,
                           const std::filesystem::path& dir, uint64_t max_shard_bytes, int threads,
                           const std::filesystem::path& initial_checkpoint) {
  const std::vector<TensorSpec> tensors = profile.canonical_tensors();
  const InitialWeights initial(profile, seed, initial_checkpoint);
  PublicationManifest manifest;
  manifest.version = version;
  PublicationWriter writer(dir, manifest, max_shard_bytes, /*atomic=*/false, /*fsync=*/false);
  writer.add_file(kHfConfigFileName, hf_config_text(profile));  // an engine fork boots from this directory
  std::vector<uint64_t> sizes;
  for (const TensorSpec& t : tensors) sizes.push_back(t.bytes());
  // Tensors are synthesized on `threads` workers and appended in checkpoint order (ordered_pipeline).
  const auto shards = split_shards(sizes, max_shard_bytes);
  std::vector<size_t> shard_of(tensors.size());
  for (size_t k = 0; k < shards.size(); ++k) {
    for (size_t i = shards[k].first; i < shards[k].second; ++i) shard_of[i] = k;
  }
  std::vector<std::vector<uint8_t>> buffers(tensors.size());
  ordered_pipeline(
      tensors.size(), threads, 4ull << 30, [&](size_t i) { return tensors[i].bytes(); },
      [&](size_t i) {
        buffers[i].resize(tensors[i].bytes());
        initial.at_version(tensors[i], version, density, buffers[i]);
      },
      [&](size_t i) {
        const auto [begin, end] = shards[shard_of[i]];
        if (i == begin) {
          writer.begin_shard(std::vector<TensorSpec>(tensors.begin() + static_cast<std::ptrdiff_t>(begin),
                                                     tensors.begin() + static_cast<std::ptrdiff_t>(end)));
        }
        writer.append(buffers[i]);
        std::vector<uint8_t>().swap(buffers[i]);
        if (i + 1 == end) writer.end_shard();
      });
  writer.commit();
}

}  // namespace wsb
