// publish_from_checkpoints(): FULL v0 and one DELTA per following checkpoint, streamed tensor by tensor.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "models/profile/hf_config_write.hpp"
#include "publisher/checkpoint_publisher.hpp"
#include "publisher/delta_spill.hpp"
#include "publisher/ordered_pipeline.hpp"
#include "publication/publication.hpp"

namespace wsb {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// One call publishes at most this many versions (as publish()).
constexpr size_t kMaxCheckpoints = 256;
/// Bytes of compared-and-compressed tensors that may wait for the writer thread.
constexpr uint64_t kHeldBytes = 1ull << 30;

void check_free_range(const Store& store, uint32_t last) {
  version_string(last);  // throws beyond six digits
  for (uint32_t v = 0; v <= last; ++v) {
    std::error_code ec;
    if (fs::exists(store.update_dir(v), ec)) {
      throw Error(ErrorKind::Lineage, fmt::format("version {} is already published in {} ({} exists)",
                                                  version_string(v), store.root().string(),
                                                  store.update_dir(v).string()));
    }
  }
}


void count_elements(const std::vector<TensorSpec>& tensors, PublicationStats& stats) {
  for (const TensorSpec& t : tensors) {
    stats.canonical_bytes += t.bytes();
    stats.changes[change_class(t)].elements += change_elements(t);
  }
}

/// FULL v0: the first checkpoint's tensors streamed into shards, and its config.json.
std::unique_ptr<PublicationWriter> write_full(const ConsecutiveCheckpoints& checkpoints,
                                              const std::vector<TensorSpec>& tensors, const Store& store,
                                              const CheckpointPublishOptions& options) {
  PublicationManifest manifest;
  manifest.version = 0;
  auto writer = std::make_unique<PublicationWriter>(store.update_dir(0), manifest, options.max_shard_bytes,
                                                    /*atomic=*/true, options.fsync);
  writer->add_file(kHfConfigFileName, hf_config_text(checkpoints.profile));
  const CheckpointReader& reader = *checkpoints.readers[0];
  std::vector<uint64_t> sizes;
  for (const TensorSpec& t : tensors) sizes.push_back(t.bytes());
  for (const auto& [begin, end] : split_shards(sizes, options.max_shard_bytes)) {
    writer->begin_shard(std::vector<TensorSpec>(tensors.begin() + static_cast<std::ptrdiff_t>(begin),
                                                tensors.begin() + static_cast<std::ptrdiff_t>(end)));
    for (size_t i = begin; i < end; ++i) {
      writer->append(reader.data(tensors[i].name));
      reader.release(tensors[i].name);
    }
    writer->end_shard();
  }
  return writer;
}

/// DELTA `version`: every tensor from checkpoint version - 1 to checkpoint version, in each encoding tried, spilled;
/// then the shards of the encoding kept.
std::unique_ptr<PublicationWriter> write_delta(const ConsecutiveCheckpoints& checkpoints,
                                               const std::vector<TensorSpec>& tensors, const Store& store,
                                               uint32_t version, const CheckpointPublishOptions& options,
                                               PublicationStats& stats) {
  const CheckpointReader& base = *checkpoints.readers[version - 1];
  const CheckpointReader& target = *checkpoints.readers[version];
  std::vector<DeltaEncoding> tried;
  if (options.encoding) {
    tried.push_back(*options.encoding);
  } else {
    tried = {DeltaEncoding::Xor, DeltaEncoding::Overwrite};  // xor first: it wins a tie
  }
  const fs::path spill_dir = store.update_dir(version).parent_path();
  std::vector<std::unique_ptr<DeltaSpill>> spills;
  for (size_t e = 0; e < tried.size(); ++e) spills.push_back(std::make_unique<DeltaSpill>(spill_dir));

  struct Produced {
    std::vector<std::vector<uint8_t>> payloads;  // per encoding tried
    std::string checksum;
    uint64_t changed = 0;
  };
  std::vector<Produced> produced(tensors.size());
  ordered_pipeline(
      tensors.size(), options.threads, kHeldBytes, [&](size_t i) { return 2 * tensors[i].bytes(); },
      [&](size_t i) {
        const TensorSpec& tensor = tensors[i];
        const std::span<const uint8_t> from = base.data(tensor.name);
        const std::span<const uint8_t> to = target.data(tensor.name);
        Produced& out = produced[i];
        out.changed = count_changed(tensor, from, to);
        for (DeltaEncoding encoding : tried) out.payloads.push_back(encode_delta(encoding, from, to, options.zstd_level));
        out.checksum = xxh3_128_hex(to);
        base.release(tensor.name);  // keep the resident set at the tensors in flight
        target.release(tensor.name);
      },
      [&](size_t i) {
        const TensorSpec& tensor = tensors[i];
        Produced& in = produced[i];
        for (size_t e = 0; e < tried.size(); ++e) {
          spills[e]->add(tensor.name, in.payloads[e], in.checksum);
          stats.payload_bytes[std::string(delta_encoding_name(tried[e]))] += in.payloads[e].size();
        }
        stats.changed_values += in.changed;
        stats.changes[change_class(tensor)].changed += in.changed;
        in = Produced{};
      });
  size_t kept = 0;
  for (size_t e = 1; e < tried.size(); ++e) {
    if (spills[e]->payload_bytes() < spills[kept]->payload_bytes()) kept = e;
  }
  stats.encoding = tried[kept];
  auto writer = std::make_unique<PublicationWriter>(store.update_dir(version), delta_manifest(version, tried[kept]),
                                                    options.max_shard_bytes, /*atomic=*/true, options.fsync);
  spills[kept]->write_shards(*writer, options.max_shard_bytes);
  return writer;
}

}  // namespace

std::vector<PublicationStats> publish_from_checkpoints(const std::vector<fs::path>& dirs,
                                                       const CheckpointPublishOptions& options) {
  if (dirs.size() > kMaxCheckpoints) {
    throw Error(ErrorKind::Format, fmt::format("publish into {}: {} checkpoints in one call, at most {}",
                                               options.store.string(), dirs.size(), kMaxCheckpoints));
  }
  const ConsecutiveCheckpoints checkpoints = open_consecutive_checkpoints(dirs);
  const Store store(options.store);
  const auto last = static_cast<uint32_t>(dirs.size() - 1);
  check_free_range(store, last);
  std::error_code ec;
  fs::create_directories(store.update_dir(0).parent_path(), ec);
  if (ec) {
    throw Error(ErrorKind::Io, fmt::format("create directory {}: {}", store.update_dir(0).parent_path().string(),
                                           ec.message()));
  }
  const std::vector<TensorSpec> tensors = checkpoints.profile.canonical_tensors();
  std::vector<PublicationStats> stats(dirs.size());
  std::vector<std::unique_ptr<PublicationWriter>> writers;
  for (uint32_t v = 0; v <= last; ++v) {
    const auto start = Clock::now();
    PublicationStats& s = stats[v];
    s.version = v;
    s.full = v == 0;
    s.source = dirs[v];
    count_elements(tensors, s);
    writers.push_back(v == 0 ? write_full(checkpoints, tensors, store, options)
                             : write_delta(checkpoints, tensors, store, v, options, s));
    s.seconds = seconds_since(start);
  }
  // Version order: a reader that sees version k also finds k - 1; a failure before here leaves nothing visible.
  for (uint32_t v = 0; v <= last; ++v) {
    const auto start = Clock::now();
    stats[v].stored_bytes = writers[v]->commit();
    stats[v].seconds += seconds_since(start);
  }
  if (options.advance_latest) store.advance_latest(last);
  return stats;
}

}  // namespace wsb
