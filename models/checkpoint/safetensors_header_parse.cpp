#include <algorithm>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "models/checkpoint/safetensors_header.hpp"
#include "models/checkpoint/strict_json.hpp"

namespace wsb {
namespace {

using nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";
// A well-formed header nests 3 deep (root > entry > shape); the margin lets field checks name the bad field.
constexpr int kMaxHeaderDepth = 8;

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw Error(ErrorKind::Format, fmt::format("{}: {}", path.string(), what));
}

std::map<std::string, std::string> parse_metadata(const json& value, const std::filesystem::path& path) {
  if (!value.is_object()) fail(path, "__metadata__ is not a JSON object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) fail(path, fmt::format("__metadata__ '{}' value is not a string", key));
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

DType parse_entry_dtype(const json& value, const std::string& name, const std::filesystem::path& path) {
  if (!value.is_string()) fail(path, fmt::format("tensor '{}' dtype is not a string", name));
  const auto& text = value.get_ref<const std::string&>();
  auto dtype = parse_dtype(text);
  // Sub-byte types (F4, F6_E2M3, F6_E3M2) land here too: wsbench stores packed FP4 as U8.
  if (!dtype) fail(path, fmt::format("tensor '{}' dtype '{}' unknown", name, text));
  return *dtype;
}

Shape parse_entry_shape(const json& value, const std::string& name, const std::filesystem::path& path) {
  if (!value.is_array()) fail(path, fmt::format("tensor '{}' shape is not an array", name));
  Shape shape;
  for (const auto& dim : value) {
    if (!dim.is_number_unsigned() ||
        dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(path, fmt::format("tensor '{}' shape {} has a dimension that is not a non-negative integer", name,
                             value.dump()));
    }
    shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
  }
  return shape;
}

// numel * dtype size without wrapping: a wrapped product could match a small offset range.
uint64_t checked_bytes(const Shape& shape, DType dtype, const std::string& name, const std::filesystem::path& path) {
  uint64_t bytes = dtype_size(dtype);
  for (int64_t dim : shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      fail(path, fmt::format("tensor '{}' shape {} byte count overflows 64 bits", name, shape_string(shape)));
    }
  }
  return bytes;
}

SafetensorsEntry parse_entry(const std::string& name, const json& value, const std::filesystem::path& path) {
  if (!value.is_object()) fail(path, fmt::format("tensor '{}' entry is not a JSON object", name));
  for (const auto& [key, item] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail(path, fmt::format("tensor '{}' has unknown field '{}'", name, key));
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) fail(path, fmt::format("tensor '{}' has no {}", name, key));
  }
  SafetensorsEntry entry;
  entry.name = name;
  entry.dtype = parse_entry_dtype(value.at("dtype"), name, path);
  entry.shape = parse_entry_shape(value.at("shape"), name, path);
  const json& offsets = value.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    fail(path, fmt::format("tensor '{}' data_offsets {} are not two non-negative integers", name, offsets.dump()));
  }
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();
  if (entry.begin > entry.end) {
    fail(path, fmt::format("tensor '{}' data_offsets [{}, {}] begin > end", name, entry.begin, entry.end));
  }
  const uint64_t needed = checked_bytes(entry.shape, entry.dtype, name, path);
  if (needed != entry.bytes()) {
    fail(path, fmt::format("tensor '{}' dtype {} shape {} needs {} bytes but data_offsets [{}, {}] hold {}", name,
                           dtype_name(entry.dtype), shape_string(entry.shape), needed, entry.begin, entry.end,
                           entry.bytes()));
  }
  return entry;
}

// Entries sorted by (begin, end) must follow each other exactly; zero-size entries may sit at a boundary
// (the reference writer gives them the offset of the next tensor). Returns the end of the tiled range.
uint64_t check_tiling(const std::vector<SafetensorsEntry>& entries, const std::filesystem::path& path) {
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(entries[a].begin, entries[a].end) < std::pair(entries[b].begin, entries[b].end);
  });
  uint64_t cursor = 0;
  const SafetensorsEntry* previous = nullptr;  // the entry that ends at `cursor`
  for (size_t i : order) {
    const SafetensorsEntry& e = entries[i];
    if (e.begin < cursor) {
      fail(path, fmt::format("tensor '{}' data_offsets [{}, {}] overlap tensor '{}' data_offsets [{}, {}]", e.name,
                             e.begin, e.end, previous->name, previous->begin, previous->end));
    }
    if (e.begin > cursor) {
      fail(path, previous == nullptr
                     ? fmt::format("tensor '{}' data_offsets [{}, {}] leave a hole: data bytes [0, {}) unused",
                                   e.name, e.begin, e.end, e.begin)
                     : fmt::format("tensor '{}' data_offsets [{}, {}] leave a hole of {} bytes after tensor '{}' "
                                   "data_offsets [{}, {}]",
                                   e.name, e.begin, e.end, e.begin - cursor, previous->name, previous->begin,
                                   previous->end));
    }
    cursor = e.end;
    previous = &e;
  }
  return cursor;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::string_view text, const std::filesystem::path& path) {
  StrictJson doc = parse_strict_json(text, path.string() + ": header", kMaxHeaderDepth);
  if (!doc.value.is_object()) fail(path, "header: root is not a JSON object");
  SafetensorsHeader header;
  header.entries.reserve(doc.root_keys.size());
  for (const std::string& key : doc.root_keys) {
    const json& value = doc.value.at(key);
    if (key == kMetadataKey) {
      header.metadata = parse_metadata(value, path);
    } else {
      header.entries.push_back(parse_entry(key, value, path));
    }
  }
  header.data_size = check_tiling(header.entries, path);
  return header;
}

}  // namespace wsb
