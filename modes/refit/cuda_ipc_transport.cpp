#include "modes/refit/cuda_ipc_transport.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <utility>

#include "modes/refit/refit_error.hpp"

// Why a ring of control_depth + 2 slots is enough. The control ring frees a message's slot when the receiver has
// copied the message out (ShmTransport::receive), i.e. before the receiver copies that bucket out of the device
// ring. The sender writes device slot k % N for bucket k (send, or every staged piece of send_filled) only after its
// send of bucket k - 1 returned, and that send returned after its slot message went out -- after every copy of
// bucket k - 1 had completed -- which needs control room, i.e. bucket k - 1 - D taken by the receiver (D = control
// depth). At that moment the receiver
// may still be copying bucket k - 1 - D out of the device ring, and buckets k - D .. k - 1 wait unread in their
// slots: D + 1 slots in use besides the one being written, so N = D + 2 never overwrites a bucket before it is read.
// Each receive() finishes its device copy before it returns, so a receiver is never behind by more than that.

namespace wsb::refit {
namespace {

constexpr uint64_t kHelloMagic = 0x6f6c6c65'68706977ull;  // "wiphello"
constexpr uint64_t kSlotMagic = 0x746f6c73'70697775ull;   // "uwipslot"

/// First control message of a rank: who exported which ring.
struct Hello {
  uint64_t magic;
  int32_t exporter_pid;
  int32_t physical_gpu;
  uint64_t slots;
  uint64_t slot_bytes;
  std::array<uint8_t, 64> handle;
  std::array<uint8_t, 16> gpu_uuid;  // of the ring's GPU: the same in every process, whatever the numbering
};
static_assert(sizeof(Hello) <= kCudaIpcControlBytes);

/// Control message of one bucket (its entries travel in the control slot's header).
struct SlotMessage {
  uint64_t magic;
  uint64_t slot;
  uint64_t payload_bytes;
};

template <class T>
std::vector<uint8_t> encode(const T& message) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &message, sizeof(T));
  return out;
}

}  // namespace

class CudaIpcTransport::Channel final : public SenderEndpoint, public ReceiverEndpoint {
 public:
  Channel(int rank, ShmTransport& control, uint64_t bucket_bytes, const DeviceIpc& ipc, int device, int base_gpu_id,
          size_t slots, CudaIpcStaging staging)
      : rank_(rank),
        control_(control),
        bucket_bytes_(bucket_bytes),
        ipc_(ipc),
        device_(device),
        base_gpu_id_(base_gpu_id),
        slots_(slots),
        staging_pieces_(staging.pieces),
        staging_piece_bytes_(std::min(staging.piece_bytes, bucket_bytes)) {}

  /// Allocates the ring and the staging pieces and sends the handshake, once.
  void open() {
    if (exported_) return;
    on_rank([&] {
      auto exported = ipc_.allocate(device_, slots_ * bucket_bytes_);
      staging_ = ipc_.allocate_pinned(staging_pieces_ * staging_piece_bytes_);
      tickets_.assign(staging_pieces_, 0);
      exported_ = std::move(exported);
    });
    Hello hello{.magic = kHelloMagic,
                .exporter_pid = static_cast<int32_t>(getpid()),
                .physical_gpu = device_ + base_gpu_id_,
                .slots = slots_,
                .slot_bytes = bucket_bytes_,
                .handle = exported_->handle().bytes,
                .gpu_uuid = {}};
    on_rank([&] { hello.gpu_uuid = ipc_.device_uuid(device_); });
    control_.sender(rank_).send(Bucket{.entries = {}, .payload = encode(hello)});
  }

  void send(Bucket bucket) override {
    check_payload(bucket.payload.size());
    open();
    const uint64_t slot = sent_ % slots_;
    on_rank([&] { exported_->write(slot * bucket_bytes_, bucket.payload); });
    announce(slot, std::move(bucket.entries), bucket.payload.size());
    // In the ring already: the sender may pack its next bucket into it. Under the lock because a send-ahead
    // thread runs send() while the packing thread asks for the spare.
    std::lock_guard lock(spare_mu_);
    spare_ = std::move(bucket.payload);
  }
  std::vector<uint8_t> spare_payload() override {
    std::lock_guard lock(spare_mu_);
    return std::exchange(spare_, {});
  }

