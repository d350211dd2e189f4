#include "modes/registry/mode_registry.hpp"

#include <fmt/format.h>

#include "models/core/errors.hpp"
#include "modes/refit/refit_mode.hpp"
#include "modes/sync/cpu_mode.hpp"
#include "modes/sync/disk_mode.hpp"

namespace wsb {

const std::vector<std::string_view>& sync_mode_names() {
  static const std::vector<std::string_view> names{"disk", "cpu", "refit"};
  return names;
}

std::unique_ptr<SyncMode> make_sync_mode(std::string_view name, SyncContext context) {
  if (name == "cpu") return std::make_unique<CpuMode>(std::move(context));
  if (name == "disk") return std::make_unique<DiskMode>(std::move(context));
  if (name == "refit") return std::make_unique<refit::RefitMode>(std::move(context));
  throw Error(ErrorKind::Format,
              fmt::format("unknown sync mode '{}' (known: {})", name, fmt::join(sync_mode_names(), ", ")));
}

}  // namespace wsb
