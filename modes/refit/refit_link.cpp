#include "modes/refit/refit_link.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "modes/refit/cuda_ipc_transport.hpp"
#include "modes/refit/inproc_transport.hpp"
#include "modes/refit/sender_job.hpp"
#include "modes/refit/sender_process.hpp"
#include "modes/refit/shm_transport.hpp"

namespace wsb::refit {
namespace {

/// Runs `end` (a sender side's wind-down); what it throws, or null.
template <class Fn>
std::exception_ptr failure_of(Fn&& end) noexcept {
  try {
    end();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

/// Sender threads in this process.
class InProcLink final : public RefitLink {
 public:
  explicit InProcLink(const LinkSetup& s) : transport_(s.ranks, s.bucket_bytes, 2, s.pool), send_(s.send), pool_(s.pool) {}
  void start() override {
    for (int r = 0; r < transport_.ranks(); ++r) {
      threads_.emplace_back([this, r] {
        try {
          send_(r, transport_, pool_);
        } catch (...) {
          // stream_shard failed the channel: the receiver raises it.
        }
      });
    }
  }
  ~InProcLink() override {
    if (!threads_.empty()) {
      for (int r = 0; r < transport_.ranks(); ++r) transport_.receiver(r).cancel("refit aborted");
      join();
    }
  }
  Transport& transport() override { return transport_; }
  std::exception_ptr finish() noexcept override {
    join();
    return nullptr;
  }

 private:
  void join() {
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  InProcTransport transport_;
  std::function<void(int, Transport&, WorkPool*)> send_;
  WorkPool* pool_;
  std::vector<std::thread> threads_;
};

/// Sender threads in a process forked for this refit, buckets through shared-memory rings.
class ShmLink final : public RefitLink {
 public:
  explicit ShmLink(const LinkSetup& s) : transport_(s.ranks, s.bucket_bytes), send_(s.send), pack_threads_(s.pack_threads),
        receive_pool_(s.pool) {
    // Read only in the forked child: its senders stop when this process (their receiver) is gone.
    transport_.set_receiver_alive([parent = getpid()] { return getppid() == parent; });
  }
  void start() override {
    process_ = std::make_unique<SenderProcess>(transport_.ranks(), [this](int r) {
      // In the forked child: its packing pool is its own (the engine's pool threads do not cross a fork).
      std::call_once(child_pool_once_, [&] { child_pool_ = std::make_unique<WorkPool>(pack_threads_); });
      send_(r, transport_, child_pool_.get());
    });
    transport_.set_sender_alive([process = process_.get()] { return process->alive(); });
    transport_.set_receive_copy_pool(receive_pool_);
  }
  Transport& transport() override { return transport_; }
  std::exception_ptr finish() noexcept override {
    // A stream that ended cleanly and a sender that then crashed still fails the refit.
    return failure_of([this] {
      if (process_) process_->join();
    });
  }

 private:
  ShmTransport transport_;
  std::function<void(int, Transport&, WorkPool*)> send_;
  int pack_threads_;
  WorkPool* receive_pool_;  // this process's: set after the fork
  std::once_flag child_pool_once_;
  std::unique_ptr<WorkPool> child_pool_;  // set in the forked child only
  std::unique_ptr<SenderProcess> process_;
};

/// The senders in an exec'd `wsbench refit-sender`, buckets through exported device rings.
class CudaIpcLink final : public RefitLink {
 public:
  explicit CudaIpcLink(const LinkSetup& s) : control_(s.ranks, kCudaIpcControlBytes) {
    const CudaIpcGpus gpus{.rank_devices = s.rank_devices, .base_gpu_id = s.base_gpu_id};
    senders_ = std::make_unique<CudaIpcSenders>(sender_executable(s.sender_exe), s.ipc->kind(), *s.trainer, control_,
                                                s.bucket_bytes, gpus, s.pack_threads);
    control_.set_sender_alive([senders = senders_.get()] { return senders->alive(); });
    transport_ = std::make_unique<CudaIpcTransport>(control_, s.bucket_bytes, *s.ipc, gpus);
  }
  ~CudaIpcLink() override {
    transport_.reset();  // the imports close before the sender process may free what they map
    senders_.reset();
  }
  Transport& transport() override { return *transport_; }
  void start() override { senders_->start(); }
  std::exception_ptr finish() noexcept override {
    transport_.reset();
    return failure_of([this] { senders_->release_and_join(); });
  }

 private:
  ShmTransport control_;
  std::unique_ptr<CudaIpcSenders> senders_;
  std::unique_ptr<CudaIpcTransport> transport_;
};

}  // namespace

std::unique_ptr<RefitLink> open_link(const LinkSetup& setup) {
  if (setup.transport == RefitTransport::Inproc) return std::make_unique<InProcLink>(setup);
  if (setup.transport == RefitTransport::Shm) return std::make_unique<ShmLink>(setup);
  if (setup.transport == RefitTransport::CudaIpc) {
    if (setup.trainer == nullptr || setup.ipc == nullptr ||
        setup.rank_devices.size() != static_cast<size_t>(setup.ranks)) {
      throw Error(ErrorKind::Mismatch,
                  fmt::format("refit: transport 'cuda-ipc' needs the CUDA backend (device memory to export and "
                              "import) and one GPU per rank; got {} for {} ranks",
                              setup.ipc == nullptr ? "no device IPC" : fmt::format("{} GPUs", setup.rank_devices.size()),
                              setup.ranks));
    }
    return std::make_unique<CudaIpcLink>(setup);
  }
  throw Error(ErrorKind::Format, fmt::format("refit mode: transport {} is unknown", static_cast<int>(setup.transport)));
}

}  // namespace wsb::refit
