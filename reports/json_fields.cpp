#include "reports/json_fields.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace wsb {

FieldReader::FieldReader(const nlohmann::json& obj, std::string where) : obj_(obj), where_(std::move(where)) {
  if (!obj_.is_object()) {
    throw std::runtime_error(fmt::format("{}: expected a JSON object, got {}", where_, obj_.type_name()));
  }
}

const nlohmann::json* FieldReader::find(std::string_view key) {
  known_.emplace(key);
  auto it = obj_.find(std::string(key));
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

nlohmann::json FieldReader::unknown() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : obj_.items()) {
    if (known_.find(k) == known_.end()) out[k] = v;
  }
  return out;
}

void FieldReader::missing(std::string_view key) const {
  throw std::runtime_error(fmt::format("{}: missing required field '{}'", where_, key));
}

void FieldReader::wrong_type(std::string_view key, const char* expected, const nlohmann::json& v) const {
  std::string shown = v.dump();
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";  // keep messages one line for large objects
  throw std::runtime_error(
      fmt::format("{}: field '{}' must be {}, got {} {}", where_, key, expected, v.type_name(), shown));
}

}  // namespace wsb