  bool send_filled(std::vector<WireEntry> entries, uint64_t payload_bytes, const BucketFill& fill) override {
    check_payload(payload_bytes);
    open();
    const uint64_t slot = sent_ % slots_;
    const std::span<uint8_t> staging = staging_->bytes();
    try {
      uint64_t piece = 0;
      for (uint64_t offset = 0; offset < payload_bytes; offset += staging_piece_bytes_, ++piece) {
        const size_t k = piece % staging_pieces_;
        // Staging piece k is filled again only once its previous copy is in the ring.
        on_rank([&] { exported_->wait_written(tickets_[k]); });
        const std::span<uint8_t> dst =
            staging.subspan(k * staging_piece_bytes_, std::min(staging_piece_bytes_, payload_bytes - offset));
        fill(offset, dst);
        on_rank([&] { tickets_[k] = exported_->write_async(slot * bucket_bytes_ + offset, dst); });
      }
      // The whole bucket is in the slot before the slot message announces it.
      on_rank([&] { exported_->wait_written(*std::max_element(tickets_.begin(), tickets_.end())); });
    } catch (...) {
      drain();
      throw;
    }
    announce(slot, std::move(entries), payload_bytes);
    return true;
  }
  void finish() override { control_.sender(rank_).finish(); }
  void fail(const std::string& message) noexcept override { control_.sender(rank_).fail(message); }

  ReceivedBatch receive(std::span<uint8_t> into) override {
    std::array<uint8_t, kCudaIpcControlBytes> buffer{};
    while (true) {
      ReceivedBatch batch = control_.receiver(rank_).receive(buffer);
      if (batch.end) return batch;
      if (!imported_) {
        import(batch, buffer);
        continue;
      }
      SlotMessage message{};
      if (batch.payload_bytes != sizeof message) malformed(batch.payload_bytes, "slot message");
      std::memcpy(&message, buffer.data(), sizeof message);
      if (message.magic != kSlotMagic || message.slot >= slots_ || message.payload_bytes > bucket_bytes_) {
        fail_rank(ErrorKind::Format, rank_,
                  fmt::format("cuda-ipc: corrupt slot message: slot {} of {}, {} B in a bucket of {} B", message.slot,
                              slots_, message.payload_bytes, bucket_bytes_));
      }
      if (message.payload_bytes > into.size()) {
        fail_rank(ErrorKind::Mismatch, rank_,
                  fmt::format("received bucket of {} B exceeds the receive buffer of {} B", message.payload_bytes,
                              into.size()));
      }
      on_rank([&] { imported_->read(message.slot * bucket_bytes_, into.first(message.payload_bytes)); });
      batch.payload_bytes = message.payload_bytes;
      return batch;
    }
  }

  void cancel(const std::string& reason) noexcept override { control_.receiver(rank_).cancel(reason); }

  /// Drops this side's device memory (the import first: the exporter's outlives it; the ring, whose destruction
  /// waits for its copies, before the staging they read).
  void close() noexcept {
    imported_.reset();
    exported_.reset();
    staging_.reset();
  }

 private:
  void check_payload(uint64_t bytes) const {
    if (bytes > bucket_bytes_) {
      fail_rank(ErrorKind::Mismatch, rank_,
                fmt::format("bucket of {} B exceeds bucket_size_bytes {} B", bytes, bucket_bytes_));
    }
  }

  /// Sends the slot message of a bucket whose bytes are in device slot `slot`.
  void announce(uint64_t slot, std::vector<WireEntry> entries, uint64_t payload_bytes) {
    const SlotMessage message{.magic = kSlotMagic, .slot = slot, .payload_bytes = payload_bytes};
    control_.sender(rank_).send(Bucket{.entries = std::move(entries), .payload = encode(message)});
    ++sent_;
  }

  /// Waits for every staged copy still running (a bucket abandoned mid-way), so no copy reads a staging piece
  /// that is filled again or freed. Errors are dropped: the bucket's own error is the one that matters.
  void drain() noexcept {
    try {
      exported_->wait_written(*std::max_element(tickets_.begin(), tickets_.end()));
    } catch (...) {
    }
  }

  [[noreturn]] void malformed(uint64_t bytes, const char* what) const {
    fail_rank(ErrorKind::Format, rank_, fmt::format("cuda-ipc: control message of {} B is not a {}", bytes, what));
  }

