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
/// run_largest_first whose fn also receives its worker's index in [0, threads) (per-worker scratch, no locking).
void run_largest_first(size_t count, int threads, const std::function<uint64_t(size_t)>& bytes,
                       const std::function<void(size_t item, size_t worker)>& fn, bool* done = nullptr);

/// Runs fn(item, worker) for every item in [0, count), items started in increasing order, on
/// min(threads, count) threads; `worker` in [0, threads) names the thread (the caller's thread is worker 0), so
/// fn can use per-worker scratch without locking. fn must not throw (it records its own errors: an exception
/// escaping it terminates the process).
void run_in_order(size_t count, int threads, const std::function<void(size_t item, size_t worker)>& fn);

}  // namespace wsb
