#pragma once
// Typed, located access to the fields of one JSON object, used by the results parser so that every error
// names the object (cell / trial / phase) and the field, and so unknown keys can be kept.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace wsb {

/// Reads fields of one JSON object. `where` names the object in messages, e.g. "cell 'a/b' trial 0".
/// Errors: std::runtime_error "<where>: missing required field 'k'" or "<where>: field 'k' must be <type>, got
/// <json type>". A JSON null counts as absent.
class FieldReader {
 public:
  /// Throws std::runtime_error when `obj` is not an object.
  FieldReader(const nlohmann::json& obj, std::string where);

  const std::string& where() const { return where_; }

  /// The value of `key` converted to T; throws when absent or of the wrong type.
  template <class T>
  T required(std::string_view key) {
    const nlohmann::json* v = find(key);
    if (v == nullptr) missing(key);
    return convert<T>(*v, key);
  }

  /// The value of `key` converted to T, or nullopt when absent; throws on the wrong type.
  template <class T>
  std::optional<T> optional(std::string_view key) {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return std::nullopt;
    return convert<T>(*v, key);
  }

  /// The raw value of `key` (nullptr when absent); marks the key as known.
  const nlohmann::json* raw(std::string_view key) { return find(key); }

  /// The keys never asked for, as an object (empty object when none).
  nlohmann::json unknown() const;

 private:
  const nlohmann::json* find(std::string_view key);
  [[noreturn]] void missing(std::string_view key) const;
  [[noreturn]] void wrong_type(std::string_view key, const char* expected, const nlohmann::json& v) const;

  template <class T>
  T convert(const nlohmann::json& v, std::string_view key) const {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) wrong_type(key, "a string", v);
      return v.get<std::string>();
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) wrong_type(key, "a boolean", v);
      return v.get<bool>();
    } else if constexpr (std::is_same_v<T, double>) {
      if (!v.is_number()) wrong_type(key, "a number", v);
      return v.get<double>();
    } else if constexpr (std::is_same_v<T, int64_t>) {
      if (!v.is_number_integer()) wrong_type(key, "an integer", v);
      return v.get<int64_t>();
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      if (!is_unsigned(v)) wrong_type(key, "a non-negative integer", v);
      return v.get<uint64_t>();
    } else if constexpr (std::is_same_v<T, std::vector<uint64_t>>) {
      if (!v.is_array()) wrong_type(key, "an array of non-negative integers", v);
      std::vector<uint64_t> out;
      for (const auto& e : v) {
        if (!is_unsigned(e)) wrong_type(key, "an array of non-negative integers", e);
        out.push_back(e.get<uint64_t>());
      }
      return out;
    } else if constexpr (std::is_same_v<T, std::map<std::string, double>>) {
      if (!v.is_object()) wrong_type(key, "an object of numbers", v);
      std::map<std::string, double> out;
      for (const auto& [k, e] : v.items()) {
        if (!e.is_number()) wrong_type(std::string(key) + "." + k, "a number", e);
        out.emplace(k, e.template get<double>());
      }
      return out;
    } else {
      static_assert(std::is_same_v<T, void>, "FieldReader: unsupported field type");
    }
  }

  static bool is_unsigned(const nlohmann::json& v) {
    return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
  }

  const nlohmann::json& obj_;
  std::string where_;
  std::set<std::string, std::less<>> known_;
};

}  // namespace wsb
