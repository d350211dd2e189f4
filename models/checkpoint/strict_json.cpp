#include "models/checkpoint/strict_json.hpp"

#include <set>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {

StrictJson parse_strict_json(std::string_view text, const std::string& context, int max_depth) {
  using Event = nlohmann::json::parse_event_t;
  StrictJson out;
  std::vector<std::set<std::string>> open_objects;  // keys seen so far, one set per open object
  std::string root_key;                             // names the entry a nested duplicate belongs to
  auto callback = [&](int depth, Event event, nlohmann::json& parsed) -> bool {
    if (depth > max_depth) {
      throw Error(ErrorKind::Format, fmt::format("{}: JSON nested deeper than {}", context, max_depth));
    }
    switch (event) {
      case Event::object_start: open_objects.emplace_back(); break;
      case Event::object_end: open_objects.pop_back(); break;
      case Event::key: {
        std::string key = parsed.get<std::string>();
        if (!open_objects.back().insert(key).second) {
          throw Error(ErrorKind::Format,
                      depth == 1 ? fmt::format("{}: duplicate key '{}'", context, key)
                                 : fmt::format("{}: duplicate key '{}' in '{}'", context, key, root_key));
        }
        if (depth == 1) {
          root_key = key;
          out.root_keys.push_back(std::move(key));
        }
        break;
      }
      default: break;
    }
    return true;
  };
  try {
    out.value = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann validates UTF-8 inside strings; report it apart so a binary-garbage header reads clearly.
    const bool utf8 = std::string_view(e.what()).find("UTF-8") != std::string_view::npos;
    throw Error(ErrorKind::Format, utf8 ? fmt::format("{}: invalid UTF-8 at byte {}", context, e.byte)
                                        : fmt::format("{}: invalid JSON: {}", context, e.what()));
  } catch (const nlohmann::json::exception& e) {
    // A number beyond double's range (1e400) is refused with out_of_range.406, not parse_error; found by
    // fuzz/fuzz_safetensors_header.
    throw Error(ErrorKind::Format, fmt::format("{}: invalid JSON: {}", context, e.what()));
  }
  return out;
}

std::string json_quote(std::string_view text, const std::string& context) {
  try {
    return nlohmann::json(std::string(text)).dump();
  } catch (const nlohmann::json::type_error&) {
    throw Error(ErrorKind::Format, fmt::format("{}: invalid UTF-8", context));
  }
}

}  // namespace wsb
