// cpu-mode prepare end to end (CpuMode::prepare: plan, stage, fold + verify + placement, transforms) on real
// profiles, against the one-pass host memcpy floor of the canonical bytes measured in the same process with the
// prepare's thread count (the matrices' floor: harness/physics.hpp). The time of each iteration is
// prepare.apply_verify + prepare.transform (the prepare's memory work; plan and stage are counters); before each
// iteration the engine's native load of v0 is replayed (not timed).
//
// Sizes (environment WSBENCH_PREPARE_SIZE):
//   unset / "tiny": the CI presets (seconds, a smoke test of every family);
//   "h200": the cpu cells of matrices/h200-cpu-prepare.json: llama-3.1-8b-bf16 full size TP 1 (one delta and
//           catch-up 0->3), glm-4.5-air-fp8 TP 1 at L2E8 and L3E128 (s/GB across the expert count) and
//           kimi-k2.6-nvfp4 L2E64 TP 2. Needs about 40 GB of RAM and 20 GB of free space under TMPDIR, and a few
//           minutes.
//   "medium": llama-3.1-8b-bf16 TP 1 cut to its first layer (2.54 GB, the real embedding and lm_head), one delta and
//           catch-up 0->3, and glm-4.5-air-fp8 TP 1 L2E8 (3.0 GB, 83% of it the embedding and lm_head), one delta:
//           the ratios on a small machine (about 12 GB of RAM).
// WSBENCH_PREPARE_THREADS: prepare threads (default: the hardware's). Axes: target (1 = one delta, 3 = catch-up
// 0->3), frame_bytes (0 = one zstd frame per payload, the fork's "zstd"; 32 MiB = "zstd-frames"), encoding
// (0 = xor, 1 = overwrite: the delta encodings of the publication format) and checksum_ranges (0 = one xxh3-128
// per tensor, the fork's "xxh3-128"; 32 MiB = "xxh3-128-ranges", only with zstd-frames).
// Counters: canonical_GB; apply_verify_s, transform_s, plan_stage_s; floor_GBps (memcpy, same threads) and
// floor_ratio = (apply_verify + transform) / (canonical bytes / floor); s_per_GB of the same time; decode_floor_s,
// the zstd decode of every payload the prepare folds (steps 1..target, every frame once, on the prepare's threads,
// output discarded in a cache-sized buffer: the decode work no fold can skip, the least of 3 runs in the same
// process) and decode_ratio = (apply_verify + transform) / decode_floor_s. A catch-up of k steps decodes one payload
// per step, so what it adds to one delta is bounded below by decode_floor_s(k) - decode_floor_s(1), not by memcpy.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/phase_log.hpp"
#include "harness/physics.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "modes/cpu/cpu_mode.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"
#include "publication/store.hpp"
#include "publication/xor_stream.hpp"
#include "publication/zstd_frame.hpp"
#include "publisher/publisher.hpp"

namespace {

namespace fs = std::filesystem;

struct Cell {
  std::string name;
  std::string profile;
  wsb::ProfileScale scale;
  int tp = 1;
};

int prepare_threads() {
  if (const char* env = std::getenv("WSBENCH_PREPARE_THREADS")) return std::max(1, std::atoi(env));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

/// Host memcpy GB/s of `bytes` with `threads` threads, measured once per process.
double floor_gbps(uint64_t bytes, int threads) {
  static std::map<std::pair<uint64_t, int>, double> cache;
  auto key = std::make_pair(bytes, threads);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, wsb::measure_host_memcpy_gbps(bytes, threads, 5)).first;
  return it->second;
}

/// A published store (v0 FULL, v1..v3 DELTA) and a cpu mode over it, kept while consecutive runs use the same
/// (cell, frame_bytes, encoding, checksum ranges): only one lives at a time (a full-size llama holds 32 GB).
struct Fixture {
  fs::path dir;
  wsb::ModelProfile profile;
  std::unique_ptr<wsb::CpuMode> mode;
  std::unique_ptr<wsb::CheckpointReader> v0;
  uint64_t canonical_bytes = 0;

