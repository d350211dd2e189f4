#pragma once
// Receiver side of the refit mode: aligns the rank-local bucket streams (one per engine TP rank, boundaries free to
// differ) by weight name into aligned batches that cover the same weights on every rank, in global weight order,
// each weight exactly once.
//
// Recycling rule: rank r's transport batch lives in one buffer of the shared BufferPool. The aligner takes rank r's
// next transport batch only when every weight of its current one has been delivered (the rank's queue is empty),
// and returns the buffer to the pool right before that. A delivered AlignedBatch stays valid exactly until the next
// call of next(): nothing of it may be kept past that call (copy out what must outlive it).
// Receiving: inline (ReceiveMode::Inline), next() receives on its calling thread, one transport batch per rank
// outstanding, so a pool of ranks() buffers suffices; ahead (ReceiveMode::Ahead), each rank receives on a thread of
// its own into a second buffer while the batch before is being delivered and applied, so the receive copy overlaps
// the placing and the ranks receive in parallel: two batches per rank outstanding, a pool of 2 x ranks() buffers.
// Both deliver the same batches and raise the same errors in the same order.
//
// How an apply step consumes aligned batches (not wired into the engine yet): for each batch, payloads[i] goes to
// engine TP rank i (never another index), through the ordinary loader (shard/fuse) and quantization post-load
// transform into that rank's runtime storages, or into its rank image when the refit stages first; dtype_groups()
// lets it handle one dtype at a time. weight_version advances once per refit, after next() returned nullptr on
// every rank and every rank applied successfully -- never per batch. An error from next() means the refit failed:
// nothing is served at the target version (the caller restores or stops serving if mutation had begun).
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/errors.hpp"
#include "modes/refit/buffer_pool.hpp"
#include "modes/refit/refit_layout.hpp"
#include "modes/refit/transport.hpp"

namespace wsb::refit {

/// One rank's bytes of one weight inside an aligned batch. Both members point into aligner state that the next
/// next() call releases.
struct WeightView {
  const TensorSpec* spec = nullptr;  ///< the spec the stream carried (equal to the layout's for that rank)
  std::span<const uint8_t> bytes;    ///< spec->bytes() bytes, inside a pooled receive buffer
};

/// Weights [first_weight, first_weight + names.size()) of the global order, present on every rank.
struct AlignedBatch {
  uint64_t sequence = 0;      ///< 0-based number of this batch within the refit
  size_t first_weight = 0;    ///< global index of names[0]
  std::vector<std::string_view> names;
  /// payloads[i][k]: TP rank i's bytes of names[k].
  std::vector<std::vector<WeightView>> payloads;

  /// Indices k of rank `rank`'s payload grouped by dtype, groups in order of first appearance, indices ascending.
  std::vector<std::pair<DType, std::vector<size_t>>> dtype_groups(int rank) const;
};

/// How an aligner receives its transport batches (see the recycling rule above).
enum class ReceiveMode { Inline, Ahead };

/// Aligner over every rank's receiver endpoint; next() is called from one thread at a time (see RankReceiverGroup
/// for one thread per rank).
class StreamAligner {
 public:
  /// Setup: refuses (check_bucket_sizes) a pool whose buffer size differs from transport.bucket_size_bytes(),
  /// throws Error(Mismatch) when layout and transport rank counts differ or the pool has fewer than ranks() buffers
  /// (2 x ranks() for ReceiveMode::Ahead). layout, transport and pool must outlive the aligner.
  StreamAligner(const RefitLayout& layout, Transport& transport, BufferPool& pool,
                ReceiveMode mode = ReceiveMode::Inline);
  /// Ahead: cancels the receiver endpoints still receiving (a refit that ended early: their senders stop) and joins
  /// the receive threads.
  ~StreamAligner();
  StreamAligner(const StreamAligner&) = delete;
  StreamAligner& operator=(const StreamAligner&) = delete;

  /// Releases the previous batch and returns the next aligned batch, or nullptr once every weight was delivered and
  /// every rank's stream ended. Errors (Error naming the rank and weight, "refit: rank R: ..."): a stream that ends
  /// early (Missing), an empty transport batch (Format), a weight missing on a rank (Missing), an unknown or
  /// duplicate weight, a dtype or shape differing from the layout (Mismatch), a batch after the last weight
  /// (Format), a transport failure (Io). After an error every later call rethrows the same error.
  const AlignedBatch* next();

  int ranks() const { return layout_.ranks(); }
  /// Aligned batches returned so far.
  uint64_t batches_delivered() const { return batches_delivered_; }
  /// Payload bytes delivered so far, all ranks.
  uint64_t bytes_delivered() const { return bytes_delivered_; }

 private:
  struct RankStream {
    PooledBuffer buffer;
    std::vector<WireEntry> entries;  // the current transport batch
    size_t first_index = 0;          // global index of entries[0]
    size_t received = 0;             // weights received and validated on this rank
    uint64_t batches = 0;            // transport batches received
  };
  /// One rank's receive thread (ReceiveMode::Ahead): receives into `buffer` when asked, then holds the result.
  struct Ahead {
    std::mutex mu;
    std::condition_variable cv;
    bool asked = false;  // a receive is wanted or running
    bool ready = false;  // `batch` or `error` holds its result
    bool stop = false;
    PooledBuffer buffer;
    ReceivedBatch batch;
    std::exception_ptr error;
    std::thread thread;
  };
  const AlignedBatch* advance();
  void pull(int rank);
  void confirm_end(int rank);
  /// The rank's next transport batch in `buffer`: received here (Inline), or taken from its receive thread, which
  /// then starts on the batch after it unless this one ends the stream (Ahead).
  ReceivedBatch receive(int rank, PooledBuffer& buffer);
  void ask(int rank);
  /// Rank `rank`'s receive thread; `a` is its entry of ahead_.
  void receive_loop(int rank, Ahead& a);
  /// Stops and joins the receive threads started (Ahead), cancelling the receives still running.
  void stop_receivers() noexcept;
  void validate(int rank, const WireEntry& e, uint64_t payload_bytes);

  const RefitLayout& layout_;
  Transport& transport_;
  BufferPool& pool_;
  ReceiveMode mode_;
  std::vector<std::unique_ptr<Ahead>> ahead_;
  std::vector<RankStream> streams_;
  AlignedBatch batch_;
  size_t cursor_ = 0;  // global index of the first weight not yet delivered
  bool started_ = false;
  bool done_ = false;
  uint64_t bytes_delivered_ = 0;
  uint64_t batches_delivered_ = 0;
  std::optional<Error> error_;
};

}  // namespace wsb::refit
