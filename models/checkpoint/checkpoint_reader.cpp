#include <system_error>

#include <fmt/format.h>

#include "models/checkpoint/checkpoint.hpp"

namespace wsb {
namespace {

constexpr const char* kSingleFileName = "model.safetensors";

// True when `inner` (canonical) lies inside `outer` (canonical), compared component by component.
bool is_within(const std::filesystem::path& outer, const std::filesystem::path& inner) {
  auto o = outer.begin();
  auto i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (i == inner.end() || *o != *i) return false;
  }
  return i != inner.end();  // the directory itself is not a shard
}

// Resolves symlinks of `dir/shard` and refuses any path that leaves `dir` (e.g. a link to /etc or ../other).
std::filesystem::path resolve_shard(const std::filesystem::path& dir, const std::filesystem::path& real_dir,
                                    const std::filesystem::path& index_path, const std::string& shard) {
  const std::filesystem::path path = dir / shard;
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (ec) {
    throw Error(ec == std::errc::no_such_file_or_directory ? ErrorKind::Missing : ErrorKind::Io,
                fmt::format("{}: shard '{}' ({}): {}", index_path.string(), shard, path.string(), ec.message()));
  }
  if (!is_within(real_dir, real)) {
    throw Error(ErrorKind::Format, fmt::format("{}: shard '{}' resolves to {}, outside the checkpoint directory {}",
                                               index_path.string(), shard, real.string(), real_dir.string()));
  }
  return path;
}

}  // namespace

std::filesystem::path contained_shard_path(const std::filesystem::path& dir, const std::filesystem::path& index_path,
                                           const std::string& shard) {
  std::error_code ec;
  const std::filesystem::path real_dir = std::filesystem::canonical(dir, ec);
  if (ec) {
    throw Error(ErrorKind::Missing, fmt::format("{}: checkpoint directory not found", dir.string()));
  }
  return resolve_shard(dir, real_dir, index_path, shard);
}

CheckpointReader::CheckpointReader(const std::filesystem::path& dir) : dir_(dir) {
  std::error_code ec;
  const std::filesystem::path real_dir = std::filesystem::canonical(dir, ec);
  if (ec || !std::filesystem::is_directory(real_dir, ec)) {
    throw Error(ErrorKind::Missing, fmt::format("{}: checkpoint directory not found", dir.string()));
  }
  const std::filesystem::path index_path = dir / kIndexFileName;
  const std::filesystem::path single_path = dir / kSingleFileName;
  if (std::filesystem::exists(index_path, ec)) {
    index_ = read_checkpoint_index(index_path);
    for (const auto& [name, shard] : index_.weight_map) {
      if (shards_.count(shard) != 0) continue;
      check_shard_path(index_path, shard);
      shards_.emplace(shard, std::make_unique<SafetensorsFile>(resolve_shard(dir, real_dir, index_path, shard)));
    }
    for (const auto& [name, shard] : index_.weight_map) {
      const SafetensorsFile& file = *shards_.at(shard);
      if (file.find(name) == nullptr) {
        throw Error(ErrorKind::Missing, fmt::format("{}: tensor '{}' is indexed to shard '{}' but absent from {}",
                                                    index_path.string(), name, shard, file.path().string()));
      }
      tensor_shard_.emplace(name, &file);
    }
    for (const auto& [shard, file] : shards_) {
      for (const SafetensorsEntry& entry : file->entries()) {
        auto it = index_.weight_map.find(entry.name);
        if (it == index_.weight_map.end()) {
          throw Error(ErrorKind::Format, fmt::format("{}: tensor '{}' is in shard {} but not in the index",
                                                     index_path.string(), entry.name, file->path().string()));
        }
        if (it->second != shard) {
          throw Error(ErrorKind::Format,
                      fmt::format("{}: tensor '{}' is in shard {} but the index maps it to shard '{}'",
                                  index_path.string(), entry.name, file->path().string(), it->second));
        }
      }
    }
    return;
  }
  if (!std::filesystem::exists(single_path, ec)) {
    throw Error(ErrorKind::Missing, fmt::format("{}: neither {} nor {} found", dir.string(), kIndexFileName,
                                                kSingleFileName));
  }
  // The single file must obey the same containment rule as an indexed shard (it may be a symlink).
  auto file = std::make_unique<SafetensorsFile>(resolve_shard(dir, real_dir, single_path, kSingleFileName));
  for (const SafetensorsEntry& entry : file->entries()) {
    index_.weight_map.emplace(entry.name, kSingleFileName);
    index_.total_size += entry.bytes();
    tensor_shard_.emplace(entry.name, file.get());
  }
  shards_.emplace(kSingleFileName, std::move(file));
}

CheckpointReader::~CheckpointReader() = default;

std::vector<std::string> CheckpointReader::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(tensor_shard_.size());
  for (const auto& [name, file] : tensor_shard_) names.push_back(name);
  return names;
}

bool CheckpointReader::contains(std::string_view name) const { return tensor_shard_.find(name) != tensor_shard_.end(); }

const SafetensorsFile& CheckpointReader::shard_of(std::string_view name) const {
  auto it = tensor_shard_.find(name);
  if (it == tensor_shard_.end()) {
    throw Error(ErrorKind::Missing, fmt::format("{}: tensor '{}' not in checkpoint", dir_.string(), name));
  }
  return *it->second;
}

const SafetensorsEntry& CheckpointReader::entry(std::string_view name) const { return shard_of(name).at(name); }

std::span<const uint8_t> CheckpointReader::data(std::string_view name) const {
  const SafetensorsFile& file = shard_of(name);
  return file.data(file.at(name));
}

void CheckpointReader::release(std::string_view name) const {
  auto it = tensor_shard_.find(name);
  if (it != tensor_shard_.end()) it->second->release(name);
}

void CheckpointReader::prefetch(std::string_view name) const {
  auto it = tensor_shard_.find(name);
  if (it != tensor_shard_.end()) it->second->prefetch(name);
}

std::vector<const SafetensorsFile*> CheckpointReader::shards() const {
  std::vector<const SafetensorsFile*> out;
  out.reserve(shards_.size());
  for (const auto& [name, file] : shards_) out.push_back(file.get());
  return out;
}

const SafetensorsEntry& expect_tensor(const CheckpointReader& checkpoint, const TensorSpec& expected,
                                      const std::string& origin) {
  const SafetensorsEntry& entry = checkpoint.entry(expected.name);
  if (entry.dtype != expected.dtype || entry.shape != expected.shape) {
    throw Error(ErrorKind::Mismatch, fmt::format("{}: tensor '{}' is {} {}, the model expects {} {}", origin,
                                                 expected.name, dtype_name(entry.dtype), shape_string(entry.shape),
                                                 dtype_name(expected.dtype), shape_string(expected.shape)));
  }
  return entry;
}

}  // namespace wsb
