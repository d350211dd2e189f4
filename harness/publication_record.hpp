#pragma once
// How a cell's results record the publications it measured (Cell extra "publications", one object per version).
#include <nlohmann/json.hpp>

#include "publisher/publisher.hpp"

namespace wsb {

/// {version, full, canonical_bytes, stored_bytes, changed_values, seconds, density, compression_ratio,
///  changes: {CLASS: {elements, changed, density}}} plus, for a DELTA, encoding and payload_bytes {ENCODING: bytes}
/// (both encodings when the cell chose automatically), and source (the checkpoint directory) when one was read.
/// density = changed / elements over change_class units (publisher.hpp); compression_ratio = canonical / stored
/// bytes.
nlohmann::json publication_json(const PublicationStats& stats);

}  // namespace wsb
