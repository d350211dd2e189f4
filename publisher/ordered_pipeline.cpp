#include "publisher/ordered_pipeline.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace wsb {

void ordered_pipeline(size_t count, int threads, uint64_t budget, const std::function<uint64_t(size_t)>& cost,
                      const std::function<void(size_t)>& produce, const std::function<void(size_t)>& consume) {
  std::mutex mu;
  std::condition_variable cv;
  size_t next_issue = 0;
  uint64_t held = 0;  // cost of issued, not yet consumed items
  std::vector<char> produced(count, 0);
  bool stop = false;
  size_t error_index = count;
  std::exception_ptr error;
  auto record = [&](size_t i, std::exception_ptr e) {  // under mu
    if (i < error_index) {
      error_index = i;
      error = e;
    }
    stop = true;
  };

  auto worker = [&] {
    std::unique_lock lock(mu);
    while (true) {
      cv.wait(lock, [&] { return stop || next_issue == count || held == 0 || held + cost(next_issue) <= budget; });
      if (stop || next_issue == count) return;
      const size_t i = next_issue++;
      held += cost(i);
      lock.unlock();
      std::exception_ptr e;
      try {
        produce(i);
      } catch (...) {
        e = std::current_exception();
      }
      lock.lock();
      if (e) record(i, e);
      produced[i] = 1;
      cv.notify_all();
    }
  };

  std::vector<std::jthread> workers;
  const int n = std::max(1, threads);
  for (int t = 0; t < n && static_cast<size_t>(t) < count; ++t) workers.emplace_back(worker);
  for (size_t c = 0; c < count; ++c) {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return produced[c] || stop; });
      if (stop) break;
    }
    try {
      consume(c);
    } catch (...) {
      std::lock_guard lock(mu);
      record(c, std::current_exception());
      cv.notify_all();
      break;
    }
    std::lock_guard lock(mu);
    held -= cost(c);
    cv.notify_all();
  }
  {
    std::lock_guard lock(mu);
    if (error) stop = true;
    cv.notify_all();
  }
  workers.clear();  // joins
  if (error) std::rethrow_exception(error);
}

}  // namespace wsb
