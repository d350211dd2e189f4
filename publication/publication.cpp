// Opening a publication: every consistency rule of the format is checked before any byte is used
// (docs/design.md "Publication format").
#include "publication/publication.hpp"

#include <set>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {
namespace {

/// Where a tensor name was found, for the three-way name check of one shard.
struct Presence {
  bool header = false;
  bool checksums = false;
  bool index = false;
};

std::string describe_presence(const Presence& p) {
  auto list = [&](bool want) {
    std::vector<std::string_view> parts;
    if (p.header == want) parts.push_back("the shard header");
    if (p.checksums == want) parts.push_back("the checksum map (__metadata__)");
    if (p.index == want) parts.push_back("the index weight_map");
    return fmt::format("{}", fmt::join(parts, " and "));
  };
  return fmt::format("is in {} but missing from {}", list(true), list(false));
}

std::string shown(std::string_view text) {
  return text.size() <= 80 ? std::string(text) : std::string(text.substr(0, 80)) + "...";
}

/// Checks one shard: names agree across header, checksum map and index; checksums are xxh3-128 hex (one digest,
/// or one or more under "xxh3-128-ranges": `ranged`); delta tensors are 1-D U8 payloads. Adds the shard's
/// checksums to `checksums`.
void check_shard(const std::string& where, const SafetensorsFile& file, const std::set<std::string>& indexed,
                 bool delta, bool ranged, std::map<std::string, std::string, std::less<>>& checksums) {
  std::map<std::string, Presence> names;
  for (const SafetensorsEntry& entry : file.entries()) names[entry.name].header = true;
  for (const auto& [name, checksum] : file.metadata()) names[name].checksums = true;
  for (const std::string& name : indexed) names[name].index = true;
  for (const auto& [name, presence] : names) {
    if (presence.header && presence.checksums && presence.index) continue;
    throw Error(ErrorKind::Mismatch, fmt::format("{}: tensor '{}' {}", where, name, describe_presence(presence)));
  }
  for (const auto& [name, checksum] : file.metadata()) {
    if (ranged && !is_xxh3_128_ranges_hex(checksum)) {
      throw Error(ErrorKind::Format,
                  fmt::format("{}: checksum of tensor '{}' '{}' is not one or more xxh3-128 digests (32 lowercase hex "
                              "chars each; checksum_format is xxh3-128-ranges)",
                              where, name, shown(checksum)));
    }
    if (!ranged && !is_xxh3_128_hex(checksum)) {
      bool hex = checksum.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
      std::string why = hex && checksum.size() != 32
                            ? fmt::format("has {} hex chars: a checksum of another algorithm (checksum_format is "
                                          "xxh3-128, 32 lowercase hex chars)",
                                          checksum.size())
                            : fmt::format("'{}' is not 32 lowercase hex chars (xxh3-128)", shown(checksum));
      throw Error(ErrorKind::Format, fmt::format("{}: checksum of tensor '{}' {}", where, name, why));
    }
    checksums.emplace(name, checksum);
  }
  if (!delta) return;
  for (const SafetensorsEntry& entry : file.entries()) {
    bool payload = entry.dtype == DType::U8 && entry.shape.size() == 1 &&
                   static_cast<uint64_t>(entry.shape[0]) == entry.bytes();
    if (!payload) {
      throw Error(ErrorKind::Format,
                  fmt::format("{}: delta tensor '{}' is {} {}, expected a 1-D U8 payload (shape = byte length)",
                              where, entry.name, dtype_name(entry.dtype), shape_string(entry.shape)));
    }
  }
}

}  // namespace

Publication::Publication(const Store& store, uint32_t version) {
  std::filesystem::path dir = store.update_dir(version);
  if (!store.has(version)) {
    throw Error(ErrorKind::Missing,
                fmt::format("version {} not published in {}", version_string(version), store.root().string()));
  }
  std::filesystem::path index_path = dir / kIndexFileName;
  CheckpointIndex index = read_checkpoint_index(index_path);
  manifest_ = parse_manifest(index, index_path.string());
  if (manifest_.version != version) {
    throw Error(ErrorKind::Lineage, fmt::format("{}: metadata 'version' {} differs from the directory's version {}",
                                                index_path.string(), version_string(manifest_.version),
                                                version_string(version)));
  }
  // Own checks first, so that any disagreement is reported in the format's terms (which of the three lacks
  // the name) before CheckpointReader's generic cross-check would see it.
  std::map<std::string, std::set<std::string>> by_shard;
  for (const auto& [name, shard] : index.weight_map) by_shard[shard].insert(name);
  for (const auto& [shard, names] : by_shard) {
    check_shard_path(index_path, shard);
    // Containment before opening: a link out of the store must be reported as such, not as whatever the
    // foreign file's bytes look like as a header (and they must not be read at all).
    SafetensorsFile file(contained_shard_path(dir, index_path, shard));  // Error(Truncated) while being written
    std::string where = fmt::format("publication {} shard '{}' ({})", version_string(version), shard,
                                    (dir / shard).string());
    check_shard(where, file, names, !is_full(), manifest_.checksum_range_bytes != 0, checksums_);
  }
  reader_ = std::make_unique<CheckpointReader>(dir);
}

Publication::~Publication() = default;

const std::filesystem::path& Publication::dir() const { return reader_->dir(); }

std::vector<std::string> Publication::tensor_names() const { return reader_->tensor_names(); }

bool Publication::contains(std::string_view name) const { return reader_->contains(name); }

std::span<const uint8_t> Publication::payload(std::string_view name) const {
  if (!contains(name)) {
    throw Error(ErrorKind::Missing, fmt::format("publication {} ({}) has no tensor '{}'",
                                                version_string(version()), dir().string(), name));
  }
  return reader_->data(name);
}

const SafetensorsEntry& Publication::entry(std::string_view name) const {
  if (!contains(name)) {
    throw Error(ErrorKind::Missing, fmt::format("publication {} ({}) has no tensor '{}'",
                                                version_string(version()), dir().string(), name));
  }
  return reader_->entry(name);
}

const std::string& Publication::expected_checksum(std::string_view name) const {
  auto it = checksums_.find(name);
  if (it == checksums_.end()) {
    throw Error(ErrorKind::Missing, fmt::format("publication {} ({}) has no checksum for tensor '{}'",
                                                version_string(version()), dir().string(), name));
  }
  return it->second;
}

ExpectedChecksum Publication::expected_checksum(std::string_view name, uint64_t size) const {
  return ExpectedChecksum(expected_checksum(name), manifest_.checksum_range_bytes, size,
                          fmt::format("publication {} ({}) tensor '{}'", version_string(version()), dir().string(), name));
}

}  // namespace wsb
