#include "modes/refit/refit_mode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>


#include "core/errors.hpp"
#include "modes/refit/first_arrival.hpp"
#include "modes/refit/receiver_group.hpp"
#include "modes/refit/refit_link.hpp"
#include "modes/refit/sender.hpp"
#include "modes/refit/stream_aligner.hpp"
#include "publication/store.hpp"
#include "modes/sync/commit_copy.hpp"

namespace wsb::refit {
namespace {

constexpr size_t kInprocSendBuffers = 4;

const SyncContext& checked(const SyncContext& context) {
  if (context.sync.refit.transport == RefitTransport::CudaIpc &&
      (context.device_ipc == nullptr || context.rank_devices.size() != context.layouts.size())) {
    throw Error(ErrorKind::Mismatch,
                fmt::format("refit mode: transport 'cuda-ipc' needs the cuda backend (device memory to export and "
                            "import, one GPU per TP rank); this engine gives {} for {} ranks",
                            context.device_ipc == nullptr ? std::string("no device IPC")
                                                          : fmt::format("{} GPUs", context.rank_devices.size()),
                            context.layouts.size()));
  }
  return context;
}

HostMemory trainer_memory(const SyncContext& context) {
  // The cuda-ipc sender process maps the trainer's weights: they must live in memfds.
  return context.sync.refit.transport == RefitTransport::CudaIpc ? HostMemory::Shared : HostMemory::Private;
}

/// First error of a refit, by time: the rank that detected a problem records it before it aborts the others.
class FirstError {
 public:
  void record(std::exception_ptr e) {
    std::lock_guard lock(mu_);
    if (!first_) first_ = std::move(e);
  }
  /// The sender side's own failure (a sender process that exited non-zero, with its reason) is appended to the
  /// receivers' error, which usually came first but only says the stream ended.
  void add_sender_failure(const std::exception_ptr& sender) {
    std::lock_guard lock(mu_);
    if (!first_) {
      first_ = sender;
      return;
    }
    try {
      std::rethrow_exception(first_);
    } catch (const Error& receiver) {
      try {
        std::rethrow_exception(sender);
      } catch (const std::exception& s) {
        first_ = std::make_exception_ptr(Error(receiver.kind(), fmt::format("{} ({})", receiver.what(), s.what())));
      }
    } catch (...) {
    }
  }
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::mutex mu_;
  std::exception_ptr first_;
};

}  // namespace

RefitMode::RefitMode(SyncContext context)
    : context_(std::move(checked(context))),
      work_(std::make_unique<WorkPool>(context_.threads)),
      shards_(plan_rank_shards(context_.profile.canonical_tensors(), context_.layouts)),
      layout_(refit_layout(shards_)),
      trainer_(context_.profile, shards_, trainer_memory(context_)),
      bucket_bytes_(check_bucket_fits(refit_bucket_bytes(context_.sync.refit.bucket_bytes, shards_), shards_)),
      pool_(bucket_bytes_, 2 * shards_.size(), std::nullopt,
            context_.sync.refit.transport == RefitTransport::CudaIpc ? context_.pinner : nullptr) {
  if (context_.sync.refit.transport == RefitTransport::Inproc) {
    // As many as can be in flight per rank: one being packed, a full queue (2), one being received.
    send_buffers_.resize(shards_.size());
    for (auto& buffers : send_buffers_) {
      buffers.resize(kInprocSendBuffers);
      for (auto& b : buffers) b.resize(bucket_bytes_);  // zero-filled: every page faulted in now, not in a refit
    }
  }
  const auto index = [this](const std::string& name) {
    const auto i = trainer_.image().index_of(name);
    if (!i) throw Error(ErrorKind::Missing, fmt::format("refit mode: no tensor '{}'", name));
    return *i;
  };
  for (size_t r = 0; r < context_.layouts.size(); ++r) {
    images_.emplace_back(context_.layouts[r], context_.pinner);
    appliers_.push_back(std::make_unique<RankApplier>(static_cast<int>(r), context_.layouts[r], shards_[r], index));
  }
}

RefitMode::~RefitMode() = default;

void RefitMode::on_native_load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log) {
  trainer_.load(checkpoint, version, log);
  images_version_.reset();
}

void RefitMode::prepare(uint32_t served, uint32_t target, PhaseLog& log) {
  if (!trainer_.loaded()) throw Error(ErrorKind::State, "refit mode: prepare before the engine's native load");
  if (trainer_.version() > target) {
    throw Error(ErrorKind::State, fmt::format("refit mode: the trainer holds {}, newer than target {} (served {})",
                                              version_string(trainer_.version()), version_string(target),
                                              version_string(served)));
  }
  // A cuda-ipc sender process needs none of the weights for its setup (exec, CUDA context, device rings, pinned
  // staging, handshakes): it runs while the trainer advances them, and streams at the link's start().
  std::unique_ptr<RefitLink> link;
  if (context_.sync.refit.transport == RefitTransport::CudaIpc) link = open_link(link_setup());
  trainer_.advance(context_.store, target, context_.threads, log, [this] { images_version_.reset(); });
  images_version_.reset();
  stream(log, std::move(link));
  images_version_ = target;
  ++refits_;
}

