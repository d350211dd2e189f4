#pragma once
// The full-copy commit shared by the modes that prepare rank images (cpu, refit): the pause copies every storage
// of every rank image into the live storages.
#include <vector>

#include "core/phase_log.hpp"
#include "models/layout/tp_layout.hpp"
#include "modes/sync/fault_point.hpp"
#include "modes/sync/rank_image.hpp"
#include "modes/sync/storage_target.hpp"

namespace wsb {

/// Writes every storage of images[r] into rank r of `storages`, all ranks' copies issued before any is waited for
/// (ranks on different devices copy in parallel), then synchronizes. Phase "commit.copy" with the target's copy
/// floor and the images' payload bytes. Calls `hook` at FaultPoint::CommitStorageWritten after each storage.
/// Throws what the target throws (Error(Io) on a device failure): the live storages may then be mixed.
void copy_rank_images(const std::vector<RankImage>& images, const std::vector<RankLayout>& layouts,
                      StorageTarget& storages, const FaultHook& hook, PhaseLog& log);

}  // namespace wsb
