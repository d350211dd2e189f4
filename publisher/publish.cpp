// publish(): FULL v0 and DELTA v1..vN of the synthetic model, tensor by tensor (memory stays at a few tensors).
#include <chrono>

#include <fmt/format.h>

#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "models/profile/hf_config_write.hpp"
#include "publisher/initial_weights.hpp"
#include "publisher/ordered_pipeline.hpp"
#include "publisher/publisher.hpp"
#include "publication/publication.hpp"

namespace wsb {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void check_range(const PublishOptions& options, const Store& store) {
  if (options.first_version > options.last_version) {
    throw Error(ErrorKind::Format, fmt::format("publish into {}: first_version {} is after last_version {}",
                                               store.root().string(), options.first_version,
                                               options.last_version));
  }
  version_string(options.last_version);  // throws when beyond six digits
  // One writer (and one shard of compressed payloads) is open per version while tensors stream through.
  constexpr uint32_t kMaxVersionsPerCall = 256;
  if (options.last_version - options.first_version + 1 > kMaxVersionsPerCall) {
    throw Error(ErrorKind::Format, fmt::format("publish into {}: {} versions in one call, at most {}",
                                               store.root().string(),
                                               options.last_version - options.first_version + 1, kMaxVersionsPerCall));
  }
  for (uint32_t v = options.first_version; v <= options.last_version; ++v) {
    std::error_code ec;
    if (std::filesystem::exists(store.update_dir(v), ec)) {
      throw Error(ErrorKind::Lineage, fmt::format("version {} is already published in {} ({} exists)",
                                                  version_string(v), store.root().string(),
                                                  store.update_dir(v).string()));
    }
  }
  if (options.first_version > 0 && !store.has(options.first_version - 1)) {
    throw Error(ErrorKind::Lineage,
                fmt::format("cannot append version {}: its base version {} is not published in {}",
                            version_string(options.first_version), version_string(options.first_version - 1),
                            store.root().string()));
  }
}

PublicationManifest manifest_for(uint32_t version, const PublishOptions& options) {
  if (version == 0) {
    PublicationManifest full;
    full.version = 0;
    return full;
  }
  return delta_manifest(version, options.encoding,
                        options.frame_bytes == 0 ? PayloadFraming::OneFrame : PayloadFraming::Frames,
                        options.checksum_range_bytes);
}

/// The tensor at `first - 1`, verified against the published base so deltas never extend a different model.
void load_base(const ModelProfile& profile, const PublishOptions& options, const InitialWeights& initial,
               const Publication& base, const TensorSpec& tensor, std::span<uint8_t> out) {
  initial.at_version(tensor, base.version(), options.density, out);
  const std::string actual = tensor_checksum_text(out, base.manifest().checksum_range_bytes);
  if (base.contains(tensor.name) && base.expected_checksum(tensor.name) != actual && base.version() > 0) {
    // Version 0 does not depend on the density: when it is this model and seed, the density is what differs.
    std::vector<uint8_t> v0(tensor.bytes());
    synthesize_initial(profile, tensor, options.seed, v0);
    const Store store(options.store);
    if (store.has(0)) {
      const Publication full(store, 0);
      if (full.contains(tensor.name) &&
          full.expected_checksum(tensor.name) == tensor_checksum_text(v0, full.manifest().checksum_range_bytes)) {
        throw Error(ErrorKind::Mismatch,
                    fmt::format("cannot append to {}: density differs: published version {} was not made with {} "
                                "(tensor '{}'), while version 000000 is the synthetic model '{}' with seed {}: append "
                                "with the density the store was published with",
                                options.store.string(), version_string(base.version()),
                                options.density ? fmt::format("density {}", *options.density)
                                                : std::string("the default densities"),
                                tensor.name, profile.id, options.seed));
      }
    }
  }
  if (!base.contains(tensor.name) || base.expected_checksum(tensor.name) != actual) {
    const std::string model =
        initial.real() ? fmt::format("checkpoint {} perturbed", options.initial_checkpoint.string())
                       : fmt::format("synthetic model '{}'", profile.id);
    throw Error(ErrorKind::Checksum,
                fmt::format("cannot append to {}: tensor '{}' of published version {} is not the {} with seed {} "
                            "(expected checksum {}, synthesized {})",
                            options.store.string(), tensor.name, version_string(base.version()), model, options.seed,
                            base.contains(tensor.name) ? base.expected_checksum(tensor.name) : "none", actual));
  }
}

}  // namespace

