#pragma once
// Canonical bytes for layout tests that compare loaders byte for byte.
#include <map>
#include <string>
#include <vector>

#include "models/profile/profile.hpp"

namespace wsb::test {

/// Every canonical tensor of `p` filled with bytes that are valid codes of every format (no NaN patterns) and
/// differ per tensor and position, so a byte taken from the wrong place shows.
inline std::map<std::string, std::vector<uint8_t>> layout_canonical(const ModelProfile& p) {
  std::map<std::string, std::vector<uint8_t>> out;
  uint64_t t = 1;
  for (const TensorSpec& s : p.canonical_tensors()) {
    auto& b = out[s.name];
    b.resize(s.bytes());
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(1 + (t * 131 + i * 7 + (i >> 9)) % 0x6F);
    ++t;
  }
  return out;
}

}  // namespace wsb::test
