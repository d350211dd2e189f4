#include <fmt/format.h>

#include "models/forward/forward.hpp"

namespace wsb {

std::vector<int32_t> tokenize_bytes(const std::string& text) {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<int32_t>(static_cast<unsigned char>(c)));
  return ids;
}

std::string detokenize(const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids) {
    if (id >= 0 && id < 256) {
      text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    } else {
      text += fmt::format("<|{}|>", id);
    }
  }
  return text;
}

}  // namespace wsb
