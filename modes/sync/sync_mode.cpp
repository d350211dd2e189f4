#include "modes/sync/sync_mode.hpp"

#include <fmt/format.h>

#include "models/core/errors.hpp"
#include "modes/sync/cpu_mode.hpp"
#include "modes/sync/disk_mode.hpp"

namespace wsb {

std::unique_ptr<SyncMode> make_sync_mode(std::string_view name, SyncContext context) {
  if (name == "cpu") return std::make_unique<CpuMode>(std::move(context));
  if (name == "disk") return std::make_unique<DiskMode>(std::move(context));
  throw Error(ErrorKind::Format, fmt::format("unknown sync mode '{}' (known: disk, cpu)", name));
}

}  // namespace wsb