  void import(const ReceivedBatch& batch, std::span<const uint8_t> buffer) {
    Hello hello{};
    if (batch.payload_bytes != sizeof hello || !batch.entries.empty()) malformed(batch.payload_bytes, "handshake");
    std::memcpy(&hello, buffer.data(), sizeof hello);
    if (hello.magic != kHelloMagic) malformed(batch.payload_bytes, "handshake");
    if (hello.exporter_pid == static_cast<int32_t>(getpid())) {
      fail_rank(ErrorKind::State, rank_,
                fmt::format("cuda-ipc: the bucket ring was exported by this very process (pid {}); a CUDA IPC "
                            "handle is imported only by a process other than its exporter",
                            hello.exporter_pid));
    }
    if (hello.slot_bytes != bucket_bytes_ || hello.slots != slots_) {
      fail_rank(ErrorKind::Mismatch, rank_,
                fmt::format("cuda-ipc: the sender's ring has {} slots of {} B, the receiver expects {} slots of "
                            "bucket_size_bytes {} B (both sides must use the same size)",
                            hello.slots, hello.slot_bytes, slots_, bucket_bytes_));
    }
    const int local = local_gpu_id(rank_, hello.physical_gpu, base_gpu_id_, device_);
    std::array<uint8_t, 16> uuid{};
    on_rank([&] { uuid = ipc_.device_uuid(local); });
    if (uuid != hello.gpu_uuid) {
      fail_rank(ErrorKind::Mismatch, rank_,
                fmt::format("cuda-ipc: the sender's bucket ring (physical GPU {}) is not on engine TP rank {}'s "
                            "local GPU {}: their GPU UUIDs differ (check base_gpu_id and the GPUs both processes see)",
                            hello.physical_gpu, rank_, local));
    }
    on_rank([&] { imported_ = ipc_.open(local, IpcMemHandle{hello.handle}, slots_ * bucket_bytes_); });
  }

  /// Runs `fn`, a DeviceIpc call, raising its error again with the text every refit error has ("refit: rank R:").
  template <class Fn>
  void on_rank(Fn&& fn) const {
    try {
      fn();
    } catch (const Error& e) {
      fail_rank(e.kind(), rank_, std::string("cuda-ipc: ") + e.what());
    }
  }

  int rank_;
  ShmTransport& control_;
  uint64_t bucket_bytes_;
  const DeviceIpc& ipc_;
  int device_;
  int base_gpu_id_;
  size_t slots_;
  size_t staging_pieces_;
  uint64_t staging_piece_bytes_;
  // Sender side.
  std::unique_ptr<ExportedDeviceMemory> exported_;
  std::unique_ptr<PinnedHostMemory> staging_;
  std::vector<uint64_t> tickets_;  // [staging piece] the ticket of its last copy, 0 before the first
  uint64_t sent_ = 0;
  std::mutex spare_mu_;
  std::vector<uint8_t> spare_;
  std::unique_ptr<ImportedDeviceMemory> imported_;  // receiver side
};

CudaIpcTransport::CudaIpcTransport(ShmTransport& control, uint64_t bucket_size_bytes, const DeviceIpc& ipc,
                                   CudaIpcGpus gpus, CudaIpcStaging staging)
    : bucket_size_bytes_(bucket_size_bytes) {
  if (bucket_size_bytes == 0 || control.bucket_size_bytes() != kCudaIpcControlBytes ||
      static_cast<size_t>(control.ranks()) != gpus.rank_devices.size()) {
    throw Error(ErrorKind::Mismatch,
                fmt::format("refit: cuda-ipc transport needs bucket_size_bytes > 0 (got {}) and a control ring of "
                            "{} B messages (got {} B) with one rank per GPU entry ({} ranks, {} GPUs)",
                            bucket_size_bytes, kCudaIpcControlBytes, control.bucket_size_bytes(), control.ranks(),
                            gpus.rank_devices.size()));
  }
  if (staging.pieces == 0 || staging.piece_bytes == 0) {
    throw Error(ErrorKind::Mismatch, fmt::format("refit: cuda-ipc transport: staging of {} pieces of {} B (both must "
                                                 "be > 0)", staging.pieces, staging.piece_bytes));
  }
  const size_t slots = device_slots(control.depth());
  uint64_t ring_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(slots), bucket_size_bytes, &ring_bytes)) {
    throw Error(ErrorKind::Mismatch, fmt::format("refit: cuda-ipc transport: a ring of {} slots of {} B overflows "
                                                 "64 bits", slots, bucket_size_bytes));
  }
  for (int r = 0; r < control.ranks(); ++r) {
    channels_.push_back(std::make_unique<Channel>(r, control, bucket_size_bytes, ipc,
                                                  gpus.rank_devices[static_cast<size_t>(r)], gpus.base_gpu_id, slots,
                                                  staging));
  }
}

CudaIpcTransport::~CudaIpcTransport() {
  for (auto& c : channels_) c->close();
}

SenderEndpoint& CudaIpcTransport::sender(int rank) { return *channels_.at(static_cast<size_t>(rank)); }
void CudaIpcTransport::open_sender(int rank) { channels_.at(static_cast<size_t>(rank))->open(); }
ReceiverEndpoint& CudaIpcTransport::receiver(int rank) { return *channels_.at(static_cast<size_t>(rank)); }

}  // namespace wsb::refit
