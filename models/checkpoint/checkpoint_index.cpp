#include <fmt/format.h>

#include "models/checkpoint/checkpoint.hpp"
#include "models/checkpoint/file_io.hpp"
#include "models/checkpoint/strict_json.hpp"

namespace wsb {
namespace {

using nlohmann::json;

constexpr int kMaxIndexDepth = 8;  // a valid index nests 2 deep

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw Error(ErrorKind::Format, fmt::format("{}: {}", path.string(), what));
}

uint64_t parse_total_size(const json& value, const std::filesystem::path& path) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  // Tolerate a decimal string: some publishers keep every metadata value a string.
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    uint64_t n = 0;
    bool ok = !text.empty() && text.size() <= 20;
    for (char c : text) {
      if (c < '0' || c > '9' || __builtin_mul_overflow(n, uint64_t{10}, &n) ||
          __builtin_add_overflow(n, static_cast<uint64_t>(c - '0'), &n)) {
        ok = false;
        break;
      }
    }
    if (ok) return n;
  }
  fail(path, fmt::format("metadata 'total_size' {} is not a non-negative integer", value.dump()));
}

}  // namespace

void check_shard_path(const std::filesystem::path& index_path, const std::string& shard) {
  auto bad = [&](std::string_view why) {
    fail(index_path, fmt::format("shard path '{}' {}", shard, why));
  };
  if (shard.empty()) bad("is empty");
  if (shard.find('\0') != std::string::npos) bad("contains a NUL byte");
  if (shard.front() == '/') bad("is absolute");
  size_t start = 0;
  for (;;) {
    const size_t slash = shard.find('/', start);
    const std::string_view part = std::string_view(shard).substr(start, slash == std::string::npos
                                                                             ? std::string::npos
                                                                             : slash - start);
    if (part.empty()) bad("has an empty component");
    if (part == "..") bad("contains '..'");
    // "." would let two spellings name one shard and break the shard <-> index cross-check.
    if (part == ".") bad("contains '.'");
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
}

CheckpointIndex read_checkpoint_index(const std::filesystem::path& index_path) {
  const std::string text = read_text_file(index_path);
  StrictJson doc = parse_strict_json(text, index_path.string(), kMaxIndexDepth);
  const json& root = doc.value;
  if (!root.is_object()) fail(index_path, "root is not a JSON object");
  CheckpointIndex index;
  if (auto it = root.find("metadata"); it != root.end()) {
    if (!it->is_object()) fail(index_path, "metadata is not a JSON object");
    for (const auto& [key, value] : it->items()) {
      if (key == "total_size") {
        index.total_size = parse_total_size(value, index_path);
      } else if (value.is_string()) {
        index.metadata.emplace(key, value.get<std::string>());
      } else if (value.is_number()) {
        // HF writes counts such as total_parameters as numbers; keep their JSON spelling.
        index.metadata.emplace(key, value.dump());
      } else {
        fail(index_path, fmt::format("metadata '{}' value is not a string or number", key));
      }
    }
  }
  auto weight_map = root.find("weight_map");
  if (weight_map == root.end()) fail(index_path, "weight_map missing");
  if (!weight_map->is_object()) fail(index_path, "weight_map is not a JSON object");
  for (const auto& [name, shard] : weight_map->items()) {
    if (!shard.is_string()) fail(index_path, fmt::format("weight_map tensor '{}' shard is not a string", name));
    const auto& shard_name = shard.get_ref<const std::string&>();
    check_shard_path(index_path, shard_name);
    index.weight_map.emplace(name, shard_name);
  }
  return index;
}

void write_checkpoint_index(const std::filesystem::path& index_path, const CheckpointIndex& index) {
  json metadata = json::object();
  for (const auto& [key, value] : index.metadata) {
    if (key == "total_size") fail(index_path, "metadata 'total_size' is reserved (set CheckpointIndex::total_size)");
    metadata[key] = value;
  }
  metadata["total_size"] = index.total_size;
  json weight_map = json::object();
  for (const auto& [name, shard] : index.weight_map) {
    check_shard_path(index_path, shard);
    weight_map[name] = shard;
  }
  json root = json::object();
  root["metadata"] = std::move(metadata);
  root["weight_map"] = std::move(weight_map);
  std::string text;
  try {
    text = root.dump(2) + "\n";  // nlohmann::json keeps object keys sorted: deterministic bytes
  } catch (const json::type_error&) {
    fail(index_path, "metadata or weight_map holds invalid UTF-8");
  }
  // A manifest is small and is what readers trust first: always make it durable before it becomes visible.
  write_file_atomic(index_path, text, /*fsync_file=*/true);
}

}  // namespace wsb
