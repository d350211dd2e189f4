#pragma once
// The sync modes by name: the one place that knows every mode (the modes' libraries stay independent).
#include <memory>
#include <string_view>
#include <vector>

#include "modes/sync/sync_mode.hpp"

namespace wsb {

/// "disk", "cpu", "refit", in that order.
const std::vector<std::string_view>& sync_mode_names();

/// The mode `name` over `context`. Throws Error(Format, "unknown sync mode 'X' (known: disk, cpu, refit)"), and
/// what the mode's constructor throws.
std::unique_ptr<SyncMode> make_sync_mode(std::string_view name, SyncContext context);

}  // namespace wsb
