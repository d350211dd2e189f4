#include <set>

#include <fmt/format.h>

#include "models/checkpoint/safetensors_header.hpp"
#include "models/checkpoint/strict_json.hpp"

namespace wsb {

std::string build_safetensors_header(std::span<const TensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata,
                                     const std::filesystem::path& path) {
  const std::string file = path.string();
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) json += ',';
      first = false;
      json += json_quote(key, fmt::format("{}: __metadata__ key", file));
      json += ':';
      json += json_quote(value, fmt::format("{}: __metadata__ '{}' value", file, key));
    }
    json += "},";
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const TensorSpec& spec : tensors) {
    if (spec.name == "__metadata__") {
      throw Error(ErrorKind::Format, fmt::format("{}: tensor name '__metadata__' is reserved", file));
    }
    if (!names.insert(spec.name).second) {
      throw Error(ErrorKind::Format, fmt::format("{}: tensor '{}' declared twice", file, spec.name));
    }
    uint64_t bytes = dtype_size(spec.dtype);
    for (int64_t dim : spec.shape) {
      if (dim < 0) {
        throw Error(ErrorKind::Format, fmt::format("{}: tensor '{}' shape {} has a negative dimension", file,
                                                   spec.name, shape_string(spec.shape)));
      }
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
        throw Error(ErrorKind::Format, fmt::format("{}: tensor '{}' shape {} byte count overflows 64 bits", file,
                                                   spec.name, shape_string(spec.shape)));
      }
    }
    fmt::format_to(std::back_inserter(json), "{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}},",
                   json_quote(spec.name, fmt::format("{}: tensor name", file)), dtype_name(spec.dtype),
                   fmt::join(spec.shape, ","), offset, offset + bytes);
    offset += bytes;
  }
  if (json.back() == ',') json.pop_back();
  json += '}';
  // Same padding rule as the reference writer: the data buffer then starts 8-byte aligned in the file.
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

}  // namespace wsb
