// Microbenchmarks of the prepare/commit building blocks, each reported with its physical floor measured in the
// same run (host memcpy of the same byte count, bench/bench_floor.hpp): counters "GB/s" and "floor_ratio" (time /
// floor time).
// Axes are declared beside each benchmark: tensor bytes, and for deltas the changed fraction.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "bench/bench_floor.hpp"
#include "core/checksum.hpp"
#include "publication/delta_codec.hpp"
#include "publication/xor_stream.hpp"
#include "modes/sync/host_buffer.hpp"

namespace {

using wsb::HostBuffer;
using wsb::bench::random_bytes;
using wsb::bench::set_counters;

void BM_Xxh3_128(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  const auto data = random_bytes(bytes, 1);
  for (auto _ : state) benchmark::DoNotOptimize(wsb::xxh3_128_hex(data));
  set_counters(state, bytes);
}
BENCHMARK(BM_Xxh3_128)->ArgName("bytes")->Arg(1 << 20)->Arg(64 << 20)->Unit(benchmark::kMillisecond);

/// decode (zstd) + apply of one tensor's delta; `permille` of the BF16 values moved by one code.
void BM_DeltaDecodeApply(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  const auto encoding = state.range(2) == 0 ? wsb::DeltaEncoding::Xor : wsb::DeltaEncoding::Overwrite;
  auto base = random_bytes(bytes, 2);
  auto target = base;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (uint64_t i = 0; i < bytes; i += 2) {
    if (u(rng) < state.range(1) / 1000.0) target[i] ^= 1;
  }
  const auto payload = wsb::encode_delta(encoding, base, target, 1);
  for (auto _ : state) {
    auto delta = wsb::decode_delta(encoding, payload, bytes, "bench");
    wsb::apply_delta_swap(delta, base);
    benchmark::DoNotOptimize(base.data());
  }
  set_counters(state, bytes);
  state.counters["payload_bytes"] = static_cast<double>(payload.size());
}
BENCHMARK(BM_DeltaDecodeApply)
    ->ArgNames({"bytes", "permille", "overwrite"})
    ->Args({64 << 20, 10, 0})
    ->Args({64 << 20, 10, 1})
    ->Unit(benchmark::kMillisecond);

/// The prepare path for xor payloads: zstd output streamed into the tensor, no tensor-sized mask.
void BM_XorStreamApply(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  auto base = random_bytes(bytes, 2);
  auto target = base;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (uint64_t i = 0; i < bytes; i += 2) {
    if (u(rng) < state.range(1) / 1000.0) target[i] ^= 1;
  }
  const auto payload = wsb::encode_delta(wsb::DeltaEncoding::Xor, base, target, 1);
  for (auto _ : state) {
    wsb::apply_xor_payload(payload, base, "bench");
    benchmark::DoNotOptimize(base.data());
  }
  set_counters(state, bytes);
  state.counters["payload_bytes"] = static_cast<double>(payload.size());
}
BENCHMARK(BM_XorStreamApply)->ArgNames({"bytes", "permille"})->Args({64 << 20, 10})->Unit(benchmark::kMillisecond);

/// The cpu-mode commit on the CPU backend: rank image -> runtime storage copy.
void BM_RankImageCopy(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  HostBuffer image(bytes, 4096), storage(bytes, 4096);
  std::memset(image.data(), 1, bytes);
  for (auto _ : state) {
    std::memcpy(storage.data(), image.data(), bytes);
    benchmark::ClobberMemory();
  }
  set_counters(state, bytes);
}
BENCHMARK(BM_RankImageCopy)->ArgName("bytes")->Arg(64 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
