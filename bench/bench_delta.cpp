// The two halves of a delta apply that bench_sync.cpp's BM_DeltaDecodeApply times together: zstd decompression
// (with validation) of xor and overwrite payloads, and the overwrite scatter alone, against the host memcpy floor of
// the tensor bytes. Axes: tensor bytes and the changed fraction (permille of BF16 values moved by one code).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "bench/bench_floor.hpp"
#include "publication/delta_codec.hpp"

namespace {

/// A base tensor and the payload that moves `permille` of its BF16 values (low byte xor 1).
struct DeltaCase {
  std::vector<uint8_t> base, payload;
  DeltaCase(uint64_t bytes, int64_t permille, wsb::DeltaEncoding encoding) : base(wsb::bench::random_bytes(bytes, 2)) {
    auto target = base;
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> u(0, 1);
    for (uint64_t i = 0; i < bytes; i += 2)
      if (u(rng) < static_cast<double>(permille) / 1000.0) target[i] ^= 1;
    payload = wsb::encode_delta(encoding, base, target, 1);
  }
};

wsb::DeltaEncoding encoding_of(int64_t arg) { return arg == 0 ? wsb::DeltaEncoding::Xor : wsb::DeltaEncoding::Overwrite; }

/// decode_delta only: zstd decompression into the mask (xor) or position/value lists (overwrite), plus validation.
void BM_DeltaDecompress(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  const DeltaCase c(bytes, state.range(1), encoding_of(state.range(2)));
  for (auto _ : state) benchmark::DoNotOptimize(wsb::decode_delta(encoding_of(state.range(2)), c.payload, bytes, "bench"));
  wsb::bench::set_counters(state, bytes);
  state.counters["payload_bytes"] = static_cast<double>(c.payload.size());
}
BENCHMARK(BM_DeltaDecompress)
    ->ArgNames({"bytes", "permille", "overwrite"})
    ->Args({64 << 20, 10, 0})
    ->Args({64 << 20, 10, 1})
    ->Args({64 << 20, 100, 1})
    ->Unit(benchmark::kMillisecond);

/// apply_delta_swap of a decoded overwrite delta: the scatter of `count` bytes into the tensor (each run swaps the
/// values back, so every iteration does the same work).
void BM_OverwriteScatter(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  DeltaCase c(bytes, state.range(1), wsb::DeltaEncoding::Overwrite);
  auto delta = wsb::decode_delta(wsb::DeltaEncoding::Overwrite, c.payload, bytes, "bench");
  for (auto _ : state) {
    wsb::apply_delta_swap(delta, c.base);
    benchmark::ClobberMemory();
  }
  wsb::bench::set_counters(state, bytes);
  state.counters["positions"] = static_cast<double>(delta.positions.size());
}
BENCHMARK(BM_OverwriteScatter)
    ->ArgNames({"bytes", "permille"})
    ->Args({64 << 20, 10})
    ->Args({64 << 20, 100})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
