#include "reports/publication_table.hpp"

#include <fmt/format.h>

#include "reports/config_key.hpp"

namespace wsb {
namespace {

using nlohmann::json;

Value number_at(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? Value(it->get<double>()) : Value();
}

Value text_at(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? Value(it->get<std::string>()) : Value();
}

/// The publication of `version` in the cell's record, or null.
const json* publication_of(const Cell& cell, uint64_t version) {
  const auto it = cell.extra.find("publications");
  if (it == cell.extra.end() || !it->is_array()) return nullptr;
  for (const json& p : *it) {
    if (p.is_object() && p.value("version", uint64_t{0}) == version) return &p;
  }
  return nullptr;
}

Value by_class(const json& publication) {
  const auto it = publication.find("changes");
  if (it == publication.end() || !it->is_object()) return {};
  std::vector<std::string> parts;
  for (const auto& [name, count] : it->items()) {
    if (count.contains("density") && count["density"].is_number()) {
      parts.push_back(fmt::format("{} {:.2f}%", name, 100 * count["density"].get<double>()));
    }
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

Value source_of(const Cell& cell, const json& publication) {
  if (const Value source = text_at(publication, "source"); source.type() == Value::Type::Text) {
    // The synthetic publisher records its v0 checkpoint on every version; a real delta records its own directory.
    const bool real = cell.extra.contains("checkpoints");
    return real ? source : Value("synthetic on " + source.text());
  }
  return {};
}

}  // namespace

bool any_checkpoint_cell(std::span<const Cell> cells) {
  for (const Cell& c : cells) {
    if (c.extra.contains("checkpoint")) return true;
  }
  return false;
}

Table publication_table(std::span<const Cell> cells) {
  Table t;
  t.columns = {{"Model", MetricKind::Text},    {"Mode", MetricKind::Text},         {"Runtime", MetricKind::Text},
               {"Version", MetricKind::Count}, {"Encoding", MetricKind::Text},     {"Changed", MetricKind::Percent},
               {"By class", MetricKind::Text}, {"Stored", MetricKind::Bytes},      {"Compression", MetricKind::Ratio},
               {"Source", MetricKind::Text}};
  std::vector<ConfigKey> keys;
  for (const Cell& c : cells) keys.push_back(config_key(c));
  const std::vector<std::string> labels = model_labels(keys);
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    if (!c.extra.contains("checkpoint")) continue;
    const uint64_t target = c.extra.value("target", uint64_t{1});
    const json* p = publication_of(c, target);
    if (p == nullptr) {
      t.rows.push_back({labels[i], c.mode_label(), c.runtime, static_cast<double>(target), {}, {}, {}, {}, {}, {}});
      continue;
    }
    Value changed = number_at(*p, "density");
    if (changed.type() == Value::Type::Number) changed = Value(100 * changed.number());
    t.rows.push_back({labels[i], c.mode_label(), c.runtime, static_cast<double>(target), text_at(*p, "encoding"),
                      changed, by_class(*p), number_at(*p, "stored_bytes"), number_at(*p, "compression_ratio"),
                      source_of(c, *p)});
  }
  return t;
}

}  // namespace wsb
