#include "modes/refit/shm_transport.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "modes/refit/refit_error.hpp"
#include "modes/refit/shm_wire.hpp"

// Synchronisation: each rank's ring is single-producer single-consumer (one sender thread, one receiver at a time),
// so it needs no lock at all: the sender writes a slot, then publishes it with a release store of `head`; the
// receiver reads it after an acquire load of `head`, then frees it with a release store of `tail`. Lock-free
// std::atomic_ref operations are address-free, so they work on a mapping shared by two processes. A process that
// dies between two stores leaves a consistent ring (a slot is either published or not), and there is no lock it
// could die holding -- the reason for not using a robust pthread mutex: glibc 2.36's process-shared condition
// variables also keep per-waiter state (__g_refs) that a waiter killed inside pthread_cond_wait never releases, so
// the surviving side's next pthread_cond_broadcast can block forever. Blocking uses raw shared futexes on two event
// counters (bumped after every sender / receiver action): C++20 std::atomic::wait cannot serve here, because
// libstdc++ waits with FUTEX_WAIT_PRIVATE and skips the wake syscall when its process-local waiter table is empty,
// so a wake from the other process would be lost; and it has no timeout, which the liveness checks need.

namespace wsb::refit {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kOpen = 0, kFinished = 1, kFailed = 2;           // ControlBlock::state
constexpr uint32_t kNotCancelled = 0, kCancelling = 1, kCancelled = 2;  // ControlBlock::cancelled
constexpr size_t kFailureCapacity = 4096;

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free && std::atomic_ref<uint32_t>::is_always_lock_free &&
                  std::atomic_ref<int32_t>::is_always_lock_free,
              "the shared ring needs lock-free (address-free) atomics");

/// One rank's control block in the mapping (zero = an open, empty ring). Words written by the sender and by the
/// receiver sit on separate cache lines; every field is accessed through std::atomic_ref except the two texts:
/// `failure` is written before the release store of `state` = kFailed and read after its acquire load, `cancel` the
/// same way around `cancelled` = kCancelled.
struct ControlBlock {
  alignas(64) uint64_t head;  // buckets published by the sender
  uint32_t sender_events;     // futex word: bumped after every publish, finish and fail
  uint32_t state;             // kOpen / kFinished / kFailed; written by the sender only
  int32_t sender_pid;         // the process that uses the sender endpoint (0: none yet)
  uint32_t failure_bytes;
  alignas(64) uint64_t tail;  // buckets freed by the receiver
  uint32_t receiver_events;   // futex word: bumped after every free and cancel
  uint32_t cancelled;         // kNotCancelled / kCancelling (text being written) / kCancelled: the receiver gave up
  int32_t receiver_pid;       // the process that uses the receiver endpoint (0: none yet)
  uint32_t cancel_bytes;
  alignas(64) char failure[kFailureCapacity];  // fail() message
  alignas(64) char cancel[kFailureCapacity];   // cancel() reason
};

/// Start of every slot; the encoded entries follow it, the payload starts at Geometry::payload_offset.
struct SlotHeader {
  uint64_t payload_bytes;
  uint64_t entry_count;
  uint64_t entries_bytes;
};

template <class T>
std::atomic_ref<T> at(T& word) {
  return std::atomic_ref<T>(word);
}

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

/// Sleeps until `*word` changes from `seen`, a wake, or `slice` passes; callers re-check their condition anyway.
void futex_wait(uint32_t* word, uint32_t seen, std::chrono::milliseconds slice) {
  const timespec timeout{.tv_sec = static_cast<time_t>(slice.count() / 1000),
                         .tv_nsec = static_cast<long>(slice.count() % 1000) * 1000000};
  // Not FUTEX_WAIT_PRIVATE: the waker is another process.
  syscall(SYS_futex, word, FUTEX_WAIT, seen, &timeout, nullptr, 0);
}

