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
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<uint64_t> size(count);
  for (size_t i = 0; i < count; ++i) size[i] = bytes(i);
  // Stable: equal sizes keep index order, so a run is reproducible.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return size[a] > size[b]; });
  std::vector<std::exception_ptr> errors(count);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    while (!failed.load()) {
      const size_t k = next.fetch_add(1);
      if (k >= count) return;
      const size_t i = order[k];
      try {
        fn(i);
        if (done) done[i] = true;
      } catch (...) {
        errors[i] = std::current_exception();
        failed = true;
      }
    }
  };
  const size_t workers = std::min<size_t>(count, static_cast<size_t>(std::max(threads, 1)));
  {
    std::vector<std::jthread> pool;
    for (size_t t = 1; t < workers; ++t) pool.emplace_back(work);
    work();
  }
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace wsb
