#pragma once
// The recorded HTTP weight-update protocols of the engines wsbench speaks to (tests/fixtures/protocols/<protocol>/
// <endpoint>.json, described in tests/fixtures/protocols/NOTES.md) and a checker of JSON bodies against their
// field tables.
//
// A field table is the "request" or "response" object of a fixture:
//   "fields":   path -> type; paths are dotted for nested objects ("meta_info.weight_version") and use "[]" for
//               array elements ("ranks[].checksums", "meta_info.output_token_logprobs[][]"); types are string,
//               integer, number, boolean, object, array, null, joined with "|" for unions. "number" accepts
//               integers. An object-typed path with no declared children is a free map (not descended into).
//   "required": paths that must be present whenever their parent object is.
//   "enums":    path -> allowed values.
//   "one_of":   groups of top-level keys of which at least one must be present.
//   "open":     object paths whose undeclared keys are allowed ("" is the body itself).
#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#ifndef WSBENCH_FIXTURES_DIR
#error "WSBENCH_FIXTURES_DIR (the tests/fixtures folder) must be defined"
#endif

namespace wsb::test {

/// tests/fixtures/protocols
inline std::filesystem::path protocol_fixtures_root() {
  return std::filesystem::path(WSBENCH_FIXTURES_DIR) / "protocols";
}

/// The protocol folders (sorted), e.g. "sglang", "vllm".
inline std::vector<std::string> list_protocols() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(protocol_fixtures_root())) {
    if (entry.is_directory()) out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The fixture file names of one protocol (sorted), e.g. "generate.json". Throws when the protocol folder is missing.
inline std::vector<std::string> list_protocol_fixtures(const std::string& protocol) {
  const auto dir = protocol_fixtures_root() / protocol;
  if (!std::filesystem::is_directory(dir)) {
    throw std::runtime_error("no protocol fixture folder " + dir.string());
  }
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// One fixture, by file name with or without ".json" ("update_weights_from_disk"). Throws on a missing file or bad JSON.
inline nlohmann::json load_protocol_fixture(const std::string& protocol, const std::string& file) {
  std::string name = file;
  if (name.size() < 5 || name.compare(name.size() - 5, 5, ".json") != 0) name += ".json";
  const auto path = protocol_fixtures_root() / protocol / name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open protocol fixture " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error("protocol fixture " + path.string() + " is not JSON: " + e.what());
  }
}

/// The fixture type name of a JSON value: null, boolean, integer, number, string, array, object.
inline std::string json_kind(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "integer";
    case nlohmann::json::value_t::number_float: return "number";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::object: return "object";
    default: return "unsupported";
  }
}

/// The members of a "|" union ("string|null" -> {"string", "null"}).
inline std::vector<std::string> split_type_union(std::string_view type) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= type.size()) {
    const std::size_t bar = type.find('|', start);
    const std::size_t end = bar == std::string_view::npos ? type.size() : bar;
    out.emplace_back(type.substr(start, end - start));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return out;
}

/// Whether a value matches a fixture type (a union of type names; "number" also accepts integers).
inline bool type_accepts(std::string_view type, const nlohmann::json& v) {
  const std::string kind = json_kind(v);
  for (const auto& t : split_type_union(type)) {
    if (t == kind || (t == "number" && kind == "integer")) return true;
  }
  return false;
}

namespace protocol_detail {

/// The parent of a normalized path: "a.b" -> "a", "a[]" -> "a", "a[].b" -> "a[]", "a" -> "".
inline std::string parent_path(const std::string& path) {
  if (path.size() >= 2 && path.compare(path.size() - 2, 2, "[]") == 0) return path.substr(0, path.size() - 2);
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

inline std::string join_key(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

inline std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", \"" : "\"") + names[i] + "\"";
  return out;
}

class Checker {
 public:
  explicit Checker(const nlohmann::json& table) : table_(table) {
    if (!table.is_object() || !table.contains("fields") || !table.at("fields").is_object()) {
      throw std::invalid_argument("a field table needs a \"fields\" object");
    }
    fields_ = &table.at("fields");
    if (table.contains("required")) {
      for (const auto& r : table.at("required")) required_.push_back(r.get<std::string>());
    }
    if (table.contains("open")) {
      for (const auto& o : table.at("open")) open_.insert(o.get<std::string>());
    }
    if (table.contains("enums")) enums_ = &table.at("enums");
  }

