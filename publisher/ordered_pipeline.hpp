#pragma once
// The publisher's parallelism: tensors are synthesized, perturbed and compressed on worker threads, but written in
// checkpoint order by the caller's thread, with the bytes held between the two bounded.
#include <cstddef>
#include <cstdint>
#include <functional>

namespace wsb {

/// Runs produce(i) for every i in [0, count) on max(1, threads) worker threads, in issue order 0, 1, 2, ..., and
/// consume(i) on the caller's thread in index order as soon as item i is produced. An item is issued only while the
/// cost(i) of items produced-or-in-production but not yet consumed stays within `budget` bytes (an item alone may
/// exceed it), so memory is bounded by about budget + the largest item. produce(i) and consume(i) never run at the
/// same time for the same i; produce calls for different items run concurrently and must touch disjoint state.
/// After a throw (in either function) no new item is issued; once every worker stopped, the exception of the lowest
/// failing index is rethrown (a consume failure counts at its index).
void ordered_pipeline(size_t count, int threads, uint64_t budget, const std::function<uint64_t(size_t)>& cost,
                      const std::function<void(size_t)>& produce, const std::function<void(size_t)>& consume);

}  // namespace wsb
