#pragma once
// The JSON header of a safetensors file: parsing + validation (reader side) and serialization (writer side).
// Format facts (safetensors spec, huggingface/safetensors README and its Rust `Metadata::validate`):
// entries {"dtype","shape","data_offsets":[begin,end]} relative to the data buffer; offsets sorted by begin tile
// the buffer with no hole and no overlap; end-begin == numel * dtype size; optional "__metadata__" str->str map;
// the reference writer pads the header with spaces so the data buffer starts at a multiple of 8.
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/checkpoint/safetensors.hpp"

namespace wsb {

/// A header whose entries passed every check that does not depend on the file's size.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  ///< header order
  std::map<std::string, std::string> metadata;
  uint64_t data_size = 0;  ///< bytes the entries tile: the data buffer's required size
};

/// Parses and validates header JSON of file `path` (used only in messages). Throws Error(Format) naming the file
/// and the field: invalid JSON / UTF-8, duplicate key, root not an object, __metadata__ not a str->str map,
/// entry fields missing/unknown/mistyped, unknown or sub-byte dtype, begin > end, shape/byte-count mismatch,
/// overlapping offsets, a hole between tensors.
SafetensorsHeader parse_safetensors_header(std::string_view json, const std::filesystem::path& path);

/// The header bytes (JSON + space padding) for `tensors` laid out back to back in the given order, such that
/// 8 + size is a multiple of 8. Keys: "__metadata__" first (omitted when empty), then tensors in data order,
/// each as {"dtype","shape","data_offsets"}. Throws Error(Format) naming the file and tensor for duplicate or
/// reserved names, negative dimensions, element-count overflow, invalid UTF-8.
std::string build_safetensors_header(std::span<const TensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata,
                                     const std::filesystem::path& path);

}  // namespace wsb
