#include "modes/refit/receiver_group.hpp"

#include <fmt/format.h>

namespace wsb::refit {

RankReceiverGroup::RankReceiverGroup(StreamAligner& aligner) : aligner_(aligner), ranks_(aligner.ranks()) {}

void RankReceiverGroup::throw_error() const { throw Error(*error_kind_, error_text_); }

std::optional<RankBatch> RankReceiverGroup::next(int rank) {
  std::unique_lock lock(mu_);
  if (error_kind_) throw_error();
  const uint64_t generation = generation_;
  if (++arrived_ == ranks_) {
    arrived_ = 0;
    try {
      current_ = aligner_.next();
    } catch (const Error& e) {
      error_kind_ = e.kind();
      error_text_ = e.what();
    }
    ++generation_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return generation_ != generation || error_kind_.has_value(); });
  }
  if (error_kind_) throw_error();
  if (current_ == nullptr) return std::nullopt;
  const auto& views = current_->payloads[static_cast<size_t>(rank)];
  return RankBatch{.sequence = current_->sequence,
                   .first_weight = current_->first_weight,
                   .names = current_->names,
                   .weights = views};
}

void RankReceiverGroup::abort(int rank, ErrorKind kind, const std::string& message) noexcept {
  std::lock_guard lock(mu_);
  if (!error_kind_) {
    error_kind_ = kind;
    try {
      error_text_ = fmt::format("refit: rank {}: aborted: {}", rank, message);
    } catch (...) {
      error_text_ = "refit: aborted";
    }
  }
  cv_.notify_all();
}

}  // namespace wsb::refit
