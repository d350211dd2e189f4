#include "harness/shard.hpp"

#include <fmt/format.h>

#include <charconv>

#include "core/errors.hpp"

namespace wsb {
namespace {

/// The decimal number `s` is, or -1.
long long parse_count(const std::string& s) {
  if (s.empty() || s.size() > 9) return -1;
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return -1;
  return v;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  auto fail = [&](const std::string& why) -> Shard {
    throw Error(ErrorKind::Format, fmt::format("--shard '{}': {}", text, why));
  };
  const auto slash = text.find('/');
  if (slash == std::string::npos) return fail("expected K/N (0-based shard K of N shards, e.g. 0/4)");
  const long long k = parse_count(text.substr(0, slash));
  const long long n = parse_count(text.substr(slash + 1));
  if (k < 0 || n < 0) return fail("K and N must be decimal integers >= 0 (e.g. 0/4)");
  if (n < 1 || n > 100000) return fail("N must be 1..100000");
  if (k >= n) return fail(fmt::format("K must be 0..{} (0-based) for N = {}", n - 1, n));
  return Shard{static_cast<int>(k), static_cast<int>(n)};
}

std::vector<MatrixCell> shard_cells(const std::vector<MatrixCell>& cells, const Shard& shard) {
  std::vector<MatrixCell> out;
  for (size_t i = static_cast<size_t>(shard.index); i < cells.size(); i += static_cast<size_t>(shard.count)) {
    out.push_back(cells[i]);
  }
  return out;
}

}  // namespace wsb
