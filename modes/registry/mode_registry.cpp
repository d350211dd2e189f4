#include "modes/registry/mode_registry.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "modes/refit/refit_mode.hpp"
#include "modes/cpu/cpu_mode.hpp"
#include "modes/disk/disk_mode.hpp"

namespace wsb {

std::unique_ptr<SyncMode> make_sync_mode(SyncContext context) {
  switch (context.sync.mode) {
    case SyncModeKind::Cpu: return std::make_unique<CpuMode>(std::move(context));
    case SyncModeKind::Disk: return std::make_unique<DiskMode>(std::move(context));
    case SyncModeKind::Refit: return std::make_unique<refit::RefitMode>(std::move(context));
  }
  throw Error(ErrorKind::Format, fmt::format("sync mode {} is unknown", static_cast<int>(context.sync.mode)));
}

}  // namespace wsb
