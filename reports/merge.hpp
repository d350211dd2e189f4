#pragma once
// Joining results of several hosts or shards into one fleet Results.
#include <filesystem>
#include <span>
#include <string>

#include "reports/results.hpp"

namespace wsb {

/// Merges `inputs` (labels[i] names input i in errors; "input <i>" when labels is empty).
/// - cells: concatenated in input order; a cell with an empty host takes its input's context.host;
/// - hosts: every input's `hosts` (if it was merged already) or its `context`, one entry per distinct host
///   name (first seen wins), so merging shards of one host never adds a host;
/// - context: the fields all hosts agree on, empty where they differ (host is empty for several hosts);
///   extra keeps the keys whose values all hosts share;
/// - matrix: the distinct non-empty matrix names joined with "+"; top-level extra: keys all inputs share.
/// Errors: std::runtime_error naming the input for a schema_version other than kResultsSchemaVersion;
/// std::invalid_argument when inputs is empty or labels has another size.
Results merge_results(std::span<const Results> inputs, std::span<const std::string> labels = {});

/// load_results on every path (errors name the file), then merge_results with the paths as labels.
Results merge_result_files(std::span<const std::filesystem::path> paths);

}  // namespace wsb
