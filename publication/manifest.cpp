// Publication manifest rules (docs/design.md "Publication format"; metadata field names as in the Stitch/SGLang-fork
// layout) and the naming helpers shared by readers and writers.
#include <fmt/format.h>

#include "core/errors.hpp"
#include "publication/publication.hpp"

namespace wsb {
namespace {

const std::string* find_field(const CheckpointIndex& index, const std::string& key) {
  auto it = index.metadata.find(key);
  return it == index.metadata.end() ? nullptr : &it->second;
}

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw Error(ErrorKind::Format, fmt::format("{}: {}", origin, what));
}

}  // namespace

PublicationManifest delta_manifest(uint32_t version, DeltaEncoding encoding, PayloadFraming framing,
                                   uint64_t checksum_range_bytes) {
  PublicationManifest manifest;
  manifest.version = version;
  manifest.kind = PublicationKind::Delta;
  manifest.base_version = version - 1;
  manifest.encoding = encoding;
  manifest.framing = framing;
  manifest.compression_format = std::string(compression_format_name(framing));
  if (checksum_range_bytes != 0) {
    manifest.checksum_format = std::string(kChecksumXxh3Ranges);
    manifest.checksum_range_bytes = checksum_range_bytes;
  }
  return manifest;
}

PublicationManifest parse_manifest(const CheckpointIndex& index, const std::string& origin) {
  PublicationManifest manifest;
  const std::string* version = find_field(index, "version");
  if (version == nullptr) fail(origin, "metadata 'version' missing");
  manifest.version = parse_version_string(*version, origin + ": metadata 'version'");

  if (const std::string* encoding = find_field(index, "delta_encoding")) {
    std::optional<DeltaEncoding> parsed = parse_delta_encoding(*encoding);
    if (!parsed) fail(origin, fmt::format("metadata 'delta_encoding' '{}' is not xor or overwrite", *encoding));
    manifest.kind = PublicationKind::Delta;
    manifest.encoding = *parsed;
  }
  bool delta = manifest.kind == PublicationKind::Delta;

  if (const std::string* base = find_field(index, "base_version")) {
    manifest.base_version = parse_version_string(*base, origin + ": metadata 'base_version'");
  } else if (delta) {
    fail(origin, "metadata 'base_version' missing (required for a DELTA publication)");
  }

  if (const std::string* compression = find_field(index, "compression_format")) {
    const std::optional<PayloadFraming> framing = parse_compression_format(*compression);
    if (!framing) {
      fail(origin, fmt::format("metadata 'compression_format' '{}' is unknown (known: zstd, zstd-frames)",
                               *compression));
    }
    manifest.compression_format = *compression;
    manifest.framing = *framing;
  } else if (delta) {
    fail(origin, "metadata 'compression_format' missing (required for a DELTA publication)");
  }

  manifest.checksum_format = std::string(kChecksumXxh3);
  if (const std::string* checksum = find_field(index, "checksum_format")) {
    if (*checksum != kChecksumXxh3 && *checksum != kChecksumXxh3Ranges) {
      fail(origin, fmt::format("metadata 'checksum_format' '{}' is unknown (known: xxh3-128, xxh3-128-ranges)",
                               *checksum));
    }
    manifest.checksum_format = *checksum;
  }
  const std::string* range = find_field(index, "checksum_range_bytes");
  if (manifest.checksum_format == kChecksumXxh3Ranges) {
    if (range == nullptr) fail(origin, "metadata 'checksum_range_bytes' missing (required by xxh3-128-ranges)");
    const bool digits = !range->empty() && range->size() <= 15 &&
                        range->find_first_not_of("0123456789") == std::string::npos;
    const uint64_t bytes = digits ? std::stoull(*range) : 0;
    if (!digits || bytes == 0 || !checksum_range_bytes_problem(bytes).empty()) {
      fail(origin, fmt::format("metadata 'checksum_range_bytes' '{}' is not a positive decimal multiple of 1 MiB "
                               "(1048576)",
                               *range));
    }
    manifest.checksum_range_bytes = bytes;
  } else if (range != nullptr) {
    fail(origin, "metadata 'checksum_range_bytes' is set but checksum_format is xxh3-128 (one digest per tensor)");
  }
  return manifest;
}

std::map<std::string, std::string> manifest_metadata(const PublicationManifest& manifest) {
  std::map<std::string, std::string> out;
  out["version"] = version_string(manifest.version);
  if (manifest.base_version) out["base_version"] = version_string(*manifest.base_version);
  if (manifest.kind == PublicationKind::Delta) {
    out["delta_encoding"] = std::string(delta_encoding_name(manifest.encoding));
    out["compression_format"] = manifest.compression_format.empty()
                                    ? std::string(compression_format_name(manifest.framing))
                                    : manifest.compression_format;
  }
  out["checksum_format"] = manifest.checksum_format;
  if (manifest.checksum_range_bytes != 0) out["checksum_range_bytes"] = std::to_string(manifest.checksum_range_bytes);
  return out;
}

bool is_xxh3_128_hex(std::string_view text) {
  if (text.size() != 32) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string shard_file_name(size_t index, size_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index, count);
}

std::vector<std::pair<size_t, size_t>> split_shards(std::span<const uint64_t> bytes, uint64_t max_shard_bytes) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  uint64_t filled = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i > begin && filled + bytes[i] > max_shard_bytes) {
      out.emplace_back(begin, i);
      begin = i;
      filled = 0;
    }
    filled += bytes[i];
  }
  if (begin < bytes.size()) out.emplace_back(begin, bytes.size());
  return out;
}

}  // namespace wsb
