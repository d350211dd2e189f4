#include "modes/sync/fault_point.hpp"

namespace wsb {

std::string_view fault_point_name(FaultPoint point) {
  switch (point) {
    case FaultPoint::DiskCheckpointWrite: return "disk.checkpoint_write";
    case FaultPoint::DiskCheckpointSwap: return "disk.checkpoint_swap";
    case FaultPoint::CommitStorageWritten: return "commit.storage_written";
  }
  return "unknown";
}

}  // namespace wsb
