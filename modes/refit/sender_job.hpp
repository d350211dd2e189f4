#pragma once
// The trainer side of a cuda-ipc refit, as its own process: `wsbench refit-sender` started with exec (a process
// forked from the engine's could not use CUDA: the parent's context is not valid in the child). It gets, as file
// descriptors, a job description (JSON in a memfd), the control rings (ShmTransport::fd), a start socket, a release
// pipe and the trainer's weights (TrainerSim built with HostMemory::Shared: its image and cut shards are memfds it
// maps read-only). It sets up first -- CUDA context, each rank's device ring and pinned staging, the handshakes --
// which needs none of the weights, so the engine starts it while the trainer still advances them; then it waits for
// the start signal (the weights are at the target), its sender ranks stream their shards through a
// CudaIpcTransport (device rings on the engine ranks' GPUs), and it waits for the release signal -- the engine has
// closed every import of its rings -- before it frees them and exits.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

#include "modes/refit/cuda_ipc_transport.hpp"
#include "modes/refit/sender_process.hpp"
#include "modes/refit/trainer_sim.hpp"

namespace wsb::refit {

/// File descriptors of a sender process: the job, the control rings, the start socket's and the release pipe's read
/// ends, then the weights' buffers from kJobFirstRegionFd on, in the job's "regions" order.
inline constexpr int kJobFd = 3, kJobControlFd = 4, kJobStartFd = 5, kJobReleaseFd = 6, kJobFirstRegionFd = 7;

/// The sender executable: `configured` when not empty, else $WSBENCH_EXE, else this process's executable when it is
/// wsbench, else `wsbench` beside it or one folder up (build/tests/test_* -> build/wsbench). Throws Error(Missing)
/// listing the places tried.
std::filesystem::path sender_executable(const std::filesystem::path& configured);

/// Engine side: one sender process for one refit.
class CudaIpcSenders {
 public:
  /// Starts `exe refit-sender --ipc IPC_KIND`, which sets up and then waits for start() before it streams the shards
  /// `trainer` lends (rank_weights, whose places in the buffers never change; its buffers must be Shared) over
  /// `control` (ranks() == gpus.rank_devices.size(), kCudaIpcControlBytes messages) in buckets of
  /// `bucket_size_bytes`. Throws Error(Mismatch) naming a buffer that is not shared or a weight outside every
  /// buffer, Error(Io/Resource) when the job cannot be written or the process started.
  /// `pack_threads`: threads the process packs each bucket with (SendOptions::pack_pool).
  CudaIpcSenders(const std::filesystem::path& exe, std::string_view ipc_kind, const TrainerSim& trainer,
                 ShmTransport& control, uint64_t bucket_size_bytes, const CudaIpcGpus& gpus, int pack_threads = 1);
  /// Closes the start socket and the release pipe and kills the process (SIGKILL) if it has not exited yet: an
  /// error path, where nothing waits for a clean exit.
  ~CudaIpcSenders();
  CudaIpcSenders(const CudaIpcSenders&) = delete;
  CudaIpcSenders& operator=(const CudaIpcSenders&) = delete;

  /// Lets the process stream: the trainer's weights are at the target. A process already gone is no error here:
  /// its receivers see the stream fail, and release_and_join reports its exit status.
  void start() noexcept;
  /// True while the process runs (the control rings' sender liveness).
  bool alive() { return process_->alive(); }
  /// Call once every import of the process's rings is closed: signals release, waits for the exit. Throws what
  /// SenderProcess::join throws (a non-zero status or a signal), with the last line the process wrote to stderr.
  void release_and_join();

 private:
  int start_write_ = -1;
  int release_write_ = -1;
  int stderr_fd_ = -1;  // memfd the process's stderr goes to
  std::unique_ptr<SenderProcess> process_;
};

/// Sender process side (`wsbench refit-sender`): reads the job from the fds above, opens every rank's ring and
/// staging (CudaIpcTransport::open_sender) on its own thread, waits for the start byte, streams every rank through
/// the transport built on `ipc` (packing on the job's pack_threads into pinned staging, each piece's device copy
/// overlapping the packing of the next), waits for release (EOF on the pipe: the engine closed it or exited), frees
/// the rings. EOF on the start socket instead of its byte (the engine gave up before the stream) fails every rank's
/// channel. Returns the exit status: 0, or 1 when the job is unreadable, the start never came or a rank failed (its
/// failure was sent to the receivers first; the job's own errors are printed to stderr).
int run_sender_job(const DeviceIpc& ipc);

}  // namespace wsb::refit
