#pragma once
// What an engine serves, for tests that compare an updated engine with a fresh native load: the weight version,
// every rank's storage checksums and the fingerprint of one fixed greedy probe.
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "models/forward/forward.hpp"

namespace wsb::test {

struct Served {
  uint32_t version;
  std::vector<std::map<std::string, std::string>> checksums;
  std::string fingerprint;
  bool operator==(const Served&) const = default;
};

/// GoogleTest printer: a failed comparison shows version, fingerprint and checksums instead of the struct's bytes.
inline void PrintTo(const Served& s, std::ostream* os) {
  *os << "{version " << s.version << ", fingerprint " << s.fingerprint;
  for (size_t r = 0; r < s.checksums.size(); ++r) {
    *os << "\n  rank " << r << ":";
    for (const auto& [name, hex] : s.checksums[r]) *os << " " << name << "=" << hex;
  }
  *os << "}";
}

/// Served state of `engine`, its fingerprint from a greedy probe of `prompt` (bytes as tokens), `max_new_tokens`
/// new tokens.
inline Served served(Engine& engine, const std::string& prompt, int max_new_tokens = 6) {
  GenerateRequest r;
  r.input_ids = tokenize_bytes(prompt);
  r.max_new_tokens = max_new_tokens;
  return {engine.weight_version(), engine.storage_checksums(), fingerprint(engine.generate(r))};
}

}  // namespace wsb::test
