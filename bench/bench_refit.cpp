// Refit aligner throughput vs bucket size: S sender threads stream a fixed set of uneven per-rank shards through a
// transport, one aligner consumes them (byte copy into pooled receive buffers included, the copy a wire would make).
// transport 0 is the in-process queue, 1 the shared-memory ring (its senders on threads of this process: that still
// measures the copy into and out of the slots, one more copy than the queue). Counters: bytes/s over all ranks'
// payload, and floor_ratio against a single-thread host memcpy of the same byte count (bench/bench_floor.hpp).
// Transport setup (for shm: reserving and mapping the ring) is not timed: a refit reuses a set-up transport.
// Axes: bucket_bytes, ranks, transport.
//
// BM_RefitStream: the whole in-process stream of a refit as prepare.stream runs it, with three copies per byte: the
// sender packs each bucket, the receiver copies it out of the transport, the rank places every weight into its rank
// image. `parallel` 1 is how the refit mode streams (packing, receive copies and placing in pieces across a pool
// of `threads`, each rank receiving one bucket ahead on its own thread while the batch before is placed, the send
// buffers allocated once); 0 is how it streamed before (each copy on one thread, one receive buffer per rank, the
// receive of a bucket after the placing of the one before). Counters: GB/s per rank, and floor_ratio against one
// host memcpy of every rank's bytes on `threads` threads (the target: >= 10 GB/s per rank at TP 1).
// WSBENCH_REFIT_STREAM_MIB: MiB per rank of the one-rank cases (default 1024; the two-rank case streams half each);
// CI's short run sets 64.
//
// BM_RefitIpcSend: the sender side of a cuda-ipc refit over the host stand-in of device memory (HostDeviceIpc), one
// rank: `filled` 1 packs each bucket in pieces into the channel's staging and copies every piece into the ring
// (send_filled, as `wsbench refit-sender` sends), 0 packs each bucket into a payload buffer that a send-ahead thread
// copies into the ring (the path before the staging). The receiver only takes the control messages (an import in
// the same process is refused). The ring and staging are set up outside the timing and the ring's pages are
// faulted in once, as a device ring has no page faults. On the host both paths copy every byte twice, so this
// measures the staging's CPU overhead; the pinned DMA it buys shows only on a GPU. Counter: GB/s per rank.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "bench/bench_floor.hpp"
#include "modes/refit/buffer_pool.hpp"
#include "modes/refit/cuda_ipc_transport.hpp"
#include "modes/refit/host_device_ipc.hpp"
#include "modes/refit/inproc_transport.hpp"
#include "modes/refit/receiver_group.hpp"
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

/// Weights of a stream of `mib` MiB per rank: 64 MiB, or a quarter of a smaller image, so a bucket holds one.
uint64_t stream_weight_mib(uint64_t mib) { return std::min<uint64_t>(64, std::max<uint64_t>(1, mib / 4)); }

/// One rank's shard of `mib` MiB in weights of stream_weight_mib (a last shorter one), BF16.
struct StreamShards {
  std::vector<std::vector<wsb::TensorSpec>> specs;
  std::vector<std::vector<uint8_t>> data;  // per rank, weights back to back
  uint64_t rank_bytes = 0;
  uint64_t weight_bytes = 0;  // every weight but the last
  StreamShards(int ranks, uint64_t mib) : specs(ranks), data(ranks) {
    const uint64_t weight_mib = stream_weight_mib(mib);
    weight_bytes = weight_mib << 20;
    for (int r = 0; r < ranks; ++r) {
      for (uint64_t at = 0, i = 0; at < mib; at += weight_mib, ++i) {
        const uint64_t rows = std::min(weight_mib, mib - at) * 128;  // 128 rows of 4096 BF16 per MiB
        specs[r].push_back({"layers." + std::to_string(i) + ".weight", wsb::DType::BF16, {static_cast<int64_t>(rows), 4096}});
      }
      uint64_t bytes = 0;
      for (const auto& s : specs[r]) bytes += s.bytes();
      data[r].resize(bytes);
      uint64_t x = 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(r);  // xorshift64: gigabytes in a moment
      for (size_t i = 0; i + 8 <= bytes; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::memcpy(data[r].data() + i, &x, 8);
      }
      rank_bytes = bytes;
    }
  }
};

