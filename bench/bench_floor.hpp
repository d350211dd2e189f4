#pragma once
// Shared by the CPU microbenchmarks: the host memcpy floor of a byte count (measured once per size in the same
// process) and the counters every case reports against it: "floor_GBps" and "floor_ratio" (time / floor time).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "harness/physics.hpp"

namespace wsb::bench {

/// Host memcpy GB/s of `bytes` on one thread, measured once per size (the floor of every single-thread phase).
inline double memcpy_floor_gbps(uint64_t bytes) {
  static std::map<uint64_t, double> cache;
  auto it = cache.find(bytes);
  if (it == cache.end()) it = cache.emplace(bytes, measure_host_memcpy_gbps(bytes, 1, 10)).first;
  return it->second;
}

/// Bytes/s from `bytes` per iteration, plus the memcpy floor of `bytes` and the ratio of this case's time to it.
inline void set_counters(benchmark::State& state, uint64_t bytes) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  const double floor = memcpy_floor_gbps(bytes);
  state.counters["floor_GBps"] = floor;
  // Per-iteration time over the floor's time for the same bytes; rate counters are averaged by benchmark.
  state.counters["floor_ratio"] = benchmark::Counter(static_cast<double>(bytes) / (floor * 1e9) * state.iterations(),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

/// `n` bytes from a seeded generator.
inline std::vector<uint8_t> random_bytes(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

}  // namespace wsb::bench
