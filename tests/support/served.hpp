#pragma once
// What an engine serves, for tests that compare an updated engine with a fresh native load: the weight version,
// every rank's storage checksums and the fingerprint of one fixed greedy probe.
#include <map>
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

/// Served state of `engine`, its fingerprint from a greedy probe of `prompt` (bytes as tokens), 6 new tokens.
inline Served served(Engine& engine, const std::string& prompt) {
  GenerateRequest r;
  r.input_ids = tokenize_bytes(prompt);
  r.max_new_tokens = 6;
  return {engine.weight_version(), engine.storage_checksums(), fingerprint(engine.generate(r))};
}

}  // namespace wsb::test
