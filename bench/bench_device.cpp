// GPU microbenchmarks, manual time from CUDA events (or the host clock where the call itself synchronizes):
//   BM_H2dChunked        a pinned rank-image-sized buffer copied H2D in chunks round-robin over streams (the cpu-mode
//                        commit's copy pattern), by chunk size (16..1024 MiB) and stream count (1, 2, 4);
//   BM_DeviceStoragesCommit  the same through DeviceStorages::write + synchronize (the real commit path);
//   BM_Nvfp4SwizzleKernel    the NVFP4 128x4 scale swizzle kernel alone (scales already on the device);
//   BM_Nvfp4SwizzleStaged    the swizzle through bounded device staging from pinned / pageable host scales;
//   BM_DeviceDeltaApply      the device-delta commit's pause part: a staged pack of changed 32-bit words applied in
//                            place by the scatter kernel (DeviceStorages::apply_staged_deltas + synchronize), by the
//                            share of changed words (0 = identity, 20 per mille ~ the default BF16 density, 1000 =
//                            dense); floor_ratio is against the pinned-H2D time of the whole storage; stage_GBps is
//                            its prepare part, stage_packs (pinned upload + device digest), over the pack's bytes.
// Counters: GB/s, floor_GBps (the pinned H2D floor of device 0, measured once per process with
// measure_h2d_floors), floor_ratio (time / floor time of the same bytes); the swizzles also report host_ratio
// (host transform time / this time).
//
// Without a CUDA build or a device no case is registered and the binary exits 0 (CI). `--short` shrinks the buffer
// (256 MiB) and the shapes for a quick smoke run; every other flag is Google Benchmark's (e.g.
// --benchmark_min_time=0.01).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cuda/cuda_ops.hpp"

#ifdef WSBENCH_HAVE_CUDA
#include <cuda_runtime.h>

#include "bench/bench_floor.hpp"
#include "engine/cuda/device_storages.hpp"
#include "engine/cuda/h2d_floor.hpp"
#include "engine/cuda/pinned.hpp"
#include "engine/quant/device_staging.hpp"
#include "engine/quant/device_util.hpp"
#include "engine/quant/nvfp4_swizzle_device.hpp"
#include "core/errors.hpp"
#include "models/transform/nvfp4.hpp"
#include "modes/sync/host_buffer.hpp"
#include "core/digest64.hpp"
#include "modes/sync/staged_delta.hpp"
#endif

namespace {

bool g_short = false;

#ifdef WSBENCH_HAVE_CUDA

constexpr uint64_t kMiB = 1ull << 20;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw wsb::Error(wsb::ErrorKind::Io, std::string(what) + ": " + cudaGetErrorString(status));
}

/// Bytes of the rank-image-sized buffer every H2D case copies.
uint64_t image_bytes() { return g_short ? 256 * kMiB : 2048 * kMiB; }

/// Best pinned H2D GB/s of device 0 over the default chunk sizes, measured once (the floor of every H2D case).
double h2d_floor_gbps() {
  static const double floor = [] {
    double best = 0;
    const uint64_t total = g_short ? 256 * kMiB : wsb::kH2dFloorTotalBytes;
    for (const auto& f : wsb::measure_h2d_floors(wsb::default_h2d_chunk_sizes(), total, wsb::kH2dFloorStreams,
                                                 wsb::kH2dFloorRepeats))
      if (f.device == 0) best = std::max(best, f.gbps);
    return best;
  }();
  return floor;
}

/// Sets GB/s, the H2D floor and the ratio from the summed per-iteration seconds of `bytes` each.
void set_h2d_counters(benchmark::State& state, uint64_t bytes, double seconds) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  const double per_iteration = seconds / static_cast<double>(std::max<int64_t>(state.iterations(), 1));
  const double floor = h2d_floor_gbps();
  state.counters["GB/s"] = per_iteration > 0 ? static_cast<double>(bytes) / per_iteration / 1e9 : 0.0;
  state.counters["floor_GBps"] = floor;
  state.counters["floor_ratio"] = floor > 0 ? per_iteration / (static_cast<double>(bytes) / (floor * 1e9)) : 0.0;
}

/// The pinned source, a device destination and four streams with their events, made once per process.
struct H2dRig {
  wsb::HostBuffer host;
  void* dev = nullptr;
  cudaStream_t streams[4] = {};
  cudaEvent_t joins[4] = {};
  cudaEvent_t start = nullptr, stop = nullptr;

