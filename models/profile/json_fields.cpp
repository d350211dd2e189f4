#include "models/profile/json_fields.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "core/errors.hpp"

namespace wsb {

namespace {

std::string type_of(const nlohmann::json& v) { return v.type_name(); }

}  // namespace

JsonFields::JsonFields(const nlohmann::json& object, std::string origin, std::string path)
    : object_(&object), origin_(std::move(origin)), path_(std::move(path)) {
  if (!object.is_object()) {
    std::string where = path_.empty() ? "top level" : fmt::format("field '{}'", path_);
    throw Error(ErrorKind::Format,
                fmt::format("{}: {}: expected a JSON object, got {}", origin_, where, type_of(object)));
  }
}

std::string JsonFields::field(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

void JsonFields::fail(std::string_view key, std::string_view why) const {
  throw Error(ErrorKind::Format, fmt::format("{}: field '{}': {}", origin_, field(key), why));
}

const nlohmann::json* JsonFields::find(std::string_view key) const {
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

const nlohmann::json& JsonFields::require(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) fail(key, "missing");
  return *v;
}

bool JsonFields::has(std::string_view key) const { return find(key) != nullptr; }

std::string JsonFields::string(std::string_view key) const {
  const nlohmann::json& v = require(key);
  if (!v.is_string()) fail(key, fmt::format("expected a string, got {}", type_of(v)));
  auto s = v.get<std::string>();
  if (s.empty()) fail(key, "must not be empty");
  return s;
}

std::optional<std::string> JsonFields::optional_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const nlohmann::json& v = require(key);
  if (!v.is_string()) fail(key, fmt::format("expected a string, got {}", type_of(v)));
  return v.get<std::string>();
}

int JsonFields::integer(std::string_view key) const {
  const nlohmann::json& v = require(key);
  if (!v.is_number_integer()) fail(key, fmt::format("expected an integer, got {} {}", type_of(v), v.dump()));
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int>::max()))
      fail(key, fmt::format("{} is out of range", v.dump()));
    return static_cast<int>(v.get<uint64_t>());
  }
  int64_t x = v.get<int64_t>();
  if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
    fail(key, fmt::format("{} is out of range", v.dump()));
  return static_cast<int>(x);
}

std::optional<int> JsonFields::optional_integer(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return integer(key);
}

double JsonFields::number(std::string_view key) const {
  const nlohmann::json& v = require(key);
  if (!v.is_number()) fail(key, fmt::format("expected a number, got {} {}", type_of(v), v.dump()));
  return v.get<double>();
}

std::optional<double> JsonFields::optional_number(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return number(key);
}

std::optional<bool> JsonFields::optional_boolean(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const nlohmann::json& v = require(key);
  if (!v.is_boolean()) fail(key, fmt::format("expected true or false, got {} {}", type_of(v), v.dump()));
  return v.get<bool>();
}

JsonFields JsonFields::object(std::string_view key) const { return JsonFields(require(key), origin_, field(key)); }

std::optional<JsonFields> JsonFields::optional_object(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return object(key);
}

void JsonFields::reject_unknown(std::initializer_list<std::string_view> known) const {
  for (const auto& [key, value] : object_->items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (!ok) fail(key, fmt::format("unknown field (known: {})", fmt::join(known, ", ")));
  }
}

}  // namespace wsb
