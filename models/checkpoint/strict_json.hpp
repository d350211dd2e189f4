#pragma once
// JSON parsing for checkpoint headers and indexes, stricter than nlohmann's defaults: RFC 8259 leaves duplicate
// keys undefined and nlohmann silently keeps the last one, which would let two readers of one file disagree.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace wsb {

/// A parsed document plus the order of the root object's keys (nlohmann::json stores keys sorted).
struct StrictJson {
  nlohmann::json value;
  std::vector<std::string> root_keys;  ///< root object keys in document order (empty if root is no object)
};

/// Parses `text`. `context` prefixes every message, e.g. "<path>: header". Throws Error(Format) on invalid
/// JSON, a number beyond double's range included ("invalid JSON"), invalid UTF-8 ("invalid UTF-8"), a duplicate key at any depth ("duplicate key 'k'"),
/// or nesting deeper than `max_depth` (bounds memory on hostile input).
StrictJson parse_strict_json(std::string_view text, const std::string& context, int max_depth);

/// Serializes a string as a JSON string literal. Throws Error(Format) with `context` on invalid UTF-8.
std::string json_quote(std::string_view text, const std::string& context);

}  // namespace wsb
