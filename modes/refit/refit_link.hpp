#pragma once
// One refit's link from the trainer's sender ranks to the engine's receivers: the transport of the cell's kind and
// whatever runs the senders (threads of this process for "inproc", a forked process for "shm", an exec'd
// `wsbench refit-sender` process for "cuda-ipc"), wound down, in the order each kind needs, by finish().
//
// Opening and starting are two steps, so setup that needs none of the trainer's weights can run while the trainer
// still advances them: opening a cuda-ipc link execs its sender process, which creates its CUDA context, device
// rings and pinned staging and sends its handshakes meanwhile; start() then lets the senders read the weights.
// (A forked shm child copies the weights as they are when it forks, so it forks at start().)
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/sync_options.hpp"
#include "modes/refit/device_ipc.hpp"
#include "modes/refit/trainer_sim.hpp"
#include "modes/refit/transport.hpp"
#include "modes/sync/work_pool.hpp"

namespace wsb::refit {

/// What opening a link needs.
struct LinkSetup {
  RefitTransport transport = RefitTransport::Inproc;
  int ranks = 1;
  uint64_t bucket_bytes = 0;
  /// inproc / shm: runs sender rank r (stream_shard over the link's transport, packing across `pack_pool`, which
  /// lives in the process the call runs in); called on the sender side.
  std::function<void(int rank, Transport& transport, WorkPool* pack_pool)> send;
  /// This process's pool: the receive copies of inproc and shm, and inproc's packing. May be null.
  WorkPool* pool = nullptr;
  /// Threads of the packing pool a sender process (shm's forked child, cuda-ipc's `wsbench refit-sender`) starts.
  int pack_threads = 1;
  // cuda-ipc only:
  const TrainerSim* trainer = nullptr;  ///< built with HostMemory::Shared
  const DeviceIpc* ipc = nullptr;
  std::vector<int> rank_devices;        ///< local GPU of each engine TP rank
  int base_gpu_id = 0;
  std::filesystem::path sender_exe;     ///< empty: sender_executable's search
};

class RefitLink {
 public:
  virtual ~RefitLink() = default;
  virtual Transport& transport() = 0;
  /// Lets the senders stream: the trainer's weights are at the target version from now on. Call once, before any
  /// receiver uses transport(). Throws Error(Io) when a sender process cannot be started.
  virtual void start() = 0;
  /// Call once every receiver has stopped using transport(): ends the sender side (joins its threads or process)
  /// and returns its own failure -- a sender process that crashed or exited non-zero -- or null.
  virtual std::exception_ptr finish() noexcept = 0;
};

/// Opens a link (its senders start streaming at start()). Throws Error(Format) for an unknown transport, Error(Mismatch) for
/// cuda-ipc without a trainer / DeviceIpc / one GPU per rank, plus what the transport and process setup throw.
std::unique_ptr<RefitLink> open_link(const LinkSetup& setup);

}  // namespace wsb::refit