/// Counts one event on `word` and wakes every waiter (at most one per side in practice).
void signal_event(uint32_t* word) {
  at(*word).fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

/// Records the calling process as the user of one side of a channel.
void claim(int32_t& pid_word) {
  const auto me = static_cast<int32_t>(getpid());
  if (at(pid_word).load(std::memory_order_relaxed) != me) at(pid_word).store(me, std::memory_order_relaxed);
}

/// Where one rank's ring lies in the mapping and how big its parts are (bytes).
struct RingGeometry {
  uint64_t bucket_bytes = 0;
  size_t depth = 0;
  uint64_t max_entries_bytes = 0;
  uint64_t payload_offset = 0;  // from the slot start, page aligned
  uint64_t slot_stride = 0;
};

}  // namespace

/// One rank's ring in the shared mapping; implements both endpoints (each process uses one of them).
class ShmTransport::Channel final : public SenderEndpoint, public ReceiverEndpoint {
 public:
  Channel(int rank, void* control, uint8_t* slots, const RingGeometry& geometry, const ShmTransportOptions& options)
      : rank_(rank), ctl_(static_cast<ControlBlock*>(control)), slots_(slots), geo_(geometry), options_(options) {}

  void send(Bucket bucket) override {
    if (bucket.payload.size() > geo_.bucket_bytes) {
      fail_rank(ErrorKind::Mismatch, rank_,
                fmt::format("bucket of {} B exceeds bucket_size_bytes {} B", bucket.payload.size(), geo_.bucket_bytes));
    }
    const uint64_t entries_bytes = checked_entries_bytes(bucket.entries);
    claim(ctl_->sender_pid);
    if (at(ctl_->state).load(std::memory_order_relaxed) != kOpen) {
      fail_rank(ErrorKind::State, rank_, "send after the stream was closed");
    }
    const uint64_t head = at(ctl_->head).load(std::memory_order_relaxed);
    wait_for_free_slot(head);
    uint8_t* slot = slot_at(head);
    const SlotHeader header{.payload_bytes = bucket.payload.size(),
                            .entry_count = bucket.entries.size(),
                            .entries_bytes = entries_bytes};
    std::memcpy(slot, &header, sizeof header);
    encode_entries(bucket.entries, {slot + sizeof header, entries_bytes});
    if (!bucket.payload.empty()) std::memcpy(slot + geo_.payload_offset, bucket.payload.data(), bucket.payload.size());
    at(ctl_->head).store(head + 1, std::memory_order_release);
    signal_event(&ctl_->sender_events);
    spare_ = std::move(bucket.payload);  // copied into the slot: the sender may pack its next bucket into it
  }

  std::vector<uint8_t> spare_payload() override { return std::exchange(spare_, {}); }

  void finish() override {
    claim(ctl_->sender_pid);
    if (at(ctl_->state).load(std::memory_order_relaxed) == kOpen) {
      at(ctl_->state).store(kFinished, std::memory_order_release);
    }
    signal_event(&ctl_->sender_events);
  }

  void fail(const std::string& message) noexcept override {
    claim(ctl_->sender_pid);
    if (at(ctl_->state).load(std::memory_order_relaxed) == kOpen) {
      at(ctl_->failure_bytes).store(copy_text(message, ctl_->failure), std::memory_order_relaxed);
      at(ctl_->state).store(kFailed, std::memory_order_release);
    }
    signal_event(&ctl_->sender_events);
  }

  ReceivedBatch receive(std::span<uint8_t> into) override {
    claim(ctl_->receiver_pid);
    while (true) {
      // Read the event count before looking at the ring: an event after this load makes futex_wait return at once.
      const uint32_t seen = at(ctl_->sender_events).load(std::memory_order_acquire);
      if (auto batch = try_take(into)) return std::move(*batch);
      if (cancelled()) {  // this side gave up: nothing more is taken, whatever the sender still does
        const uint32_t n = std::min<uint32_t>(at(ctl_->cancel_bytes).load(std::memory_order_relaxed),
                                              kFailureCapacity);
        fail_rank(ErrorKind::Io, rank_, fmt::format("receiver gave up: {}", std::string(ctl_->cancel, n)));
      }
      if (options_.sender_alive && !options_.sender_alive()) {
        // The sender may have published or finished right before it exited: look once more now that it is gone.
        if (auto batch = try_take(into)) return std::move(*batch);
        fail_rank(ErrorKind::Io, rank_,
                  "transport failed mid-stream: sender process exited before finishing the stream");
      }
      futex_wait(&ctl_->sender_events, seen, options_.wait_slice);
    }
  }

