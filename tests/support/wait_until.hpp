#pragma once
// Waiting for another thread's progress in concurrency tests without timing anything: poll a condition, with a
// deadline that only turns a hang into a failure.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace wsb::test {

/// Polls `done` until it holds; false (and a test failure naming `what`) when it still does not after 60 s, far
/// beyond what any condition waited for here needs even under ThreadSanitizer.
inline bool wait_until(const std::function<bool()>& done, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "still waiting for " << what;
      return false;
    }
    // A short sleep, not a spin: on 2 cores a spinning test thread would slow the threads it waits for.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

}  // namespace wsb::test
