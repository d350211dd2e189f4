#include "reports/refit_table.hpp"

#include <fmt/format.h>

namespace wsb {
namespace {

const Trial* streams_of(const Cell& cell) {
  for (const Trial& t : cell.trials) {
    if (!t.refit_streams.empty()) return &t;
  }
  return nullptr;
}

}  // namespace

bool any_refit_streams(std::span<const Cell> cells) {
  for (const Cell& c : cells) {
    if (streams_of(c) != nullptr) return true;
  }
  return false;
}

Table refit_table(std::span<const Cell> cells) {
  Table t;
  t.columns = {{"Cell", MetricKind::Text},
               {"Mode", MetricKind::Text},
               {"Bucket", MetricKind::Bytes},
               {"Buckets per rank", MetricKind::Text},
               {"Streamed per rank", MetricKind::Text}};
  for (const Cell& c : cells) {
    const Trial* trial = streams_of(c);
    if (trial == nullptr) continue;
    std::vector<std::string> buckets, bytes;
    for (const RankStream& s : trial->refit_streams) {
      buckets.push_back(fmt::format("{}", s.buckets));
      bytes.push_back(format_bytes(static_cast<double>(s.bytes)));
    }
    const uint64_t bucket = c.sync.refit.bucket_bytes;
    t.rows.push_back({c.id, c.mode_label(), bucket == 0 ? Value() : Value(static_cast<double>(bucket)),
                      fmt::format("{}", fmt::join(buckets, ", ")), fmt::format("{}", fmt::join(bytes, ", "))});
  }
  return t;
}

}  // namespace wsb