  void cancel(const std::string& reason) noexcept override {
    // Runs while another thread may be inside receive() on this channel (RankReceiverGroup pulls rank r from
    // whichever rank thread arrives last), and the destructor may cancel again: the text is claimed once, the first
    // reason wins (as in InProcTransport). tail is left alone, so a concurrent receive never moves it backwards.
    uint32_t expected = kNotCancelled;
    if (at(ctl_->cancelled).compare_exchange_strong(expected, kCancelling, std::memory_order_acquire)) {
      const std::string_view text = reason.empty() ? std::string_view("cancelled") : std::string_view(reason);
      at(ctl_->cancel_bytes).store(copy_text(text, ctl_->cancel), std::memory_order_relaxed);
      at(ctl_->cancelled).store(kCancelled, std::memory_order_release);
    }
    signal_event(&ctl_->receiver_events);
  }

  /// Destructor step in process `pid`: close whichever side of the channel this process used.
  void close_side(int32_t pid) noexcept {
    if (at(ctl_->receiver_pid).load(std::memory_order_relaxed) == pid) {
      cancel("the receiving process closed the transport");  // the sender may be waiting for a slot
    }
    if (at(ctl_->sender_pid).load(std::memory_order_relaxed) == pid) {
      fail("sender closed the transport before finishing the stream");  // no-op once finished
    }
  }

  uint64_t published() const { return at(ctl_->head).load(std::memory_order_acquire); }

 private:
  uint8_t* slot_at(uint64_t index) const { return slots_ + (index % geo_.depth) * geo_.slot_stride; }

  /// Copies `text` into a kFailureCapacity area; returns the bytes kept (a longer text is cut, never dropped).
  static uint32_t copy_text(std::string_view text, char* area) noexcept {
    const size_t n = std::min(text.size(), kFailureCapacity);
    std::memcpy(area, text.data(), n);
    return static_cast<uint32_t>(n);
  }

  bool cancelled() const { return at(ctl_->cancelled).load(std::memory_order_acquire) == kCancelled; }

  /// Bytes the entries take in a slot header; Error(Resource) naming the first weight that does not fit.
  uint64_t checked_entries_bytes(const std::vector<WireEntry>& entries) const {
    uint64_t total = 0;
    for (const auto& e : entries) total += encoded_entry_bytes(e);
    if (total <= geo_.max_entries_bytes) return total;
    uint64_t used = 0;
    size_t i = 0;
    while (used + encoded_entry_bytes(entries[i]) <= geo_.max_entries_bytes) used += encoded_entry_bytes(entries[i++]);
    fail_rank(ErrorKind::Resource, rank_,
              fmt::format("weight '{}' (entry {} of {}) does not fit the slot header: the bucket's entries need {} B, "
                          "max_entries_bytes is {} B",
                          entries[i].spec.name, i + 1, entries.size(), total, geo_.max_entries_bytes));
  }

  void wait_for_free_slot(uint64_t head) const {
    while (true) {
      const uint32_t seen = at(ctl_->receiver_events).load(std::memory_order_acquire);
      if (cancelled()) {
        const uint32_t n = std::min<uint32_t>(at(ctl_->cancel_bytes).load(std::memory_order_relaxed),
                                              kFailureCapacity);
        fail_rank(ErrorKind::Io, rank_, fmt::format("receiver gave up: {}", std::string(ctl_->cancel, n)));
      }
      if (head - at(ctl_->tail).load(std::memory_order_acquire) < geo_.depth) return;
      if (options_.receiver_alive && !options_.receiver_alive()) {
        fail_rank(ErrorKind::Io, rank_, "receiver process exited before the end of the stream");
      }
      futex_wait(&ctl_->receiver_events, seen, options_.wait_slice);
    }
  }

