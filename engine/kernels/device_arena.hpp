#pragma once
// Owned device and pinned host memory of the device forward (CUDA builds only). Allocated when a model or a
// sequence slot is created, never during a step, so addresses captured into CUDA graphs stay valid.
#include <cstdint>
#include <string>

namespace wsb::dk {

/// Offsets of 256-byte aligned pieces inside one allocation (plan first, then allocate once).
class ArenaPlan {
 public:
  /// Reserves `bytes` and returns the piece's offset.
  uint64_t add(uint64_t bytes);
  /// Reserves `count` floats.
  uint64_t add_floats(int64_t count) { return add(static_cast<uint64_t>(count) * sizeof(float)); }
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t bytes_ = 0;
};

/// One zero-filled cudaMalloc on a device, freed at destruction. Move-only.
class DeviceArena {
 public:
  DeviceArena() = default;
  /// Throws Error(Resource) "<what>: needs <bytes> bytes on device <d>, <free> free" when short.
  DeviceArena(int device, uint64_t bytes, const std::string& what);
  ~DeviceArena();
  DeviceArena(DeviceArena&& other) noexcept;
  DeviceArena& operator=(DeviceArena&& other) noexcept;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  int device() const { return device_; }
  uint8_t* data() const { return data_; }
  /// The piece at `offset` (from the ArenaPlan the arena was sized by) as floats.
  float* floats(uint64_t offset) const { return reinterpret_cast<float*>(data_ + offset); }

 private:
  int device_ = 0;
  uint8_t* data_ = nullptr;
};

/// Page-locked host memory (cudaHostAlloc, portable), freed at destruction; the D2H/H2D endpoints of a step.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  /// Throws Error(Resource) "<what>: pinning <bytes> bytes of host memory failed: <cuda error>".
  PinnedBuffer(uint64_t bytes, const std::string& what);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

}  // namespace wsb::dk
