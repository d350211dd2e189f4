#pragma once
// One receiver per engine TP rank, each on its own thread: every rank calls next(rank) once per batch; the call
// returns when all ranks arrived, with that rank's payload of the same aligned batch (payload index i to rank i) or
// the same error on every rank. Arrival of all ranks is what lets the aligner recycle the previous batch's buffers:
// a rank must be done with its previous RankBatch when it calls next() again.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors.hpp"
#include "modes/refit/stream_aligner.hpp"

namespace wsb::refit {

/// Rank `rank`'s share of one aligned batch; valid until that rank's next call of next().
struct RankBatch {
  uint64_t sequence = 0;
  size_t first_weight = 0;
  std::span<const std::string_view> names;
  std::span<const WeightView> weights;  ///< weights[k] is this rank's bytes of names[k]
};

class RankReceiverGroup {
 public:
  /// Drives `aligner` (which must outlive the group) for aligner.ranks() threads.
  explicit RankReceiverGroup(StreamAligner& aligner);

  /// Blocks until every rank called next() for this step; returns this rank's batch, or nullopt at the end of the
  /// refit. Throws, on every rank, an Error of the same kind and text as the aligner's (or abort()'s).
  /// Each rank calls it from one thread; rank in [0, ranks).
  std::optional<RankBatch> next(int rank);

  /// Fails the refit from rank `rank` (e.g. its apply step threw): every rank waiting in or later calling next()
  /// throws Error(kind, "refit: rank R: aborted: <message>"). Never throws; the first failure wins.
  void abort(int rank, ErrorKind kind, const std::string& message) noexcept;

 private:
  [[noreturn]] void throw_error() const;

  StreamAligner& aligner_;
  int ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  const AlignedBatch* current_ = nullptr;
  std::optional<ErrorKind> error_kind_;
  std::string error_text_;
};

}  // namespace wsb::refit
