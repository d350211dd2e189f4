#pragma once
// The engine's live runtime storages, whatever memory they live in: host arenas (CPU backend) or device arenas
// (CUDA backend). Allocated once per engine; addresses and sizes never change afterwards (captured CUDA graphs
// and the storage_pointers_unchanged check depend on it).
#include <cstdint>
#include <span>
#include <string>

#include "modes/sync/storage_target.hpp"

namespace wsb {

class RuntimeStorages : public StorageTarget {
 public:
  /// "cpu" or "cuda".
  virtual std::string backend() const = 0;
  virtual size_t storage_count(int rank) const = 0;
  /// Bytes of storage `index` of `rank` (RankLayout::storages[index].bytes()).
  virtual uint64_t storage_bytes(int rank, size_t index) const = 0;
  /// Address of the storage (host or device address); stable for the engine's life.
  virtual uintptr_t address(int rank, size_t index) const = 0;
  /// Copies the storage's current bytes into `out` (size == storage_bytes); D2H for device storages, after every
  /// issued write landed. Throws Error(Mismatch) on a size mismatch, Error(Io) on a CUDA failure.
  virtual void read(int rank, size_t index, std::span<uint8_t> out) const = 0;
  /// Tests of the checks only: xors one byte of a storage with 0x01.
  virtual void flip_byte(int rank, size_t index, uint64_t offset) = 0;
};

}  // namespace wsb
