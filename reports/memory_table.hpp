#pragma once
// Memory table, one row per cell, from each trial's "memory" block (harness/profiler.cpp):
//   Model | Mode | Runtime | n | Peak RSS | Prepare peak RSS | Commit peak RSS | cgroup peak | MemAvailable min |
//   Page cache max | Device used peak | Mode buffers
// Peak RSS = max over trials of rss_peak_bytes (VmHWM of the trial); Prepare / Commit peak RSS = the sampler's
// prepare_peak.rss_peak_bytes / commit_peak.rss_peak_bytes; cgroup peak = the sampled maximum of the cgroup's
// memory.current (v1: memory.usage_in_bytes) during prepare and commit; MemAvailable min = the lowest
// mem_available_bytes of the end-of-trial snapshot and the sampler minima; Page cache max = the highest
// cached_bytes likewise; Device used peak = the highest device_used_bytes of any GPU (snapshot and sampler;
// every process's allocations); Mode buffers = mode_canonical_bytes + mode_rank_image_bytes + mode_staging_bytes.
// Every value is over the cell's trials; "n/a" where no trial recorded it.
#include <optional>
#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// The number at obj[a] (or obj[a][b] when `b` is given); nullopt when absent or not a number.
std::optional<double> memory_number(const nlohmann::json& obj, std::string_view a, std::string_view b = {});

/// Rows in cell order; Model gets " tp<N>" only where needed (model_labels); a "Cell" column (the id) follows
/// Runtime when two cells share configuration and host (cells_need_ids).
Table memory_table(std::span<const Cell> cells);

}  // namespace wsb
