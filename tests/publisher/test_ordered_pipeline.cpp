// ordered_pipeline: in-order consumption, bounded bytes in flight, and the lowest failing index's error.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "publisher/ordered_pipeline.hpp"

namespace wsb {
namespace {

TEST(OrderedPipeline, ConsumesInOrderWithinTheBudget) {
  constexpr size_t kCount = 200;
  std::vector<int> produced(kCount, 0), order;
  std::atomic<uint64_t> held{0}, peak{0};
  auto cost = [](size_t i) -> uint64_t { return 10 + i % 7; };
  ordered_pipeline(
      kCount, 4, 40, cost,
      [&](size_t i) {
        const uint64_t now = held += cost(i);
        for (uint64_t p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
        }
        if (i % 3 == 0) std::this_thread::yield();  // finish out of order
        produced[i] = static_cast<int>(i) * 2;
      },
      [&](size_t i) {
        EXPECT_EQ(produced[i], static_cast<int>(i) * 2);  // produce(i) happened before consume(i)
        order.push_back(static_cast<int>(i));
        held -= cost(i);
      });
  ASSERT_EQ(order.size(), kCount);
  for (size_t i = 0; i < kCount; ++i) EXPECT_EQ(order[i], static_cast<int>(i));
  EXPECT_LE(peak.load(), 40u + 16u);  // the budget, plus at most one item issued while nothing else was held
}

TEST(OrderedPipeline, AnItemLargerThanTheBudgetRunsAlone) {
  std::vector<int> seen;
  ordered_pipeline(
      3, 2, 5, [](size_t) -> uint64_t { return 100; }, [](size_t) {}, [&](size_t i) { seen.push_back(int(i)); });
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
}

TEST(OrderedPipeline, LowestFailingIndexIsRethrownAndLaterItemsAreNotConsumed) {
  std::vector<int> consumed;
  try {
    ordered_pipeline(
        50, 3, 1000, [](size_t) -> uint64_t { return 1; },
        [](size_t i) {
          if (i == 17 || i == 23) throw std::runtime_error("item " + std::to_string(i));
        },
        [&](size_t i) { consumed.push_back(int(i)); });
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "item 17");
  }
  // Consumption may stop anywhere before the failing item (workers can fail it before item 0 is consumed), but
  // what was consumed is a prefix and never reaches it.
  for (size_t i = 0; i < consumed.size(); ++i) EXPECT_EQ(consumed[i], static_cast<int>(i));
  EXPECT_LE(consumed.size(), 17u);  // items 0..16 at most
}

TEST(OrderedPipeline, ConsumeFailureStopsEverything) {
  std::atomic<int> produced{0};
  EXPECT_THROW(ordered_pipeline(
                   1000, 2, 4, [](size_t) -> uint64_t { return 1; }, [&](size_t) { ++produced; },
                   [](size_t i) {
                     if (i == 5) throw std::logic_error("consume 5");
                   }),
               std::logic_error);
  EXPECT_LT(produced.load(), 20);  // at most the budget's worth beyond the failing item
}

}  // namespace
}  // namespace wsb
