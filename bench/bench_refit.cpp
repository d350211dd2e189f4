// Refit aligner throughput vs bucket size: S sender threads stream a fixed set of uneven per-rank shards through a
// transport, one aligner consumes them (byte copy into pooled receive buffers included, the copy a wire would make).
// transport 0 is the in-process queue, 1 the shared-memory ring (its senders on threads of this process: that still
// measures the copy into and out of the slots, one more copy than the queue). Counters: bytes/s over all ranks'
// payload, and floor_ratio against a single-thread host memcpy of the same byte count (bench/bench_floor.hpp).
// Transport setup (for shm: reserving and mapping the ring) is not timed: a refit reuses a set-up transport.
// Axes: bucket_bytes, ranks, transport.
#include <benchmark/benchmark.h>

#include <memory>
#include <thread>
#include <vector>

#include "bench/bench_floor.hpp"
#include "modes/refit/buffer_pool.hpp"
#include "modes/refit/inproc_transport.hpp"
#include "modes/refit/sender.hpp"
#include "modes/refit/shm_transport.hpp"
#include "modes/refit/stream_aligner.hpp"

namespace {

using namespace wsb::refit;

/// 64 weights per rank, 1 MiB BF16 each plus a per-rank ragged tail row (uneven shards, misaligned buckets).
struct BenchShards {
  std::vector<std::vector<wsb::TensorSpec>> specs;
  std::vector<std::vector<std::vector<uint8_t>>> data;
  uint64_t total_bytes = 0;
  explicit BenchShards(int ranks) : specs(ranks), data(ranks) {
    for (int r = 0; r < ranks; ++r) {
      for (int i = 0; i < 64; ++i) {
        wsb::TensorSpec s{"layers." + std::to_string(i) + ".weight", wsb::DType::BF16, {256 + r + (i % 3), 2048}};
        total_bytes += s.bytes();
        data[r].push_back(wsb::bench::random_bytes(s.bytes(), static_cast<uint32_t>(r * 64 + i)));
        specs[r].push_back(std::move(s));
      }
    }
  }
};

void BM_RefitAlign(benchmark::State& state) {
  const auto bucket = static_cast<uint64_t>(state.range(0));
  const int ranks = static_cast<int>(state.range(1));
  const bool shm = state.range(2) == 1;
  static std::map<int, BenchShards> cache;
  auto& shards = cache.try_emplace(ranks, ranks).first->second;
  const RefitLayout layout(shards.specs);
  BufferPool pool(bucket, static_cast<size_t>(ranks));
  uint64_t batches = 0;
  std::unique_ptr<Transport> made;  // replaced while timing is paused, so unmapping a ring is not timed either
  for (auto _ : state) {
    state.PauseTiming();
    made.reset();
    if (shm) {
      made = std::make_unique<ShmTransport>(ranks, bucket);
    } else {
      made = std::make_unique<InProcTransport>(ranks, bucket);
    }
    Transport& transport = *made;
    state.ResumeTiming();
    std::vector<std::thread> senders;
    for (int r = 0; r < ranks; ++r) {
      senders.emplace_back([&, r] {
        std::vector<ShardWeight> w;
        for (size_t i = 0; i < shards.specs[r].size(); ++i) w.push_back({shards.specs[r][i], shards.data[r][i]});
        stream_shard(r, w, bucket, transport);
      });
    }
    StreamAligner aligner(layout, transport, pool);
    uint64_t checksum = 0;
    while (const AlignedBatch* b = aligner.next()) {
      for (const auto& views : b->payloads) checksum += views.back().bytes.back();
    }
    benchmark::DoNotOptimize(checksum);
    batches = aligner.batches_delivered();
    for (auto& t : senders) t.join();
  }
  wsb::bench::set_counters(state, shards.total_bytes);
  state.counters["aligned_batches"] = static_cast<double>(batches);
}
BENCHMARK(BM_RefitAlign)
    ->ArgNames({"bucket_bytes", "ranks", "transport"})
    ->ArgsProduct({{4 << 20, 16 << 20, 64 << 20}, {2}, {0, 1}})
    ->Args({16 << 20, 4, 0})
    ->Args({16 << 20, 4, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
BENCHMARK_MAIN();
