#pragma once
// Refit table: one row per cell whose trials recorded refit_streams (embedded refit cells), from its first such
// trial (every trial of a cell streams the same plan):
//   Cell | Mode | Bucket | Buckets per rank | Streamed per rank
// Buckets per rank = each sender rank's bucket count in rank order, "5, 6"; Streamed per rank = each rank's payload
// bytes (format_bytes), "655.36 kB, 786.43 kB". Ranks stream different shards (k/v replication, uneven slices), so
// their counts differ; a cell's bucket size sets them.
#include <span>

#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// True when some trial recorded refit_streams: reports then show the table.
bool any_refit_streams(std::span<const Cell> cells);

/// Rows in cell order for the cells with refit_streams; Bucket is n/a for the mode's default size (bucket_bytes 0).
Table refit_table(std::span<const Cell> cells);

}  // namespace wsb
