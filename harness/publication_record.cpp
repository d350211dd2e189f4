#include "harness/publication_record.hpp"

namespace wsb {

nlohmann::json publication_json(const PublicationStats& p) {
  nlohmann::json changes = nlohmann::json::object();
  for (const auto& [name, count] : p.changes) {
    const double density =
        count.elements == 0 ? 0.0 : static_cast<double>(count.changed) / static_cast<double>(count.elements);
    changes[name] = {{"elements", count.elements}, {"changed", count.changed}, {"density", density}};
  }
  nlohmann::json j{{"version", p.version},
                   {"full", p.full},
                   {"canonical_bytes", p.canonical_bytes},
                   {"stored_bytes", p.stored_bytes},
                   {"changed_values", p.changed_values},
                   {"seconds", p.seconds},
                   {"density", p.density()},
                   {"compression_ratio", p.compression_ratio()},
                   {"changes", changes}};
  if (p.encoding) {
    j["encoding"] = std::string(delta_encoding_name(*p.encoding));
    j["payload_bytes"] = p.payload_bytes;
  }
  if (!p.source.empty()) j["source"] = p.source.string();
  return j;
}

}  // namespace wsb
