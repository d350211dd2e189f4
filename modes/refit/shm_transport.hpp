#pragma once
// Shared-memory transport of the refit mode: the trainer's sender ranks and the engine's receiver ranks live in two
// processes of one host. The constructor creates one shared mapping (a memfd, mapped MAP_SHARED) before fork(), so
// a child created with fork() shares it; sender endpoints are then used in one process and receiver endpoints in
// the other (or both in one process: the benchmark's senders run on threads).
//
// Per rank the mapping holds a control block and a ring of `depth` slots; a slot is a header (payload bytes, entry
// count, the WireEntry list encoded by shm_wire.hpp in at most max_entries_bytes) followed by bucket_size_bytes of
// payload. send() copies the bucket into the next free slot (blocking while the ring is full: back-pressure);
// receive() copies the slot's payload into the caller's pooled buffer, then frees the slot -- the same copies as
// InProcTransport, and the same errors and texts.
//
// A peer process that dies never makes the other side hang: every wait is cut into slices (50 ms by default) and,
// between slices, the waiting side asks a liveness callback whether the peer process still runs (sender_alive for a
// receiver waiting on an empty ring, receiver_alive for a sender waiting on a full one). A receiver that cancels
// its endpoint, or destroys its transport, also releases a sender blocked on a full ring.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "modes/refit/transport.hpp"
#include "modes/sync/work_pool.hpp"

namespace wsb::refit {

/// Default size of one slot's entry area in bytes: ~2000 entries with 100-character names and 2-D shapes. It is
/// reserved with the ring (ranks x depth x this: 4 MiB for 8 ranks of 2 slots), small next to the payload slots.
inline constexpr uint64_t kDefaultMaxEntriesBytes = 256 << 10;

/// Liveness of the peer process: true while it runs. Called from the waiting thread between wait slices (possibly
/// from several rank threads at once, so it must be thread-safe); it must not reap the peer (use waitid with
/// WNOWAIT for a child, getppid() for a parent).
using PeerAlive = std::function<bool()>;

/// Setup of a ShmTransport beyond ranks and bucket size.
struct ShmTransportOptions {
  size_t depth = 2;                                      ///< slots per rank ring (>= 1)
  uint64_t max_entries_bytes = kDefaultMaxEntriesBytes;  ///< entry area of one slot header, bytes (>= 1)
  std::chrono::milliseconds wait_slice{50};              ///< longest single wait before a liveness check (> 0)
  PeerAlive sender_alive{};    ///< checked by receivers waiting on an empty ring; empty = assume alive
  PeerAlive receiver_alive{};  ///< checked by senders waiting on a full ring; empty = assume alive
  /// Splits each receive() copy out of a slot across its threads; null copies on the receiving thread. Process-local
  /// (a forked child gets a copy of the pointer, not the threads): set it only where receive() runs.
  WorkPool* receive_copy_pool = nullptr;
};

class ShmTransport final : public Transport {
 public:
  /// `ranks` channels of buckets up to `bucket_size_bytes`. Throws Error(Mismatch) when ranks < 1, depth < 1,
  /// bucket_size_bytes == 0, max_entries_bytes == 0 or wait_slice <= 0, Error(Resource) naming the size when the
  /// shared mapping cannot be created and backed (the memory is reserved here, so an exhausted host fails at setup,
  /// not mid-refit).
  ShmTransport(int ranks, uint64_t bucket_size_bytes, ShmTransportOptions options = {});
  /// Closes this process's side, then unmaps; safe in both processes. A rank this process received on is cancelled
  /// ("the receiving process closed the transport": its sender stops instead of waiting), a rank it sent on and
  /// never finished is failed ("sender closed the transport before finishing the stream").
  ~ShmTransport() override;
  /// Maps the rings another process created (its fd(), passed to this process, which then owns the fd), with the
  /// same ranks, bucket size, depth and max_entries_bytes. Throws Error(Mismatch) when the memfd's size differs from
  /// that geometry's, Error(Resource) when it cannot be mapped.
  static std::unique_ptr<ShmTransport> attach(int fd, int ranks, uint64_t bucket_size_bytes,
                                              ShmTransportOptions options = {});
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  int ranks() const override { return static_cast<int>(channels_.size()); }
  uint64_t bucket_size_bytes() const override { return bucket_size_bytes_; }
  SenderEndpoint& sender(int rank) override;
  ReceiverEndpoint& receiver(int rank) override;

  /// Replace the liveness callbacks in this process only (after fork(), when the peer's pid is known). Call before
  /// this process uses an endpoint.
  void set_sender_alive(PeerAlive alive);
  void set_receiver_alive(PeerAlive alive);
  /// ShmTransportOptions::receive_copy_pool, in this process only.
  void set_receive_copy_pool(WorkPool* pool);

  /// Buckets the sender of `rank` has published so far (readable from either process; tests and diagnostics).
  uint64_t buckets_published(int rank) const;
  /// Slots per rank ring.
  size_t depth() const { return depth_; }
  /// Size of the shared mapping, bytes.
  uint64_t mapping_bytes() const { return mapping_bytes_; }
  /// The memfd behind the mapping (close-on-exec; owned by the transport): dup it to hand the rings to a process
  /// started with exec, which attach()es them.
  int fd() const { return fd_; }

 private:
  ShmTransport(int attach_fd, int ranks, uint64_t bucket_size_bytes, ShmTransportOptions options);
  class Channel;
  uint64_t bucket_size_bytes_;
  size_t depth_;
  uint64_t mapping_bytes_ = 0;
  int fd_ = -1;
  void* mapping_ = nullptr;
  ShmTransportOptions options_;  // read by the channels; a process-local copy after fork(), like the callbacks
  std::vector<std::unique_ptr<Channel>> channels_;
};

}  // namespace wsb::refit
