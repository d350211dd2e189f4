#include "core/weight_version.hpp"

#include <fmt/format.h>

#include <limits>

#include "core/errors.hpp"

namespace wsb {

WeightVersion WeightVersion::parse(const std::string& text) {
  WeightVersion v{text, std::nullopt};
  if (text.empty() || text.size() > 10) return v;
  uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return v;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (n <= std::numeric_limits<uint32_t>::max()) v.value = static_cast<uint32_t>(n);
  return v;
}

WeightVersion WeightVersion::of(uint32_t version) { return parse(fmt::format("{:06d}", version)); }

WeightVersion WeightVersion::from_json(const nlohmann::json& j, const std::string& where) {
  if (j.is_string()) return parse(j.get<std::string>());
  if (j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0)) {
    return parse(std::to_string(j.get<uint64_t>()));
  }
  throw Error(ErrorKind::Format,
              fmt::format("{}: weight version must be a string or a non-negative integer, got {}", where, j.dump()));
}

std::string describe(const WeightVersion& version) {
  if (version.is_default()) return "\"default\" (the server's boot version)";
  if (version.value) return version.text;
  return fmt::format("\"{}\"", version.text);
}

}  // namespace wsb
