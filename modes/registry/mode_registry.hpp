#pragma once
// The sync modes by name: the one place that knows every mode (the modes' libraries stay independent).
#include <memory>
#include <string_view>
#include <vector>

#include "modes/sync/sync_mode.hpp"

namespace wsb {

/// The mode `context.sync.mode` over `context` (the names are core/sync_options.hpp's). Throws what the mode's
/// constructor throws.
std::unique_ptr<SyncMode> make_sync_mode(SyncContext context);

}  // namespace wsb