  H2dRig() : host(image_bytes(), 4096, &wsb::cuda_host_pinner()) {
    const auto pattern = wsb::bench::random_bytes(kMiB, 5);
    for (uint64_t o = 0; o < host.size(); o += kMiB) std::memcpy(host.data() + o, pattern.data(), kMiB);
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaMalloc(&dev, host.size()), "cudaMalloc of the H2D destination");
    for (int s = 0; s < 4; ++s) {
      check(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreateWithFlags(&joins[s], cudaEventDisableTiming), "cudaEventCreate");
    }
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  static H2dRig& get() {
    static H2dRig rig;
    return rig;
  }

  /// One copy of the whole buffer: piece i on stream i % n, start/stop events on stream 0 fenced around all of them.
  double pass(uint64_t chunk, int n) {
    check(cudaEventRecord(start, streams[0]), "record start");
    for (int s = 1; s < n; ++s) check(cudaStreamWaitEvent(streams[s], start, 0), "wait start");
    auto* dst = static_cast<uint8_t*>(dev);
    uint64_t piece = 0;
    for (uint64_t done = 0; done < host.size(); done += chunk, ++piece) {
      const uint64_t bytes = std::min(chunk, host.size() - done);
      check(cudaMemcpyAsync(dst + done, host.data() + done, bytes, cudaMemcpyHostToDevice, streams[piece % n]),
            "cudaMemcpyAsync");
    }
    for (int s = 1; s < n; ++s) {
      check(cudaEventRecord(joins[s], streams[s]), "record join");
      check(cudaStreamWaitEvent(streams[0], joins[s], 0), "wait join");
    }
    check(cudaEventRecord(stop, streams[0]), "record stop");
    check(cudaEventSynchronize(stop), "synchronize stop");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return ms / 1e3;
  }
};

void BM_H2dChunked(benchmark::State& state) {
  const uint64_t chunk = static_cast<uint64_t>(state.range(0)) * kMiB;
  const int streams = static_cast<int>(state.range(1));
  H2dRig& rig = H2dRig::get();
  rig.pass(chunk, streams);  // warm-up
  double total = 0;
  for (auto _ : state) {
    const double seconds = rig.pass(chunk, streams);
    state.SetIterationTime(seconds);
    total += seconds;
  }
  set_h2d_counters(state, rig.host.size(), total);
  state.counters["chunks"] = static_cast<double>((rig.host.size() + chunk - 1) / chunk);
}

void BM_DeviceStoragesCommit(benchmark::State& state) {
  H2dRig& rig = H2dRig::get();
  wsb::DeviceStorageOptions options;
  options.chunk_bytes = static_cast<uint64_t>(state.range(0)) * kMiB;
  options.copy_streams = static_cast<int>(state.range(1));
  options.device_count = 1;
  wsb::RankLayout layout;
  wsb::RuntimeStorageSpec spec;
  spec.name = "image";
  spec.dtype = wsb::DType::U8;
  spec.shape = {static_cast<int64_t>(rig.host.size())};
  layout.storages.push_back(spec);
  auto storages = wsb::make_device_storages({layout}, options);
  auto commit = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    storages->write(0, 0, 0, rig.host.span());
    storages->synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  commit();  // warm-up
  double total = 0;
  for (auto _ : state) {
    const double seconds = commit();  // host clock: the pause a commit imposes, issue overhead included
    state.SetIterationTime(seconds);
    total += seconds;
  }
  set_h2d_counters(state, rig.host.size(), total);
}

