#include "modes/sync/parallel_fold.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <numeric>
#include <tuple>

#include "core/errors.hpp"
#include "models/quant/code_check.hpp"
#include "modes/sync/work_queue.hpp"

namespace wsb {

FoldScratch& FoldWorkspace::scratch(size_t worker) {
  while (scratch_.size() <= worker) scratch_.push_back(std::make_unique<FoldScratch>());
  return *scratch_[worker];
}

std::vector<OverwriteBody>& FoldWorkspace::bodies(size_t index) {
  if (bodies_.size() <= index) bodies_.resize(index + 1);
  return bodies_[index];
}

uint64_t FoldWorkspace::held_bytes() const {
  uint64_t total = 0;
  for (const auto& per_tensor : bodies_) {
    for (const OverwriteBody& body : per_tensor) total += body.held_bytes();
  }
  return total;
}

namespace {

/// Progress of one tensor across its segments. The hash follows the folded prefix: `folded[s]` is how many bytes
/// of segment s are final; whoever holds `token` hashes from `hashed` up to the end of that prefix.
struct TensorState {
  std::unique_ptr<TensorFold> fold;
  std::unique_ptr<std::atomic<uint64_t>[]> folded;
  /// Multi-segment tensors under "xxh3-128" (one serial digest); one-segment and ranged ones verify on their
  /// worker's hash state.
  std::unique_ptr<Xxh3Hasher> hasher;
  std::atomic<bool> token{false};
  std::atomic<size_t> hash_segment{0};
  std::atomic<uint64_t> hashed{0};
  std::atomic<bool> hash_complete{false};
  std::atomic<size_t> segments_done{0};
  std::atomic<bool> suspect{false};
  std::atomic<bool> finalized{false};
  /// Set once a tensor at or below this one's index failed: its error, not this one's, is the one reported, so
  /// this tensor's remaining segments are skipped. Tensors below the lowest failure keep folding so that a lower
  /// failure still surfaces however the workers were scheduled.
  std::atomic<bool> stop{false};
  bool verified = false;
};

class Run {
 public:
  Run(const UpdatePlan& plan, std::span<const FoldTarget> targets, int threads, FoldWorkspace& workspace,
      const FoldListener& listener, const FoldOptions& options)
      : plan_(plan),
        options_(options),
        targets_(targets),
        threads_(std::max(threads, 1)),
        workspace_(workspace),
        listener_(listener),
        states_(new TensorState[targets.size()]),
        errors_(targets.size()) {
    for (int w = 0; w < threads_; ++w) workspace_.scratch(static_cast<size_t>(w));
    for (size_t i = 0; i < targets.size(); ++i) workspace_.bodies(i);
  }

  void run() {
    open_all();
    if (failed_) rethrow();
    fold_all();
    if (failed_) {
      unfold_all();
      rethrow();
    }
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (!states_[i].verified) {
        throw Error(ErrorKind::State, fmt::format("tensor '{}': fold ended unverified", targets_[i].spec->name));
      }
    }
  }

 private:
  void record(size_t index) {
    std::lock_guard lock(errors_mutex_);
    if (!errors_[index]) errors_[index] = std::current_exception();
    if (index < lowest_failed_) {
      for (size_t j = index; j < std::min(lowest_failed_, targets_.size()); ++j) states_[j].stop = true;
      lowest_failed_ = index;
    }
    failed_ = true;
  }

  [[noreturn]] void rethrow() {
    for (auto& e : errors_) {
      if (e) std::rethrow_exception(e);
    }
    throw Error(ErrorKind::State, "fold failed without an error");
  }

  /// Headers, frame extents and overwrite bodies of every tensor, largest first (the overwrite decode of a large
  /// tensor is serial). Nothing is mutated.
  void open_all() {
    std::vector<size_t> order(targets_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return targets_[a].bytes.size() > targets_[b].bytes.size(); });
    run_in_order(order.size(), threads_, [&](size_t k, size_t) {
      const size_t i = order[k];
      try {
        TensorState& st = states_[i];
        st.fold = std::make_unique<TensorFold>(plan_, *targets_[i].spec, targets_[i].bytes, workspace_.bodies(i),
                                               options_);
        const size_t segments = st.fold->segment_count();
        if (segments > 1 && !st.fold->expected_checksum().ranged()) {
          st.folded.reset(new std::atomic<uint64_t>[segments]);
          for (size_t s = 0; s < segments; ++s) st.folded[s] = 0;
          st.hasher = std::make_unique<Xxh3Hasher>();
        } else {
          st.hash_complete = true;  // every segment verifies its own ranges as it folds
        }
      } catch (...) {
        record(i);
      }
    });
  }

