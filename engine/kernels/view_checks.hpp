#pragma once
// Input checks shared by every family's device forward: the caller's layouts against the family's own layout
// builder, and the device views against the layouts (the device twin of the CPU forward's checks).
#include <string>
#include <vector>

#include "engine/cuda/device_storages.hpp"
#include "models/layout/tp_layout.hpp"

namespace wsb {

/// Checks that `layouts` equal `expected` (= the family's layouts for tp = layouts.size()) rank by rank (rank
/// numbering, storage names, dtypes, shapes, transforms) and that `views` match them: one view per rank, one
/// address and one byte count per storage, bytes == the layout's bytes, addresses non-null and aligned to the
/// storage's element size. Throws Error(Mismatch) "profile '<id>': device forward: ..." naming the rank and
/// storage. Touches no device.
void check_device_views(const std::string& profile_id, const std::vector<RankLayout>& expected,
                        const std::vector<RankLayout>& layouts, const std::vector<DeviceRankView>& views);

}  // namespace wsb