void BM_DeviceDeltaApply(benchmark::State& state) {
  H2dRig& rig = H2dRig::get();
  const int64_t per_mille = state.range(0);
  wsb::DeviceStorageOptions options;
  options.device_count = 1;
  options.delta_staging_bytes = 2 * rig.host.size() + rig.host.size() / 256 + (1 << 20);  // the dense pack's too
  wsb::RankLayout layout;
  wsb::RuntimeStorageSpec spec;
  spec.name = "image";
  spec.dtype = wsb::DType::U8;
  spec.shape = {static_cast<int64_t>(rig.host.size())};
  layout.storages.push_back(spec);
  auto storages = wsb::make_device_storages({layout}, options);
  storages->write(0, 0, 0, rig.host.span());
  storages->synchronize();
  // The new image: every word changes with probability per_mille / 1000 (a fixed generator, so runs compare).
  // Its pack is written directly (one segment per kSegmentEntries entries, as the recorder does), with no dense
  // limit, so the dense case shows the kernel's cost at every word.
  const auto& host = rig.host.span();
  std::vector<uint64_t> entries;
  uint64_t state64 = 0x9E3779B97F4A7C15ull;
  for (size_t w = 0; w + 4 <= host.size(); w += 4) {
    state64 = state64 * 6364136223846793005ull + 1442695040888963407ull;
    if (static_cast<int64_t>((state64 >> 33) % 1000) >= per_mille) continue;
    uint32_t value;
    std::memcpy(&value, host.data() + w, 4);
    entries.push_back(wsb::pack_entry(static_cast<uint32_t>(w / 4), value ^ 0x01));
  }
  const uint64_t segments = (entries.size() + wsb::kSegmentEntries - 1) / wsb::kSegmentEntries;
  wsb::HostBuffer pack(wsb::pack_bytes(segments, entries.size()), 4096, &wsb::cuda_host_pinner());
  const uint64_t header[2] = {segments, entries.size()};
  std::memcpy(pack.data(), header, sizeof header);
  if (!entries.empty()) std::memcpy(pack.data() + 16, entries.data(), 8 * entries.size());
  for (uint64_t s = 0; s < segments; ++s) {
    const uint64_t first = s * wsb::kSegmentEntries;
    const uint64_t record[4] = {storages->delta_address(0, 0), first,
                                std::min<uint64_t>(wsb::kSegmentEntries, entries.size() - first), host.size()};
    std::memcpy(pack.data() + 16 + 8 * entries.size() + 32 * s, record, sizeof record);
  }
  const wsb::StagedPack staged[] = {{storages->device_of(0), pack.span(), wsb::digest64(pack.span())}};
  // The prepare's part: upload from the pinned pack and the device digest of the staged copy (best of 3; the first
  // call also allocates the staging area).
  double stage_seconds = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    storages->stage_packs(staged);
    stage_seconds = std::min(stage_seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  double total = 0;
  for (auto _ : state) {
    // Applying the same pack again writes the same values: every iteration does the same device work.
    const auto t0 = std::chrono::steady_clock::now();
    storages->apply_staged_deltas();
    storages->synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(seconds);
    total += seconds;
  }
  set_h2d_counters(state, rig.host.size(), total);
  state.counters["changed_words"] = static_cast<double>(entries.size());
  state.counters["staged_bytes"] = static_cast<double>(pack.size());
  state.counters["stage_GBps"] = static_cast<double>(pack.size()) / stage_seconds / 1e9;
}

/// Registers both H2D cases over chunk sizes x stream counts.
void register_h2d() {
  std::vector<int64_t> chunks = {16, 64, 256, 1024};
  if (g_short) chunks = {16, 64, 256};
  auto* delta = benchmark::RegisterBenchmark("BM_DeviceDeltaApply", &BM_DeviceDeltaApply);
  delta->ArgNames({"changed_per_mille"})->UseManualTime()->Unit(benchmark::kMillisecond);
  for (int64_t p : {0, 2, 20, 1000}) delta->Arg(p);
  for (auto* fn : {&BM_H2dChunked, &BM_DeviceStoragesCommit}) {
    auto* b = benchmark::RegisterBenchmark(fn == &BM_H2dChunked ? "BM_H2dChunked" : "BM_DeviceStoragesCommit", fn);
    b->ArgNames({"chunk_MiB", "streams"})->UseManualTime()->Unit(benchmark::kMillisecond);
    for (int64_t c : chunks)
      for (int64_t s : {1, 2, 4}) b->Args({c, s});
  }
}

/// Seconds per call of the host transform for gathered [E, M, K16], measured once per shape (best of 3).
double host_swizzle_seconds(int64_t e, int64_t m, int64_t k16, const std::vector<uint8_t>& gathered) {
  static std::map<std::tuple<int64_t, int64_t, int64_t>, double> cache;
  const auto key = std::make_tuple(e, m, k16);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const wsb::Shape g = {e, m, k16}, r = wsb::nvfp4_scale_swizzled_shape(g);
  std::vector<uint8_t> out(wsb::shape_numel(r));
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    wsb::TransformIo io;
    io.storage = "bench";
    io.dtype = wsb::DType::F8_E4M3;
    io.gathered_shape = g;
    io.gathered = gathered;
    io.runtime_shape = r;
    io.out = out;
    const auto t0 = std::chrono::steady_clock::now();
    wsb::nvfp4_scale_swizzle_transform(io);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return cache[key] = best;
}

uint64_t swizzled_bytes(int64_t e, int64_t m, int64_t k16) {
  return wsb::shape_numel(wsb::nvfp4_scale_swizzled_shape({e, m, k16}));
}

void BM_Nvfp4SwizzleKernel(benchmark::State& state) {
  const int64_t e = state.range(0), m = state.range(1), k16 = state.range(2);
  const auto gathered = wsb::bench::random_bytes(static_cast<uint64_t>(e * m * k16), 7);
  const uint64_t out_bytes = swizzled_bytes(e, m, k16);
  check(cudaSetDevice(0), "cudaSetDevice");
  wsb::DeviceBuffer in(gathered.size()), out(out_bytes);
  in.upload(gathered.data(), gathered.size());
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  wsb::nvfp4_scale_swizzle_launch(in.data(), e, m, k16, out.data(), stream);  // warm-up
  double total = 0;
  for (auto _ : state) {
    check(cudaEventRecord(start, stream), "record start");
    wsb::nvfp4_scale_swizzle_launch(in.data(), e, m, k16, out.data(), stream);
    check(cudaEventRecord(stop, stream), "record stop");
    check(cudaEventSynchronize(stop), "synchronize stop");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(ms / 1e3);
    total += ms / 1e3;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  const double per = total / static_cast<double>(std::max<int64_t>(state.iterations(), 1));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (gathered.size() + out_bytes)));
  state.counters["host_ratio"] = per > 0 ? host_swizzle_seconds(e, m, k16, gathered) / per : 0.0;
}

