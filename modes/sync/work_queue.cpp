#include "modes/sync/work_queue.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <numeric>
#include <thread>
#include <vector>

namespace wsb {

void run_largest_first(size_t count, int threads, const std::function<uint64_t(size_t)>& bytes,
                       const std::function<void(size_t)>& fn, bool* done) {
  run_largest_first(count, threads, bytes, [&](size_t i, size_t) { fn(i); }, done);
}

void run_largest_first(size_t count, int threads, const std::function<uint64_t(size_t)>& bytes,
                       const std::function<void(size_t item, size_t worker)>& fn, bool* done) {
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<uint64_t> size(count);
  for (size_t i = 0; i < count; ++i) size[i] = bytes(i);
  // Stable: equal sizes keep index order, so a run is reproducible.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return size[a] > size[b]; });
  std::vector<std::exception_ptr> errors(count);
  std::atomic<bool> failed{false};
  run_in_order(count, threads, [&](size_t k, size_t worker) {
    if (failed.load()) return;  // after a throw, no new item starts
    const size_t i = order[k];
    try {
      fn(i, worker);
      if (done) done[i] = true;
    } catch (...) {
      errors[i] = std::current_exception();
      failed = true;
    }
  });
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

void run_in_order(size_t count, int threads, const std::function<void(size_t item, size_t worker)>& fn) {
  std::atomic<size_t> next{0};
  auto work = [&](size_t worker) noexcept {
    for (;;) {
      const size_t k = next.fetch_add(1);
      if (k >= count) return;
      fn(k, worker);
    }
  };
  const size_t workers = std::min<size_t>(count, static_cast<size_t>(std::max(threads, 1)));
  std::vector<std::jthread> pool;
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(work, t);
  work(0);
}

}  // namespace wsb
