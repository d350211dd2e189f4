// The device-delta commit's host side (modes/sync/delta_recorder.hpp), against the host memcpy floor of the storage:
//   BM_RecordedPlacement  the fold's placement through DeltaRecorder::copy (compare each word with the one it
//                         replaces, write only changed words, record pack entries and digest terms) in 256 KiB chunks,
//                         plus finish(): what device-delta adds to a placement that is otherwise a memcpy;
//   BM_RecordedBuild      a transformed storage: each 8 MiB piece built in a scratch buffer (a memcpy stands in for
//                         the transform), then written through DeltaRecorder::copy, plus finish().
// Axis: permille of BF16 values moved by one code (10 = the default density, about 2% of 32-bit words; 1000 =
// every value: the storage turns dense once a sixteenth of it is written, and the rest are plain copies digested
// while in cache).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "bench/bench_floor.hpp"
#include "modes/sync/delta_recorder.hpp"
#include "modes/sync/host_buffer.hpp"

namespace {

/// A live storage and the target that moves `permille` of its BF16 values (low byte xor 1).
struct RecordCase {
  std::vector<uint8_t> live, target;
  wsb::HostBuffer image;
  RecordCase(uint64_t bytes, int64_t permille) : live(wsb::bench::random_bytes(bytes, 4)), image(bytes, 4096) {
    target = live;
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> u(0, 1);
    for (uint64_t i = 0; i < bytes; i += 2)
      if (u(rng) < static_cast<double>(permille) / 1000.0) target[i] ^= 1;
  }
};

void BM_RecordedPlacement(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  RecordCase c(bytes, state.range(1));
  wsb::DeltaRecorder recorder({bytes / 2}, nullptr);
  constexpr uint64_t kChunk = 256 << 10;
  for (auto _ : state) {
    state.PauseTiming();
    std::memcpy(c.image.data(), c.live.data(), bytes);
    recorder.begin({wsb::DeltaStorage{c.image.span(), 0, 0}});
    state.ResumeTiming();
    for (uint64_t at = 0; at < bytes; at += kChunk) {
      recorder.copy(0, at, std::span<const uint8_t>(c.target).subspan(at, std::min(kChunk, bytes - at)));
    }
    benchmark::DoNotOptimize(recorder.finish());
  }
  wsb::bench::set_counters(state, bytes);
}
BENCHMARK(BM_RecordedPlacement)
    ->ArgNames({"bytes", "permille"})
    ->Args({64 << 20, 0})
    ->Args({64 << 20, 10})
    ->Args({64 << 20, 1000})
    ->Unit(benchmark::kMillisecond);

void BM_RecordedBuild(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  RecordCase c(bytes, state.range(1));
  wsb::DeltaRecorder recorder({bytes / 2}, nullptr);
  constexpr uint64_t kPiece = 8 << 20;
  wsb::HostBuffer scratch(kPiece, 4096);
  for (auto _ : state) {
    state.PauseTiming();
    std::memcpy(c.image.data(), c.live.data(), bytes);
    recorder.begin({wsb::DeltaStorage{c.image.span(), 0, 0}});
    state.ResumeTiming();
    for (uint64_t at = 0; at < bytes; at += kPiece) {
      const uint64_t n = std::min(kPiece, bytes - at);
      std::memcpy(scratch.data(), c.target.data() + at, n);
      recorder.copy(0, at, std::span<const uint8_t>(scratch.data(), n));
    }
    benchmark::DoNotOptimize(recorder.finish());
  }
  wsb::bench::set_counters(state, bytes);
}
BENCHMARK(BM_RecordedBuild)
    ->ArgNames({"bytes", "permille"})
    ->Args({64 << 20, 10})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
