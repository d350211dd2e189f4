#pragma once
// Publications table of cells on real checkpoints, one row per such cell, from its "publications" record
// (harness/publication_record.hpp) at the version its trials updated to (the cell's "target"):
//   Model | Mode | Runtime | Version | Encoding | Changed | By class | Stored | Compression | Source
// Changed = the publication's density in percent (changed elements over all, change_class units); By class = each
// class's density, "BF16 27.56%, F32 0.00%"; Compression = canonical / stored bytes; Source = the checkpoint directory
// the version came from ("synthetic on <checkpoint>" for the publisher's perturbations of a checkpoint's weights).
#include <span>

#include "reports/results.hpp"
#include "reports/table.hpp"

namespace wsb {

/// True when some cell ran on a real checkpoint (its record names "checkpoint"): reports then show the table.
bool any_checkpoint_cell(std::span<const Cell> cells);

/// Rows in cell order, for the cells that ran on a checkpoint; values a record lacks are n/a.
Table publication_table(std::span<const Cell> cells);

}  // namespace wsb
