#pragma once
// Typed access to the fields of one JSON object, with errors that name the file and the dotted field path.
// Used by the profile parser (models/profiles/*.json) and by profile_from_hf_dir (config.json).
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace wsb {

/// Reads fields of `object`; `origin` (a file path) and `path` (dotted prefix, "" at top level) name them in
/// errors. A JSON null counts as absent. Every accessor throws Error(Format)
/// "<origin>: field '<path.key>': <why>" on a missing required field or a wrong type.
class JsonFields {
 public:
  /// Throws Error(Format) when `object` is not a JSON object.
  JsonFields(const nlohmann::json& object, std::string origin, std::string path = "");

  bool has(std::string_view key) const;
  /// Required non-empty string.
  std::string string(std::string_view key) const;
  std::optional<std::string> optional_string(std::string_view key) const;
  /// Required integer in [INT32_MIN, INT32_MAX] (a JSON number without fraction; 4096.0 is rejected).
  int integer(std::string_view key) const;
  std::optional<int> optional_integer(std::string_view key) const;
  /// Required number (integer or float).
  double number(std::string_view key) const;
  std::optional<double> optional_number(std::string_view key) const;
  std::optional<bool> optional_boolean(std::string_view key) const;
  /// Nested object; throws if absent or not an object.
  JsonFields object(std::string_view key) const;
  std::optional<JsonFields> optional_object(std::string_view key) const;
  /// Throws naming the first key of the object not in `known` (catches misspelt keys).
  void reject_unknown(std::initializer_list<std::string_view> known) const;
  /// Dotted path of `key` under this object, e.g. "dims.hidden".
  std::string field(std::string_view key) const;
  /// Throws Error(Format) "<origin>: field '<path.key>': <why>".
  [[noreturn]] void fail(std::string_view key, std::string_view why) const;
  const std::string& origin() const { return origin_; }
  /// Dotted path of this object ("" at top level).
  const std::string& path() const { return path_; }
  /// The object itself (for comparisons of whole sub-objects).
  const nlohmann::json& value() const { return *object_; }

 private:
  const nlohmann::json* find(std::string_view key) const;
  const nlohmann::json& require(std::string_view key) const;

  const nlohmann::json* object_;
  std::string origin_;
  std::string path_;
};

}  // namespace wsb