  /// The next batch if one is ready (or the end), nullopt when the ring is empty and the stream open.
  std::optional<ReceivedBatch> try_take(std::span<uint8_t> into) {
    const uint32_t state = at(ctl_->state).load(std::memory_order_acquire);
    if (state == kFailed) {
      const uint32_t n = std::min<uint32_t>(at(ctl_->failure_bytes).load(std::memory_order_relaxed),
                                            kFailureCapacity);
      fail_rank(ErrorKind::Io, rank_, fmt::format("transport failed mid-stream: {}", std::string(ctl_->failure, n)));
    }
    const uint64_t tail = at(ctl_->tail).load(std::memory_order_relaxed);
    // `state` was loaded first: when it says finished, every publish happened before, so `head` is final. A
    // cancelled channel has dropped what was queued (as InProcTransport's cancel clears its queue).
    if (cancelled() || at(ctl_->head).load(std::memory_order_acquire) == tail) {
      if (state == kFinished) return ReceivedBatch{.end = true, .entries = {}, .payload_bytes = 0};
      return std::nullopt;
    }
    // The bucket is consumed whatever happens below, as InProcTransport pops it before checking it.
    struct FreeSlot {
      Channel& channel;
      uint64_t tail;
      ~FreeSlot() {
        at(channel.ctl_->tail).store(tail + 1, std::memory_order_release);
        signal_event(&channel.ctl_->receiver_events);
      }
    } free_slot{*this, tail};
    const uint8_t* slot = slot_at(tail);
    SlotHeader header;
    std::memcpy(&header, slot, sizeof header);
    if (header.payload_bytes > geo_.bucket_bytes || header.entries_bytes > geo_.max_entries_bytes) {
      fail_rank(ErrorKind::Format, rank_,
                fmt::format("corrupt slot header: {} B of payload and {} B of entries in a slot of {} B and {} B",
                            header.payload_bytes, header.entries_bytes, geo_.bucket_bytes, geo_.max_entries_bytes));
    }
    auto entries = decode_entries(rank_, {slot + sizeof header, header.entries_bytes}, header.entry_count);
    if (header.payload_bytes > into.size()) {
      fail_rank(ErrorKind::Mismatch, rank_,
                fmt::format("received bucket of {} B exceeds the receive buffer of {} B", header.payload_bytes,
                            into.size()));
    }
    parallel_copy(options_.receive_copy_pool, into.first(header.payload_bytes),
                  {slot + geo_.payload_offset, header.payload_bytes});
    return ReceivedBatch{.end = false, .entries = std::move(entries), .payload_bytes = header.payload_bytes};
  }

  int rank_;
  ControlBlock* ctl_;
  uint8_t* slots_;
  RingGeometry geo_;
  const ShmTransportOptions& options_;
  std::vector<uint8_t> spare_;  // sender side only (one thread)
};

ShmTransport::ShmTransport(int ranks, uint64_t bucket_size_bytes, ShmTransportOptions options)
    : ShmTransport(-1, ranks, bucket_size_bytes, std::move(options)) {}

std::unique_ptr<ShmTransport> ShmTransport::attach(int fd, int ranks, uint64_t bucket_size_bytes,
                                                   ShmTransportOptions options) {
  if (fd < 0) throw Error(ErrorKind::Mismatch, "refit: shared-memory transport: attach needs a memfd, got fd -1");
  return std::unique_ptr<ShmTransport>(new ShmTransport(fd, ranks, bucket_size_bytes, std::move(options)));
}

