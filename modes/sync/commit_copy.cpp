#include "modes/sync/commit_copy.hpp"

#include <fmt/format.h>

#include "core/nvtx.hpp"

namespace wsb {

void copy_rank_images(const std::vector<RankImage>& images, const std::vector<RankLayout>& layouts,
                      StorageTarget& storages, const FaultHook& hook, PhaseLog& log) {
  ScopedPhase phase(log, "commit.copy", storages.copy_floor());
  for (size_t r = 0; r < images.size(); ++r) {
    NvtxRange rank_range(fmt::format("commit.copy rank {}", r));
    for (size_t s = 0; s < images[r].storage_count(); ++s) {
      storages.write(static_cast<int>(r), s, 0, images[r].storage(s));
      fault_point(hook, {FaultPoint::CommitStorageWritten, static_cast<int>(r), s, layouts[r].storages[s].name});
    }
    phase.add_bytes(images[r].payload_bytes());
  }
  NvtxRange wait_range("commit.copy wait");
  storages.synchronize();
}

}  // namespace wsb
