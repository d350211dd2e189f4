#pragma once
// Prepare-side parallelism: independent items (tensors, storages) handed to a fixed number of worker threads,
// largest first so the longest item never starts last.
#include <cstddef>
#include <cstdint>
#include <functional>

namespace wsb {

/// Runs fn(i) for every i in [0, count) on min(threads, count) threads (the caller's thread is one of them),
/// largest bytes(i) first. After a throw, workers start no new items; once all have stopped, the exception of the
/// lowest failing index is rethrown. `done[i]` (if non-null, count entries) is set to true for every item whose fn
/// returned normally, so callers can undo exactly those.
void run_largest_first(size_t count, int threads, const std::function<uint64_t(size_t)>& bytes,
                       const std::function<void(size_t)>& fn, bool* done = nullptr);

}  // namespace wsb