std::string frame_bytes_problem(uint64_t frame_bytes) {
  if (frame_bytes % 4096 == 0) return "";
  return fmt::format("must be 0 (one zstd frame per payload) or a multiple of 4096, got {}", frame_bytes);
}

std::vector<PublicationStats> publish(const ModelProfile& profile, const PublishOptions& options) {
  if (std::string problem = frame_bytes_problem(options.frame_bytes); !problem.empty()) {
    throw Error(ErrorKind::Format, "frame_bytes " + problem);
  }
  if (std::string problem = checksum_range_bytes_problem(options.checksum_range_bytes); !problem.empty()) {
    throw Error(ErrorKind::Format, "checksum_range_bytes " + problem);
  }
  Store store(options.store);
  check_range(options, store);
  const uint32_t first = options.first_version;
  const uint32_t last = options.last_version;
  const std::vector<TensorSpec> tensors = profile.canonical_tensors();
  const InitialWeights initial(profile, options.seed, options.initial_checkpoint);  // checked before any write

  std::unique_ptr<Publication> base;
  if (first > 0) {
    base = std::make_unique<Publication>(store, first - 1);
    // Appending must continue the same model: a scaled or different profile would publish a partial delta.
    const auto published = base->tensor_names();
    if (published.size() != tensors.size()) {
      throw Error(ErrorKind::Mismatch,
                  fmt::format("cannot append to {}: version {} holds {} tensors, profile '{}' has {}",
                              options.store.string(), version_string(first - 1), published.size(), profile.id,
                              tensors.size()));
    }
  }

  // FULL v0 is a checkpoint an engine can boot from: it carries the Hugging Face config (DELTAs do not).
  const std::string hf_config = first == 0 ? hf_config_text(profile) : std::string();
  std::vector<PublicationStats> stats(last - first + 1);
  std::vector<std::unique_ptr<PublicationWriter>> writers;
  for (uint32_t v = first; v <= last; ++v) {
    stats[v - first].version = v;
    stats[v - first].full = v == 0;
    if (v > 0) stats[v - first].encoding = options.encoding;
    stats[v - first].source = options.initial_checkpoint;
    writers.push_back(std::make_unique<PublicationWriter>(store.update_dir(v), manifest_for(v, options),
                                                          options.max_shard_bytes, /*atomic=*/true, options.fsync));
  }
  if (first == 0) writers[0]->add_file(kHfConfigFileName, hf_config);

  // FULL v0 shards are streamed (the writer checksums the bytes as they pass); deltas are buffered per shard.
  std::vector<std::pair<size_t, size_t>> full_shards;
  if (first == 0) {
    std::vector<uint64_t> sizes;
    for (const TensorSpec& t : tensors) sizes.push_back(t.bytes());
    full_shards = split_shards(sizes, options.max_shard_bytes);
  }
  size_t next_full_shard = 0;

  // Each tensor is produced on a worker (synthesize or verify the base, then every version's perturbation and
  // delta) and written in checkpoint order here; at most about `kHeldBytes` of tensors wait between the two.
  struct Produced {
    std::vector<uint8_t> current;  ///< FULL v0 bytes (first == 0)
    std::vector<std::vector<uint8_t>> payloads;
    std::vector<std::string> checksums;
    std::vector<uint64_t> changed;
    std::vector<double> seconds;  ///< per version, this tensor's compute time
  };
  std::vector<Produced> produced(tensors.size());
  constexpr uint64_t kHeldBytes = 4ull << 30;
  auto produce = [&](size_t ti) {
    const TensorSpec& tensor = tensors[ti];
    Produced& out = produced[ti];
    out.seconds.assign(stats.size(), 0);
    out.payloads.resize(stats.size());
    out.checksums.resize(stats.size());
    out.changed.assign(stats.size(), 0);
    std::vector<uint8_t> current(tensor.bytes());
    auto start = Clock::now();
    if (first == 0) {
      initial.fill(tensor, current);
    } else {
      load_base(profile, options, initial, *base, tensor, current);
    }
    out.seconds[0] += seconds_since(start);
    const double density = options.density ? *options.density : default_density(tensor);
    std::vector<uint8_t> previous;
    if (first == 0) out.current = current;
    for (uint32_t v = std::max<uint32_t>(first, 1); v <= last; ++v) {
      start = Clock::now();
      previous.assign(current.begin(), current.end());
      out.changed[v - first] = perturb_version(profile, tensor, options.seed, v, density, current);
      out.payloads[v - first] = encode_delta(options.encoding, previous, current, options.zstd_level,
                                                   options.frame_bytes);
      out.checksums[v - first] = tensor_checksum_text(current, options.checksum_range_bytes);
      out.seconds[v - first] += seconds_since(start);
    }
  };
  auto consume = [&](size_t ti) {
    const TensorSpec& tensor = tensors[ti];
    Produced& in = produced[ti];
    const std::string change_key = change_class(tensor);
    for (PublicationStats& s : stats) {
      s.canonical_bytes += tensor.bytes();
      s.changes[change_key].elements += change_elements(tensor);
    }
    if (first == 0) {
      auto start = Clock::now();
      if (next_full_shard < full_shards.size() && full_shards[next_full_shard].first == ti) {
        auto [begin, end] = full_shards[next_full_shard];
        writers[0]->begin_shard(std::vector<TensorSpec>(tensors.begin() + static_cast<std::ptrdiff_t>(begin),
                                                        tensors.begin() + static_cast<std::ptrdiff_t>(end)));
      }
      writers[0]->append(in.current);
      if (full_shards[next_full_shard].second == ti + 1) {
        writers[0]->end_shard();
        ++next_full_shard;
      }
      stats[0].seconds += seconds_since(start);
    }
    for (uint32_t v = std::max<uint32_t>(first, 1); v <= last; ++v) {
      PublicationStats& s = stats[v - first];
      s.changed_values += in.changed[v - first];
      s.changes[change_key].changed += in.changed[v - first];
      s.payload_bytes[std::string(delta_encoding_name(options.encoding))] += in.payloads[v - first].size();
      TensorSpec spec{tensor.name, DType::U8, {static_cast<int64_t>(in.payloads[v - first].size())}};
      writers[v - first]->add(std::move(spec), std::move(in.payloads[v - first]), in.checksums[v - first]);
    }
    for (size_t k = 0; k < stats.size(); ++k) stats[k].seconds += in.seconds[k];
    in = Produced{};  // the bytes are written: free them before the next tensor
  };
  ordered_pipeline(
      tensors.size(), options.threads, kHeldBytes,
      [&](size_t ti) { return (1 + static_cast<uint64_t>(last - first + 1)) * tensors[ti].bytes(); }, produce,
      consume);
  // Version order: a reader that sees version k also finds k - 1 (the lineage is never gapped on disk).
  for (uint32_t v = first; v <= last; ++v) {
    auto start = Clock::now();
    stats[v - first].stored_bytes = writers[v - first]->commit();
    stats[v - first].seconds += seconds_since(start);
  }
  if (options.advance_latest) store.advance_latest(last);
  return stats;
}

}  // namespace wsb