ShmTransport::ShmTransport(int attach_fd, int ranks, uint64_t bucket_size_bytes, ShmTransportOptions options)
    : bucket_size_bytes_(bucket_size_bytes), depth_(options.depth), options_(std::move(options)) {
  if (ranks < 1 || depth_ < 1 || bucket_size_bytes == 0 || options_.max_entries_bytes == 0 ||
      options_.wait_slice.count() <= 0) {
    throw Error(ErrorKind::Mismatch,
                fmt::format("refit: shared-memory transport needs ranks >= 1, depth >= 1, bucket_size_bytes > 0, "
                            "max_entries_bytes > 0 and wait_slice > 0 (got {}, {}, {}, {}, {} ms)",
                            ranks, depth_, bucket_size_bytes, options_.max_entries_bytes,
                            options_.wait_slice.count()));
  }
  RingGeometry geo{.bucket_bytes = bucket_size_bytes, .depth = depth_, .max_entries_bytes = options_.max_entries_bytes};
  geo.payload_offset = round_up(sizeof(SlotHeader) + geo.max_entries_bytes, kPage);
  geo.slot_stride = geo.payload_offset + round_up(bucket_size_bytes, kPage);
  const uint64_t control_bytes = round_up(sizeof(ControlBlock) * static_cast<uint64_t>(ranks), kPage);
  uint64_t ring_bytes = 0;
  if (__builtin_mul_overflow(geo.slot_stride, static_cast<uint64_t>(ranks) * depth_, &ring_bytes) ||
      __builtin_add_overflow(ring_bytes, control_bytes, &mapping_bytes_)) {
    throw Error(ErrorKind::Resource, "refit: shared-memory transport: ring size overflows 64 bits");
  }
  const auto resource_error = [&](const char* what) {
    return Error(ErrorKind::Resource, fmt::format("refit: shared-memory transport: {} of {} B failed: {}", what,
                                                  mapping_bytes_, std::strerror(errno)));
  };
  if (attach_fd >= 0) {
    // Another process created the rings (zero = open and empty); they must have the geometry computed here.
    struct stat st {};
    if (fstat(attach_fd, &st) != 0) {
      const Error e = resource_error("fstat of the attached memfd");
      close(attach_fd);
      throw e;
    }
    if (static_cast<uint64_t>(st.st_size) != mapping_bytes_) {
      close(attach_fd);
      throw Error(ErrorKind::Mismatch,
                  fmt::format("refit: shared-memory transport: the attached memfd holds {} B, the geometry ({} ranks, "
                              "{} slots of {} B) needs {} B",
                              st.st_size, ranks, depth_, bucket_size_bytes, mapping_bytes_));
    }
    fd_ = attach_fd;
  } else {
    // A memfd rather than MAP_ANONYMOUS: fallocate reserves the pages now, where a plain shared mapping would raise
    // SIGBUS at the first touch that the host cannot back -- mid-refit, in whichever process touched it. The fd is
    // kept (close-on-exec) so a process started later can attach().
    fd_ = memfd_create("wsbench-refit-shm", MFD_CLOEXEC);
    if (fd_ < 0) throw resource_error("memfd_create");
    if (ftruncate(fd_, static_cast<off_t>(mapping_bytes_)) != 0) {
      const Error e = resource_error("ftruncate");
      close(fd_);
      throw e;
    }
    if (fallocate(fd_, 0, 0, static_cast<off_t>(mapping_bytes_)) != 0 && errno != EOPNOTSUPP && errno != ENOSYS) {
      const Error e = resource_error("fallocate");
      close(fd_);
      throw e;
    }
  }
  // MAP_POPULATE moves the page-table faults of this process to setup; a forked child faults its own (cheaply: the
  // pages exist).
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, 0);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    const Error e = resource_error("mmap");
    close(fd_);
    throw e;
  }
  auto* base = static_cast<uint8_t*>(mapping_);
  for (int r = 0; r < ranks; ++r) {
    uint8_t* slots = base + control_bytes + static_cast<uint64_t>(r) * depth_ * geo.slot_stride;
    channels_.push_back(std::make_unique<Channel>(r, base + r * sizeof(ControlBlock), slots, geo, options_));
  }
}

ShmTransport::~ShmTransport() {
  const auto me = static_cast<int32_t>(getpid());
  for (auto& c : channels_) c->close_side(me);
  channels_.clear();
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
  if (fd_ >= 0) close(fd_);
}

SenderEndpoint& ShmTransport::sender(int rank) { return *channels_.at(static_cast<size_t>(rank)); }
ReceiverEndpoint& ShmTransport::receiver(int rank) { return *channels_.at(static_cast<size_t>(rank)); }

void ShmTransport::set_sender_alive(PeerAlive alive) { options_.sender_alive = std::move(alive); }
void ShmTransport::set_receiver_alive(PeerAlive alive) { options_.receiver_alive = std::move(alive); }
void ShmTransport::set_receive_copy_pool(WorkPool* pool) { options_.receive_copy_pool = pool; }

uint64_t ShmTransport::buckets_published(int rank) const {
  return channels_.at(static_cast<size_t>(rank))->published();
}

}  // namespace wsb::refit