  std::vector<std::string> run(const nlohmann::json& body) {
    if (!body.is_object()) {
      out_.push_back("body: expected object, got " + json_kind(body));
      return out_;
    }
    walk_object(body, "", "");
    if (table_.contains("one_of")) {
      for (const auto& group : table_.at("one_of")) {
        std::vector<std::string> names;
        bool any = false;
        for (const auto& name : group) {
          names.push_back(name.get<std::string>());
          any = any || body.contains(names.back());
        }
        if (!any) out_.push_back("missing one of " + quoted_list(names));
      }
    }
    return out_;
  }

 private:
  bool has_children(const std::string& path) const {
    const std::string prefix = path + ".";
    for (const auto& item : fields_->items()) {
      if (item.key().compare(0, prefix.size(), prefix) == 0) return true;
    }
    return false;
  }

  void walk_object(const nlohmann::json& obj, const std::string& path, const std::string& shown) {
    for (const auto& item : obj.items()) {
      const std::string child = join_key(path, item.key());
      const std::string child_shown = join_key(shown, item.key());
      if (!fields_->contains(child)) {
        if (!open_.count(path)) out_.push_back("unknown field \"" + child_shown + "\"");
        continue;
      }
      check(item.value(), child, child_shown);
    }
    for (const auto& r : required_) {
      if (parent_path(r) != path || r.size() <= path.size()) continue;
      const std::string key = path.empty() ? r : r.substr(path.size() + 1);
      if (!obj.contains(key)) out_.push_back("missing required field \"" + join_key(shown, key) + "\"");
    }
  }

  void check(const nlohmann::json& v, const std::string& path, const std::string& shown) {
    const std::string type = fields_->at(path).get<std::string>();
    if (!type_accepts(type, v)) {
      out_.push_back("field \"" + shown + "\": expected " + type + ", got " + json_kind(v));
      return;
    }
    if (enums_ != nullptr && enums_->contains(path) && !v.is_null()) {
      const auto& allowed = enums_->at(path);
      if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
        std::string names;
        for (const auto& a : allowed) names += (names.empty() ? "" : "|") + (a.is_string() ? a.get<std::string>() : a.dump());
        out_.push_back("field \"" + shown + "\": " + v.dump() + " is not one of " + names);
        return;
      }
    }
    if (v.is_object() && has_children(path)) {
      walk_object(v, path, shown);
    } else if (v.is_array() && fields_->contains(path + "[]")) {
      for (std::size_t i = 0; i < v.size(); ++i) check(v[i], path + "[]", shown + "[" + std::to_string(i) + "]");
    }
  }

  const nlohmann::json& table_;
  const nlohmann::json* fields_ = nullptr;
  const nlohmann::json* enums_ = nullptr;
  std::vector<std::string> required_;
  std::set<std::string> open_;
  std::vector<std::string> out_;
};

}  // namespace protocol_detail

/// One human-readable line per problem of `body` against a field table: an unknown field, a wrong type, a value
/// outside its enum, a missing required field, a missing one_of group. Array elements are named by index
/// ("ranks[0].per_gpu_checksum"). Empty when the body conforms. Throws std::invalid_argument on a table without
/// "fields".
inline std::vector<std::string> field_violations(const nlohmann::json& table, const nlohmann::json& body) {
  return protocol_detail::Checker(table).run(body);
}

}  // namespace wsb::test