void BM_Nvfp4SwizzleStaged(benchmark::State& state) {
  const int64_t e = state.range(0), m = state.range(1), k16 = state.range(2);
  const uint64_t budget = static_cast<uint64_t>(state.range(3)) * kMiB;
  const bool pinned = state.range(4) != 0;
  const auto gathered = wsb::bench::random_bytes(static_cast<uint64_t>(e * m * k16), 7);
  check(cudaSetDevice(0), "cudaSetDevice");
  wsb::HostBuffer source(gathered.size(), 4096, pinned ? &wsb::cuda_host_pinner() : nullptr);
  std::memcpy(source.data(), gathered.data(), gathered.size());
  wsb::DeviceBuffer out(swizzled_bytes(e, m, k16));
  wsb::DeviceStaging staging(budget);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  auto run = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    wsb::nvfp4_scale_swizzle_device(source.data(), e, m, k16, out.data(), staging, stream);  // synchronizes
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  run();  // warm-up (allocates the bounce buffer for a pageable source)
  double total = 0;
  for (auto _ : state) {
    const double seconds = run();
    state.SetIterationTime(seconds);
    total += seconds;
  }
  cudaStreamDestroy(stream);
  set_h2d_counters(state, gathered.size(), total);  // bound by the H2D of the gathered bytes
  const double per = total / static_cast<double>(std::max<int64_t>(state.iterations(), 1));
  state.counters["host_ratio"] = per > 0 ? host_swizzle_seconds(e, m, k16, gathered) / per : 0.0;
  state.counters["chunks"] = static_cast<double>(
      (e + static_cast<int64_t>(staging.half_bytes() / wsb::nvfp4_swizzle_expert_bytes(m, k16)) - 1) /
      static_cast<int64_t>(staging.half_bytes() / wsb::nvfp4_swizzle_expert_bytes(m, k16)));
}

/// Kimi-K2 / DeepSeek-V3 NVFP4 w13 (M 4096, K16 448) and w2 (M 7168, K16 128) scales; 32 experts (8 in --short).
void register_swizzle() {
  const int64_t e = g_short ? 8 : 32;
  auto* k = benchmark::RegisterBenchmark("BM_Nvfp4SwizzleKernel", &BM_Nvfp4SwizzleKernel);
  k->ArgNames({"E", "M", "K16"})->UseManualTime()->Unit(benchmark::kMicrosecond);
  k->Args({e, 4096, 448})->Args({e, 7168, 128});
  auto* s = benchmark::RegisterBenchmark("BM_Nvfp4SwizzleStaged", &BM_Nvfp4SwizzleStaged);
  s->ArgNames({"E", "M", "K16", "budget_MiB", "pinned"})->UseManualTime()->Unit(benchmark::kMillisecond);
  for (int64_t budget : {8, 64})
    for (int64_t pinned : {1, 0}) s->Args({e, 4096, 448, budget, pinned});
}

#endif  // WSBENCH_HAVE_CUDA

}  // namespace

int main(int argc, char** argv) {
  // Our own flag first: Google Benchmark rejects flags it does not know.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--short") {
      g_short = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!wsb::cuda_ops::built() || wsb::cuda_ops::visible_devices() == 0) {
    std::printf("bench_device: %s; no GPU case registered\n",
                wsb::cuda_ops::built() ? "no CUDA device" : "built without CUDA");
    return 0;
  }
#ifdef WSBENCH_HAVE_CUDA
  register_h2d();
  register_swizzle();
#endif
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