  Fixture(const Cell& cell, uint64_t frame_bytes, wsb::DeltaEncoding encoding, uint64_t range_bytes, int threads) {
    std::string leaf = cell.name;  // one directory: the destructor removes it whole
    std::replace(leaf.begin(), leaf.end(), '/', '-');
    dir = fs::temp_directory_path() / fmt::format("wsbench-prepare-{}-{}", ::getpid(), leaf);
    fs::remove_all(dir);
    fs::create_directories(dir);
    profile = wsb::find_profile(cell.profile, wsb::default_profiles_dir());
    if (cell.scale.layers || cell.scale.experts) profile = wsb::scale_profile(profile, cell.scale);
    wsb::PublishOptions publish;
    publish.store = dir / "store";
    publish.first_version = 0;
    publish.last_version = 3;
    publish.seed = 11;
    publish.frame_bytes = frame_bytes;
    publish.encoding = encoding;
    publish.checksum_range_bytes = range_bytes;
    publish.threads = threads;
    wsb::publish(profile, publish);
    for (const auto& t : profile.canonical_tensors()) canonical_bytes += t.bytes();
    wsb::SyncContext context;
    context.profile = profile;
    context.layouts = wsb::build_rank_layouts(profile, cell.tp);
    context.store = publish.store;
    context.workdir = dir / "work";
    context.threads = threads;
    mode = std::make_unique<wsb::CpuMode>(context);
    v0 = std::make_unique<wsb::CheckpointReader>(wsb::Store(publish.store).update_dir(0));
  }
  ~Fixture() {
    mode.reset();
    v0.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

/// Seconds to zstd-decode every payload of DELTA steps 1..target in `store` on `threads` threads, the least of
/// `runs` runs: each frame is one task (a one-frame payload is one task), decoded in 1 MiB pieces into a per-thread
/// buffer that stays in cache. The least decode work of a fold of those steps (it neither reads nor writes the
/// tensors). Only the decode is timed: the payload pages are touched, the threads started and their decoders and
/// buffers made before the clock starts. Throws std::runtime_error with MaskReader's reason for a payload that does
/// not decode (the publications are the fixture's own, so that is a bug).
double decode_floor_seconds(const fs::path& store, uint32_t target, int threads, int runs = 3) {
  struct Task {
    std::string tensor;
    std::span<const uint8_t> payload;
    std::vector<wsb::ZstdFrameExtent> frames;  // empty: one frame of `total` bytes
    uint64_t total = 0, begin = 0, end = 0;
  };
  std::vector<std::unique_ptr<wsb::CheckpointReader>> readers;
  std::vector<Task> tasks;
  for (uint32_t v = 1; v <= target; ++v) {
    readers.push_back(std::make_unique<wsb::CheckpointReader>(wsb::Store(store).update_dir(v)));
    const auto& reader = *readers.back();
    const auto framing = wsb::parse_manifest(reader.index(), reader.dir().string()).framing;
    for (const auto& name : reader.tensor_names()) {
      const auto payload = reader.data(name);
      if (framing == wsb::PayloadFraming::OneFrame) {
        const uint64_t total = wsb::zstd_declared_size(payload, name);
        tasks.push_back({name, payload, {}, total, 0, total});
        continue;
      }
      auto frames = wsb::zstd_frame_extents(payload, UINT64_MAX, name);
      uint64_t total = 0;
      for (const auto& f : frames) total += f.content;
      for (const auto& f : frames) {
        tasks.push_back({name, payload, frames, total, f.content_begin, f.content_begin + f.content});
      }
    }
  }
  uint8_t touched = 0;  // one byte per page of every payload, so no first-touch fault is timed
  for (const auto& r : readers) {
    for (const auto& name : r->tensor_names()) {
      const auto payload = r->data(name);
      for (size_t at = 0; at < payload.size(); at += 4096) touched ^= payload[at];
    }
  }
  benchmark::DoNotOptimize(touched);
  double best = 0;
  for (int run = 0; run < runs; ++run) {
    std::atomic<size_t> next{0};
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::mutex error_mutex;
    std::string error;
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&] {
        std::vector<uint8_t> out(1 << 20, 0);
        wsb::MaskReader reader;
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (size_t k; (k = next.fetch_add(1)) < tasks.size();) {
          const Task& t = tasks[k];
          reader.open(t.payload, t.frames, t.total, t.begin);
          for (uint64_t at = t.begin; at < t.end;) {
            const auto n = static_cast<size_t>(std::min<uint64_t>(out.size(), t.end - at));
            if (std::string why = reader.read({out.data(), n}); !why.empty()) {
              std::lock_guard lock(error_mutex);
              if (error.empty()) error = "tensor '" + t.tensor + "': " + why;
              break;
            }
            at += n;
          }
          benchmark::DoNotOptimize(out.data());
        }
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    const auto start = std::chrono::steady_clock::now();
    go.store(true, std::memory_order_release);
    for (auto& t : pool) t.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!error.empty()) throw std::runtime_error("decode floor of " + store.string() + ": " + error);
    best = run == 0 ? seconds : std::min(best, seconds);
  }
  return best;
}

Fixture& fixture(const Cell& cell, uint64_t frame_bytes, wsb::DeltaEncoding encoding, uint64_t range_bytes,
                 int threads) {
  static std::unique_ptr<Fixture> current;
  static std::string key;
  const std::string want = fmt::format("{}/{}/{}/{}/{}", cell.name, frame_bytes, wsb::delta_encoding_name(encoding),
                                       range_bytes, threads);
  if (!current || key != want) {
    current.reset();  // free the previous one first
    current = std::make_unique<Fixture>(cell, frame_bytes, encoding, range_bytes, threads);
    key = want;
  }
  return *current;
}

void run_prepare(benchmark::State& state, const Cell& cell) {
  const auto target = static_cast<uint32_t>(state.range(0));
  const auto frame_bytes = static_cast<uint64_t>(state.range(1));
  const auto encoding = state.range(2) == 0 ? wsb::DeltaEncoding::Xor : wsb::DeltaEncoding::Overwrite;
  const auto range_bytes = static_cast<uint64_t>(state.range(3));
  const int threads = prepare_threads();
  Fixture& f = fixture(cell, frame_bytes, encoding, range_bytes, threads);
  double apply = 0, transform = 0, plan_stage = 0;
  for (auto _ : state) {
    wsb::PhaseLog load;
    f.mode->on_native_load(*f.v0, 0, load);
    wsb::PhaseLog log;
    f.mode->prepare(0, target, log);
    const double a = log.seconds("prepare.apply_verify"), t = log.seconds("prepare.transform");
    apply += a;
    transform += t;
    plan_stage += log.seconds("prepare.plan") + log.seconds("prepare.stage");
    state.SetIterationTime(a + t);
  }
  const double n = static_cast<double>(state.iterations());
  const double gbps = floor_gbps(std::getenv("WSBENCH_PREPARE_SIZE") ? 1ull << 30 : 64ull << 20, threads);
  const double floor_s = static_cast<double>(f.canonical_bytes) / (gbps * 1e9);
  state.counters["canonical_GB"] = static_cast<double>(f.canonical_bytes) / 1e9;
  state.counters["apply_verify_s"] = apply / n;
  state.counters["transform_s"] = transform / n;
  state.counters["plan_stage_s"] = plan_stage / n;
  state.counters["threads"] = threads;
  state.counters["floor_GBps"] = gbps;
  state.counters["floor_ratio"] = (apply + transform) / n / floor_s;
  state.counters["s_per_GB"] = (apply + transform) / n / (static_cast<double>(f.canonical_bytes) / 1e9);
  const double decode_s = decode_floor_seconds(f.dir / "store", target, threads);
  state.counters["decode_floor_s"] = decode_s;
  state.counters["decode_ratio"] = (apply + transform) / n / decode_s;
}

void add(const Cell& cell, std::vector<int64_t> targets, int iterations) {
  auto* b = benchmark::RegisterBenchmark(("BM_CpuPrepare/" + cell.name).c_str(),
                                         [cell](benchmark::State& s) { run_prepare(s, cell); });
  b->ArgNames({"target", "frame_bytes", "encoding", "checksum_ranges"});
  // Overwrite: one frame per body, or (zstd-frames) bodies beyond kOverwriteFrameBytes in frames decoded in parallel.
  // Checksum ranges of the frame size: each segment of a tensor verifies its own ranges (one digest per tensor
  // is one serial hash, whatever the frames).
  constexpr int64_t kFrames = int64_t{32} << 20;
  for (int64_t encoding : {0, 1}) {
    for (int64_t t : targets) b->Args({t, 0, encoding, 0});
    for (int64_t t : targets) b->Args({t, kFrames, encoding, 0});
    for (int64_t t : targets) b->Args({t, kFrames, encoding, kFrames});
  }
  b->UseManualTime()->Iterations(iterations)->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  const char* size = std::getenv("WSBENCH_PREPARE_SIZE");
  if (size != nullptr && std::string(size) == "h200") {
    add({"llama-3.1-8b-bf16/tp1", "llama-3.1-8b-bf16", {}, 1}, {1, 3}, 3);
    add({"glm-4.5-air-fp8/tp1/L2E8", "glm-4.5-air-fp8", {2, 8}, 1}, {1}, 3);
    add({"glm-4.5-air-fp8/tp1/L3E128", "glm-4.5-air-fp8", {3, 128}, 1}, {1}, 3);
    add({"kimi-k2.6-nvfp4/tp2/L2E64", "kimi-k2.6-nvfp4", {2, 64}, 2}, {1}, 3);
  } else if (size != nullptr && std::string(size) == "medium") {
    add({"llama-3.1-8b-bf16/tp1/L1", "llama-3.1-8b-bf16", {1, std::nullopt}, 1}, {1, 3}, 3);
    add({"glm-4.5-air-fp8/tp1/L2E8", "glm-4.5-air-fp8", {2, 8}, 1}, {1}, 3);
  } else {
    for (const char* id : {"llama-tiny-bf16", "glm-tiny-fp8", "kimi-tiny-nvfp4", "gpt-oss-tiny-mxfp4"}) {
      add({fmt::format("{}/tp2", id), id, {}, 2}, {1, 3}, 2);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
