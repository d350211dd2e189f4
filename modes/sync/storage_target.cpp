#include "modes/sync/storage_target.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"

namespace wsb {

void StorageTarget::write_transformed(int rank, size_t, const RuntimeStorageSpec& spec, std::span<const uint8_t>) {
  throw Error(ErrorKind::State, fmt::format("storage '{}' of rank {}: this target has no device path for transform "
                                            "'{}'",
                                            spec.name, rank, spec.transform));
}

namespace {

Error no_staging(const char* op) {
  return Error(ErrorKind::State, fmt::format("{}: these runtime storages have no delta staging area", op));
}

}  // namespace

uint64_t StorageTarget::delta_address(int, size_t) const { throw no_staging("delta_address"); }
uint64_t StorageTarget::live_digest(int, size_t) { throw no_staging("live_digest"); }
std::vector<uint64_t> StorageTarget::live_digests(std::span<const StorageIndex> storages) {
  std::vector<uint64_t> out;
  out.reserve(storages.size());
  for (const StorageIndex& s : storages) out.push_back(live_digest(s.rank, s.index));
  return out;
}
void StorageTarget::stage_packs(std::span<const StagedPack>) { throw no_staging("stage_packs"); }
bool StorageTarget::staged_deltas_intact() { throw no_staging("staged_deltas_intact"); }
void StorageTarget::apply_staged_deltas() { throw no_staging("apply_staged_deltas"); }
void StorageTarget::corrupt_staged_delta(uint64_t) { throw no_staging("corrupt_staged_delta"); }

}  // namespace wsb
