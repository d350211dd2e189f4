#pragma once
// The engine side of a commit: the live runtime storages of every TP rank. Modes only see this interface, so
// they stay below the engine in the dependency order (models <- modes <- engine).
#include <cstddef>
#include <cstdint>
#include <span>

#include "models/core/phase_log.hpp"

namespace wsb {

/// Live runtime storages (host memory on the CPU backend, device memory with CUDA). Storage `index` follows
/// RankLayout::storages of that rank.
class StorageTarget {
 public:
  virtual ~StorageTarget() = default;
  virtual int tp() const = 0;
  /// Starts copying `src` into storage `index` of `rank` at byte `offset`; `src` stays valid until synchronize().
  /// Throws Error(Mismatch) when the range exceeds the storage.
  virtual void write(int rank, size_t index, uint64_t offset, std::span<const uint8_t> src) = 0;
  /// Waits until every write issued so far has landed.
  virtual void synchronize() = 0;
  /// The physical floor a copy into these storages is judged against (host memcpy, or pinned H2D).
  virtual Floor copy_floor() const = 0;
};

}  // namespace wsb