void BM_RefitStream(benchmark::State& state) {
  const auto mib = static_cast<uint64_t>(state.range(0));
  const int ranks = static_cast<int>(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  const bool parallel = state.range(3) == 1;
  // 256 MiB, or a quarter of a small image: the stream always hands over several buckets.
  const uint64_t bucket = std::min<uint64_t>(256, std::max<uint64_t>(stream_weight_mib(mib), mib / 4)) << 20;
  static std::map<std::pair<int, uint64_t>, std::unique_ptr<StreamShards>> cache;
  auto& slot = cache[{ranks, mib}];
  if (!slot) slot = std::make_unique<StreamShards>(ranks, mib);
  const StreamShards& shards = *slot;
  const RefitLayout layout(shards.specs);
  std::vector<std::vector<uint8_t>> images(ranks, std::vector<uint8_t>(shards.rank_bytes));
  wsb::WorkPool pool(parallel ? threads : 1);
  wsb::WorkPool* work = parallel ? &pool : nullptr;
  BufferPool buffers(bucket, static_cast<size_t>((parallel ? 2 : 1) * ranks));
  std::vector<std::vector<std::vector<uint8_t>>> send_buffers(ranks);
  if (parallel) {
    for (auto& b : send_buffers) b.assign(4, std::vector<uint8_t>(bucket));
  }
  for (auto _ : state) {
    InProcTransport transport(ranks, bucket, 2, work);
    std::vector<std::thread> senders;
    for (int r = 0; r < ranks; ++r) {
      senders.emplace_back([&, r] {
        std::vector<ShardWeight> w;
        uint64_t at = 0;
        for (const auto& spec : shards.specs[r]) {
          w.push_back({spec, {shards.data[r].data() + at, spec.bytes()}});
          at += spec.bytes();
        }
        SendOptions options;
        options.pack_pool = work;
        options.buffers = parallel ? &send_buffers[r] : nullptr;
        stream_shard(r, w, bucket, transport, options);
      });
    }
    {
      StreamAligner aligner(layout, transport, buffers, parallel ? ReceiveMode::Ahead : ReceiveMode::Inline);
      RankReceiverGroup group(aligner);
      std::vector<std::thread> receivers;
      for (int r = 0; r < ranks; ++r) {
        receivers.emplace_back([&, r] {
          while (auto batch = group.next(r)) {
            for (size_t k = 0; k < batch->weights.size(); ++k) {
              const uint64_t offset = (batch->first_weight + k) * shards.weight_bytes;
              const auto bytes = batch->weights[k].bytes;
              wsb::parallel_copy(work, std::span<uint8_t>(images[r]).subspan(offset, bytes.size()), bytes);
            }
          }
        });
      }
      for (auto& t : receivers) t.join();
    }
    for (auto& t : senders) t.join();
    if (parallel) {
      for (int r = 0; r < ranks; ++r) {
        while (send_buffers[r].size() < 4) {
          auto spare = transport.sender(r).spare_payload();
          if (spare.capacity() == 0) break;
          send_buffers[r].push_back(std::move(spare));
        }
      }
    }
  }
  for (int r = 0; r < ranks; ++r) {
    if (images[r] != shards.data[r]) state.SkipWithError("rank image differs from the shard");
  }
  const uint64_t total = shards.rank_bytes * static_cast<uint64_t>(ranks);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * total));
  static std::map<std::pair<uint64_t, int>, double> floors;
  auto [it, fresh] = floors.try_emplace({total, threads}, 0.0);
  if (fresh) it->second = wsb::measure_host_memcpy_gbps(total, threads, 3);
  state.counters["floor_GBps"] = it->second;
  state.counters["GBps_per_rank"] = benchmark::Counter(static_cast<double>(shards.rank_bytes) * state.iterations() / 1e9,
                                                       benchmark::Counter::kIsRate);
  state.counters["floor_ratio"] = benchmark::Counter(static_cast<double>(total) / (it->second * 1e9) * state.iterations(),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
/// Registers BM_RefitStream with images of `mib` MiB per rank (1 GiB is enough for a GB/s per rank).
void register_refit_stream(int64_t mib) {
  benchmark::RegisterBenchmark("BM_RefitStream", BM_RefitStream)
      ->ArgNames({"mib_per_rank", "ranks", "threads", "parallel"})
      ->Args({mib, 1, 2, 0})
      ->Args({mib, 1, 2, 1})
      ->Args({mib, 1, 16, 0})
      ->Args({mib, 1, 16, 1})
      ->Args({mib / 2, 2, 16, 1})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

/// HostDeviceIpc whose rings outlive their transport: every refit of the benchmark writes the same, faulted-in
/// memory, as a device ring has no page faults to pay.
class ReusedRingIpc final : public DeviceIpc {
 public:
  std::string_view kind() const override { return "host"; }
  std::array<uint8_t, 16> device_uuid(int device) const override { return host_.device_uuid(device); }
  std::unique_ptr<PinnedHostMemory> allocate_pinned(uint64_t bytes) const override {
    return host_.allocate_pinned(bytes);
  }
  std::unique_ptr<ImportedDeviceMemory> open(int device, const IpcMemHandle& handle, uint64_t bytes) const override {
    return host_.open(device, handle, bytes);
  }
  std::unique_ptr<ExportedDeviceMemory> allocate(int device, uint64_t bytes) const override {
    if (!ring_ || ring_bytes_ != bytes) {
      ring_ = host_.allocate(device, bytes);
      ring_bytes_ = bytes;
      const std::vector<uint8_t> zeros(bytes);
      ring_->write(0, zeros);  // faults every page in
    }
    struct Lent final : ExportedDeviceMemory {
      ExportedDeviceMemory* ring;
      IpcMemHandle handle() const override { return ring->handle(); }
      void write(uint64_t offset, std::span<const uint8_t> src) override { ring->write(offset, src); }
      uint64_t write_async(uint64_t offset, std::span<const uint8_t> src) override {
        return ring->write_async(offset, src);
      }
      void wait_written(uint64_t ticket) override { ring->wait_written(ticket); }
    };
    auto lent = std::make_unique<Lent>();
    lent->ring = ring_.get();
    return lent;
  }

 private:
  HostDeviceIpc host_;
  mutable std::unique_ptr<ExportedDeviceMemory> ring_;
  mutable uint64_t ring_bytes_ = 0;
};

/// Hides a transport's filled path: stream_shard then packs payload buffers and send()s them.
class PayloadPath final : public Transport {
 public:
  explicit PayloadPath(Transport& inner) : inner_(inner), sender_(inner.sender(0)) {}
  int ranks() const override { return 1; }
  uint64_t bucket_size_bytes() const override { return inner_.bucket_size_bytes(); }
  SenderEndpoint& sender(int) override { return sender_; }
  ReceiverEndpoint& receiver(int rank) override { return inner_.receiver(rank); }

 private:
  struct Sender final : SenderEndpoint {
    explicit Sender(SenderEndpoint& in) : inner(in) {}
    void send(Bucket bucket) override { inner.send(std::move(bucket)); }
    void finish() override { inner.finish(); }
    void fail(const std::string& message) noexcept override { inner.fail(message); }
    std::vector<uint8_t> spare_payload() override { return inner.spare_payload(); }
    SenderEndpoint& inner;
  };
  Transport& inner_;
  Sender sender_;
};

void BM_RefitIpcSend(benchmark::State& state) {
  const auto mib = static_cast<uint64_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const bool filled = state.range(2) == 1;
  const uint64_t bucket = std::min<uint64_t>(256, std::max<uint64_t>(stream_weight_mib(mib), mib / 4)) << 20;
  static std::map<uint64_t, std::unique_ptr<StreamShards>> cache;
  auto& slot = cache[mib];
  if (!slot) slot = std::make_unique<StreamShards>(1, mib);
  const StreamShards& shards = *slot;
  std::vector<ShardWeight> weights;
  uint64_t at = 0;
  for (const auto& spec : shards.specs[0]) {
    weights.push_back({spec, {shards.data[0].data() + at, spec.bytes()}});
    at += spec.bytes();
  }
  const ReusedRingIpc ipc;
  wsb::WorkPool pool(threads);
  uint64_t buckets = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto control = std::make_unique<ShmTransport>(1, kCudaIpcControlBytes);
    auto transport = std::make_unique<CudaIpcTransport>(*control, bucket, ipc, CudaIpcGpus{.rank_devices = {0}});
    transport->open_sender(0);  // ring, staging, handshake: before the stream, as the sender process sets up
    PayloadPath payload_path(*transport);
    state.ResumeTiming();
    std::thread sender([&] {
      SendOptions options;
      options.pack_pool = &pool;
      options.send_ahead = !filled;
      stream_shard(0, weights, bucket, filled ? static_cast<Transport&>(*transport) : payload_path, options);
    });
    std::array<uint8_t, kCudaIpcControlBytes> message{};
    buckets = 0;
    while (!control->receiver(0).receive(message).end) ++buckets;
    sender.join();
    state.PauseTiming();
    transport.reset();
    control.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * shards.rank_bytes));
  state.counters["GBps_per_rank"] = benchmark::Counter(static_cast<double>(shards.rank_bytes) * state.iterations() / 1e9,
                                                       benchmark::Counter::kIsRate);
  state.counters["control_messages"] = static_cast<double>(buckets);  // the handshake and one per bucket
}

void register_refit_ipc_send(int64_t mib) {
  benchmark::RegisterBenchmark("BM_RefitIpcSend", BM_RefitIpcSend)
      ->ArgNames({"mib_per_rank", "threads", "filled"})
      ->ArgsProduct({{mib}, {2, 16}, {0, 1}})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("WSBENCH_REFIT_STREAM_MIB");
  char* end = nullptr;
  const int64_t mib = env != nullptr ? std::strtoll(env, &end, 10) : 1024;
  if (mib < 8 || (env != nullptr && (end == env || *end != '\0'))) {
    std::fprintf(stderr, "bench_refit: WSBENCH_REFIT_STREAM_MIB must be an integer >= 8 (got '%s')\n", env);
    return 2;
  }
  register_refit_stream(mib);
  register_refit_ipc_send(mib);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