LinkSetup RefitMode::link_setup() {
  const RefitTransport kind = context_.sync.refit.transport;
  return LinkSetup{.transport = kind,
                   .ranks = static_cast<int>(shards_.size()),
                   .bucket_bytes = bucket_bytes_,
                   // Sender rank r: a failure fails its channel (the receivers raise it), so nothing is recorded here.
                   .send =
                       [this, kind](int r, Transport& t, WorkPool* pack_pool) {
                         SendOptions options;
                         options.pack_pool = pack_pool;
                         // In a forked child the buffers would be copy-on-write pages: only threads of this process
                         // pack into them.
                         if (kind == RefitTransport::Inproc) options.buffers = &send_buffers_[static_cast<size_t>(r)];
                         options.send_ahead = kind != RefitTransport::Inproc;  // send() copies into a slot there
                         stream_shard(r, trainer_.rank_weights(r), bucket_bytes_, t, options);
                       },
                   .pool = work_.get(),
                   .pack_threads = context_.threads,
                   .trainer = &trainer_,
                   .ipc = context_.device_ipc,
                   .rank_devices = context_.rank_devices,
                   .base_gpu_id = context_.sync.refit.base_gpu_id,
                   .sender_exe = context_.refit_sender_exe};
}

void RefitMode::stream(PhaseLog& log, std::unique_ptr<RefitLink> link) {
  ScopedPhase phase(log, "prepare.stream", Floor::HostMemcpy);
  const auto since = std::chrono::steady_clock::now();
  const int ranks = static_cast<int>(shards_.size());
  const RefitTransport kind = context_.sync.refit.transport;
  if (!link) link = open_link(link_setup());
  link->start();
  FirstArrival arrival(link->transport());  // destroyed before the link: it forwards to the link's transport
  Transport& transport = arrival;
  FirstError first;
  uint64_t bytes = 0;
  {
    // Each rank receives on a thread of its own, one transport batch ahead of the batch its rank thread applies.
    StreamAligner aligner(layout_, transport, pool_, ReceiveMode::Ahead);
    RankReceiverGroup group(aligner);
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        RankApplier& applier = *appliers_[static_cast<size_t>(r)];
        std::vector<ArrivedWeight> arrived;
        try {
          applier.begin(images_[static_cast<size_t>(r)]);
          while (auto batch = group.next(r)) {
            arrived.clear();
            for (size_t k = 0; k < batch->weights.size(); ++k) {
              arrived.push_back(ArrivedWeight{batch->first_weight + k, batch->weights[k].bytes});
            }
            applier.apply_batch(arrived, work_.get());
          }
          applier.finish();
        } catch (const Error& e) {
          first.record(std::current_exception());
          group.abort(r, e.kind(), e.what());
          transport.receiver(r).cancel(e.what());
        } catch (const std::exception& e) {
          first.record(std::current_exception());
          group.abort(r, ErrorKind::Fatal, e.what());
          transport.receiver(r).cancel(e.what());
        }
      });
    }
    for (auto& t : threads) t.join();
    last_batches_ = aligner.batches_delivered();
    bytes = aligner.bytes_delivered();
  }  // the receive threads have stopped: the link may wind its transport down
  if (auto sender_failure = link->finish()) first.add_sender_failure(sender_failure);
  if (kind == RefitTransport::Inproc) {
    // The buffers the senders packed into are the transport's spares now: keep them for the next refit.
    for (int r = 0; r < ranks; ++r) {
      auto& buffers = send_buffers_[static_cast<size_t>(r)];
      while (buffers.size() < kInprocSendBuffers) {
        std::vector<uint8_t> spare = transport.sender(r).spare_payload();
        if (spare.capacity() == 0) break;
        buffers.push_back(std::move(spare));
      }
    }
  }
  first.rethrow();
  if (const auto start = arrival.seconds_since(since)) {
    log.add(PhaseRecord{.name = "prepare.stream_start", .seconds = *start, .bytes = 0, .floor = Floor::None});
  }
  phase.add_bytes(bytes);
}

void RefitMode::preflight(uint32_t target) const {
  if (!images_version_ || *images_version_ != target) {
    throw Error(ErrorKind::State, fmt::format("refit mode: rank images are not prepared for {}", version_string(target)));
  }
}

void RefitMode::commit(StorageTarget& storages, PhaseLog& log) {
  copy_rank_images(images_, context_.layouts, storages, context_.fault_hook, log);
}

ModeMemory RefitMode::memory() const {
  ModeMemory m;
  m.canonical_bytes = trainer_.image_bytes();
  for (const auto& image : images_) m.rank_image_bytes += image.bytes();
  m.staging_bytes = trainer_.shard_bytes() + pool_.buffer_bytes() * pool_.count();
  for (const auto& buffers : send_buffers_) {
    for (const auto& b : buffers) m.staging_bytes += b.capacity();
  }
  for (const auto& a : appliers_) m.staging_bytes += a->stash_bytes();
  return m;
}

std::span<uint8_t> RefitMode::native_load_staging(int rank, size_t index, uint64_t bytes) {
  RankImage& image = images_.at(static_cast<size_t>(rank));
  auto span = image.storage(index);
  if (span.size() != bytes || !image.pinned()) return {};
  return span;
}

}  // namespace wsb::refit
