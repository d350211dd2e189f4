#pragma once
// Reading and writing results.json files.
#include <filesystem>

#include "reports/results.hpp"

namespace wsb {

/// Reads and validates a results.json. Errors: std::runtime_error whose message starts with the path — the
/// file cannot be opened, is not valid JSON, has another schema_version, or lacks a required field (the message
/// then also names the cell / trial and field, see results_json.hpp).
Results load_results(const std::filesystem::path& path);

/// Writes `results` as indented JSON (2 spaces, keys sorted), replacing the file atomically (temp file + rename)
/// so a reader never sees half a file. Errors: std::runtime_error naming the path when it cannot be written.
void save_results(const std::filesystem::path& path, const Results& results);

}  // namespace wsb
