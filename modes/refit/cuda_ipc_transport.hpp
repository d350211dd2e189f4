#pragma once
// CUDA IPC transport of the refit mode: bucket payloads cross from the trainer's sender process to the engine's
// process in GPU memory. Sender rank r allocates a ring of device_slots() buckets on the GPU of engine TP rank r
// and exports it (DeviceIpc); the engine's receiver of rank r imports the handle (a handle is only ever imported by
// a process other than its exporter: the handshake carries the exporter's pid and the receiver refuses its own) and
// copies each bucket out of the ring into its pooled buffer.
//
// Everything but the payload goes through a shared-memory control ring (ShmTransport, kCudaIpcControlBytes per
// message): first a handshake per rank (exporter pid, physical GPU id and UUID, ring geometry, the 64-byte handle),
// then per
// bucket its entries and a slot message (which ring slot, how many bytes). So the control ring's properties carry
// over unchanged: back-pressure, ordered delivery, failure texts, liveness of the peer process, cancel.
//
// The sender packs each bucket straight into pinned staging memory of its channel (SenderEndpoint::send_filled):
// a ring of a few staging pieces, each copied asynchronously into the bucket's device slot while the next piece is
// packed, so no pageable payload buffer and no driver bounce copy lie on the path. The slot message goes out once
// every piece of the bucket is in the device slot.
//
// Both endpoints of a rank live in one object, as in ShmTransport: the sender process uses sender(r), the engine's
// process receiver(r), each over its own mapping of the same control rings.
#include <cstdint>
#include <memory>
#include <vector>

#include "modes/refit/device_ipc.hpp"
#include "modes/refit/shm_transport.hpp"

namespace wsb::refit {

/// Capacity of one control message, bytes (the handshake is the largest: 112 B).
inline constexpr uint64_t kCudaIpcControlBytes = 256;

/// GPUs of a cuda-ipc refit.
struct CudaIpcGpus {
  std::vector<int> rank_devices;  ///< local GPU id of engine TP rank r; sender rank r's ring lives there too
  int base_gpu_id = 0;            ///< physical id of the engine's local GPU 0 (device_ipc.hpp local_gpu_id)
};

/// Pinned staging of each sender channel (send_filled): `pieces` buffers of `piece_bytes` (at most a bucket),
/// allocated with the ring. One piece is packed while the others are copied to the device; 4 x 32 MiB keeps the
/// packing threads and the copy engine busy without holding more than 128 MiB pinned per rank.
struct CudaIpcStaging {
  size_t pieces = 4;
  uint64_t piece_bytes = uint64_t{32} << 20;
};

class CudaIpcTransport final : public Transport {
 public:
  /// Device ring slots per rank for a control ring of `control_depth`: control_depth + 2 (see the .cpp).
  static size_t device_slots(size_t control_depth) { return control_depth + 2; }

  /// `control` must have ranks() == gpus.rank_devices.size() and bucket_size_bytes() == kCudaIpcControlBytes;
  /// `control` and `ipc` must outlive the transport. Throws Error(Mismatch) otherwise, or when bucket_size_bytes
  /// is 0, or staging has no pieces or pieces of 0 B.
  CudaIpcTransport(ShmTransport& control, uint64_t bucket_size_bytes, const DeviceIpc& ipc, CudaIpcGpus gpus,
                   CudaIpcStaging staging = {});
  /// Closes the imported rings (receiver side) and frees the exported ones (sender side): the sender process must
  /// therefore outlive every import of its rings (the refit's sender process waits for a release signal).
  ~CudaIpcTransport() override;

  int ranks() const override { return static_cast<int>(channels_.size()); }
  uint64_t bucket_size_bytes() const override { return bucket_size_bytes_; }
  /// send(): allocates and announces the ring (and the staging pieces) at the first bucket unless open_sender did,
  /// copies the payload into the next slot (waiting for the copy), then sends the slot message. send_filled(): the
  /// same, the payload filled piece by piece into the staging pieces and copied from there. Errors as
  /// ShmTransport's, plus what DeviceIpc throws, "refit: rank R: cuda-ipc: ...".
  SenderEndpoint& sender(int rank) override;
  /// Sender side: allocates rank `rank`'s ring and staging and sends its handshake now, before its first bucket (a
  /// sender process does this while the trainer still prepares). A no-op when already done. Errors as send()'s.
  void open_sender(int rank);
  /// receive(): imports the ring at the handshake, then copies each bucket out of its slot. Throws Error(State)
  /// for a handshake from this very process, Error(Mismatch) for a ring of another bucket size, on an unexpected
  /// GPU id (local_gpu_id) or on a GPU whose UUID is not the rank's, Error(Format) for a malformed control message,
  /// and the device errors of the import and copies, all "refit: rank R: ...".
  ReceiverEndpoint& receiver(int rank) override;

 private:
  class Channel;
  uint64_t bucket_size_bytes_;
  std::vector<std::unique_ptr<Channel>> channels_;
};

}  // namespace wsb::refit