  /// Every (tensor, segment), the ones with the most of their tensor still ahead of them first: a large tensor's
  /// segments start early (under "xxh3-128" its serial hash follows them), and the segments of two large tensors
  /// interleave.
  void fold_all() {
    std::vector<std::pair<size_t, size_t>> items;
    for (size_t i = 0; i < targets_.size(); ++i) {
      for (size_t s = 0; s < states_[i].fold->segment_count(); ++s) items.emplace_back(i, s);
    }
    auto ahead = [&](const std::pair<size_t, size_t>& item) {
      const TensorFold& f = *states_[item.first].fold;
      return f.bytes().size() - f.segment_begin(item.second);
    };
    std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) { return ahead(a) > ahead(b); });
    run_in_order(items.size(), threads_, [&](size_t k, size_t worker) {
      const auto [i, s] = items[k];
      if (states_[i].stop) return;
      try {
        fold_item(i, s, workspace_.scratch(worker));
      } catch (...) {
        record(i);
      }
    });
  }

  void fold_item(size_t i, size_t s, FoldScratch& scratch) {
    TensorState& st = states_[i];
    TensorFold& fold = *st.fold;
    const ExpectedChecksum& expected = fold.expected_checksum();
    if (fold.segment_count() == 1 || expected.ranged()) {
      // The segment holds whole checksum ranges (the whole tensor under "xxh3-128"): its worker verifies them on
      // its own hash state while the bytes are still in cache.
      RangeVerifier verifier(expected, scratch.hasher, expected.range_at(fold.segment_begin(s)));
      const FoldChunkSink sink = [&](const FoldChunk& c) {
        verifier.update(c.tensor.subspan(c.from, c.to - c.from));
        if (listener_) listener_(i, c);
      };
      if (!fold.fold_segment(s, scratch, sink, &st.stop)) return;
      verifier.require_verified_to(fold.segment_end(s), fold.spec().name, version_string(plan_.to));
      if (fold.suspect_codes(s)) st.suspect = true;
      st.segments_done.fetch_add(1);
      finish_if_complete(i);
      return;
    }
    const uint64_t begin = fold.segment_begin(s);
    const FoldChunkSink sink = [&](const FoldChunk& c) {
      if (listener_) listener_(i, c);
      st.folded[s].store(c.to - begin);
      hash_folded(i);
    };
    if (!fold.fold_segment(s, scratch, sink, &st.stop)) return;
    if (fold.suspect_codes(s)) st.suspect = true;
    st.segments_done.fetch_add(1);
    finish_if_complete(i);
  }

  /// Hashes tensor i's folded prefix as far as it reaches, unless another worker is already doing so. A worker
  /// that extends the prefix while the token is held gives up on it; the holder looks again after releasing.
  void hash_folded(size_t i) {
    TensorState& st = states_[i];
    const TensorFold& fold = *st.fold;
    const size_t segments = fold.segment_count();
    for (;;) {
      if (st.token.exchange(true)) return;
      size_t seg = st.hash_segment.load(std::memory_order_relaxed);
      uint64_t hashed = st.hashed.load(std::memory_order_relaxed);
      while (seg < segments) {
        const uint64_t ready = fold.segment_begin(seg) + st.folded[seg].load();
        if (ready > hashed) {
          st.hasher->update(fold.bytes().subspan(hashed, ready - hashed));
          hashed = ready;
        }
        if (ready != fold.segment_end(seg)) break;
        ++seg;
      }
      st.hash_segment.store(seg, std::memory_order_relaxed);
      st.hashed.store(hashed, std::memory_order_relaxed);
      const bool complete = seg == segments;
      if (complete) st.hash_complete = true;
      st.token = false;
      if (complete) {
        finish_if_complete(i);
        return;
      }
      if (fold.segment_begin(seg) + st.folded[seg].load() <= hashed) return;
    }
  }

  /// Verifies tensor i once every segment is folded and hashed (whichever of the two comes last does it).
  void finish_if_complete(size_t i) {
    TensorState& st = states_[i];
    if (st.segments_done.load() != st.fold->segment_count() || !st.hash_complete.load()) return;
    if (st.finalized.exchange(true)) return;
    if (st.hasher) {
      const TensorFold& fold = *st.fold;
      if (const std::string actual = st.hasher->hex(); actual != fold.expected_checksum().text()) {
        throw_checksum_mismatch(fold.spec().name, version_string(plan_.to), fold.expected_checksum(),
                                ChecksumMismatch{0, 0, fold.bytes().size(), actual});
      }
    }
    verify_codes(i, st.suspect.load());
  }

  /// Tensor i's checksum matched: its codes come next.
  void verify_codes(size_t i, bool suspect) {
    const TensorFold& fold = *states_[i].fold;
    // A matching checksum only proves the bytes are the publisher's: a NaN/Inf code or an E8M0 0xFF scale would
    // still reach the engine, so the target codes are validated before anything live can see them.
    if (suspect) check_codes(fold.spec(), fold.bytes(), fmt::format("publication {}", version_string(plan_.to)));
    states_[i].verified = true;
  }

  void unfold_all() {
    std::vector<std::pair<size_t, size_t>> items;
    for (size_t i = 0; i < targets_.size(); ++i) {
      const TensorFold* fold = states_[i].fold.get();
      if (fold == nullptr) continue;
      for (size_t s = 0; s < fold->segment_count(); ++s) {
        if (fold->applied_bytes(s) > 0) items.emplace_back(i, s);
      }
    }
    std::atomic<bool> lost{false};
    run_in_order(items.size(), threads_, [&](size_t k, size_t worker) {
      const auto [i, s] = items[k];
      try {
        states_[i].fold->unfold_segment(s, workspace_.scratch(worker));
      } catch (...) {
        lost = true;  // out of memory for the scratch: the bytes cannot be put back
      }
    });
    if (lost) {
      throw Error(ErrorKind::State, "fold: restoring the tensors after a failed fold ran out of memory; their "
                                    "bytes are undefined");
    }
  }

  const UpdatePlan& plan_;
  FoldOptions options_;
  std::span<const FoldTarget> targets_;
  int threads_;
  FoldWorkspace& workspace_;
  const FoldListener& listener_;
  std::unique_ptr<TensorState[]> states_;
  std::vector<std::exception_ptr> errors_;
  std::mutex errors_mutex_;
  std::atomic<bool> failed_{false};
  /// Index of the lowest tensor that failed so far (targets.size() and above: none); under errors_mutex_.
  size_t lowest_failed_ = SIZE_MAX;
};

}  // namespace

void fold_in_parallel(const UpdatePlan& plan, std::span<const FoldTarget> targets, int threads,
                      FoldWorkspace& workspace, const FoldListener& listener, const FoldOptions& options) {
  Run(plan, targets, threads, workspace, listener, options).run();
}

}  // namespace wsb
