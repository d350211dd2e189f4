// Fuzzes the publication index: read_checkpoint_index (model.safetensors.index.json -> CheckpointIndex: strict
// JSON, metadata values, total_size, weight_map shard paths) followed by parse_manifest (version, base_version,
// delta_encoding, compression/checksum format rules). The index is the first thing a reader trusts, and a shard
// path that escapes validation would make it read bytes outside the publication. Input: the index file's bytes
// (served from a memfd, so read_text_file runs unchanged). Refusals must be Error(Format); an accepted manifest
// must survive manifest_metadata -> parse_manifest unchanged.
#include "fuzz/fuzz_support.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "publication/publication.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using wsb::fuzz::only_documented_errors;
  using wsb::fuzz::require;
  static wsb::fuzz::MemFile file;
  file.assign(data, size);
  wsb::CheckpointIndex index;
  if (!only_documented_errors({wsb::ErrorKind::Format}, [&] { index = wsb::read_checkpoint_index(file.path()); })) {
    return 0;
  }
  for (const auto& entry : index.weight_map) {
    const std::string& shard = entry.second;  // a structured binding cannot be captured by clang 14
    require(only_documented_errors({}, [&] { wsb::check_shard_path(file.path(), shard); }),
            "accepted index holds shard path '" + shard + "' that check_shard_path refuses");
  }
  wsb::PublicationManifest manifest;
  if (!only_documented_errors({wsb::ErrorKind::Format},
                              [&] { manifest = wsb::parse_manifest(index, "fuzz-index"); })) {
    return 0;
  }
  const bool delta = manifest.kind == wsb::PublicationKind::Delta;
  require(manifest.version <= 999999, "version beyond 6 digits");
  require(!delta || (manifest.base_version &&
                     (manifest.compression_format == "zstd" || manifest.compression_format == "zstd-frames")),
          "DELTA manifest without base_version or a known compression_format");
  require((manifest.checksum_format == "xxh3-128" && manifest.checksum_range_bytes == 0) ||
              (manifest.checksum_format == "xxh3-128-ranges" && manifest.checksum_range_bytes > 0 &&
               manifest.checksum_range_bytes % (1u << 20) == 0),
          "checksum_format and checksum_range_bytes disagree");

  wsb::CheckpointIndex rewritten;
  rewritten.metadata = wsb::manifest_metadata(manifest);
  wsb::PublicationManifest again;
  require(only_documented_errors({}, [&] { again = wsb::parse_manifest(rewritten, "fuzz-rewritten"); }),
          "parse_manifest refused manifest_metadata's output");
  require(again.version == manifest.version && again.base_version == manifest.base_version &&
              again.kind == manifest.kind && (!delta || again.encoding == manifest.encoding) &&
              again.checksum_format == manifest.checksum_format &&
              again.checksum_range_bytes == manifest.checksum_range_bytes &&
              (!delta || again.compression_format == manifest.compression_format),
          "manifest changed through manifest_metadata -> parse_manifest");
  return 0;
}
