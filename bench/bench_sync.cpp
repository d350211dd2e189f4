// Microbenchmarks of the prepare/commit building blocks, each reported with its physical floor measured in the
// same run (host memcpy of the same byte count, bench/bench_floor.hpp): counters "GB/s" and "floor_ratio" (time /
// floor time).
// Axes are declared beside each benchmark: tensor bytes, and for deltas the changed fraction.
// BM_DiskPrepare: disk mode's prepare over a synthetic store on the filesystem of $TMPDIR (put it on the disk under
// test): the one streaming pass (materialize_checkpoint) against the pass it replaced (copy the FULL, re-read it to
// hash, fsync, fold tensor by tensor on one thread, write, fsync), each as a ratio to one read plus one write of the
// bytes at the disk floors measured on the same filesystem in the same run.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "bench/bench_floor.hpp"
#include "core/checksum.hpp"
#include "harness/physics.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "models/quant/code_check.hpp"
#include "modes/disk/disk_materialize.hpp"
#include "modes/sync/checkpoint_files.hpp"
#include "modes/sync/delta_fold.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"
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

/// The fold's scan for invalid codes (models/quant/code_check.hpp) over a valid tensor, as CodeScanner sees it in
/// 256 KiB chunks. Axis dtype: 0 = BF16 (16-bit lanes), 1 = F8_E4M3 (8-bit lanes).
void BM_CodeScan(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  wsb::TensorSpec spec{"model.layers.0.mlp.down_proj.weight", state.range(1) == 0 ? wsb::DType::BF16 : wsb::DType::F8_E4M3,
                       {static_cast<int64_t>(state.range(1) == 0 ? bytes / 2 : bytes)}};
  auto data = random_bytes(bytes, 3);
  for (uint8_t& b : data) b &= 0x3F;  // no NaN or infinity in either dtype
  for (auto _ : state) {
    wsb::CodeScanner scanner(spec);
    for (uint64_t at = 0; at < bytes;) {
      at = std::min<uint64_t>(bytes, at + (256 << 10));
      scanner.advance(data, at);
    }
    if (scanner.found()) state.SkipWithError("valid codes reported invalid");
  }
  set_counters(state, bytes);
}
BENCHMARK(BM_CodeScan)
    ->ArgNames({"bytes", "dtype"})
    ->Args({1 << 20, 0})
    ->Args({1 << 20, 1})
    ->Args({64 << 20, 1})
    ->Unit(benchmark::kMillisecond);

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

/// A store of FULL v0 and three xor deltas (every 97th byte moved per version) of 256 MiB of BF16 tensors (one of
/// 64 MiB, twelve of 16 MiB, so the largest-first pool has an uneven load), in shards of at most 64 MiB.
struct DiskStore {
  std::filesystem::path root;
  std::vector<wsb::TensorSpec> tensors;
  uint64_t bytes = 0;
  wsb::DiskFloor floor;
  DiskStore() {
    root = std::filesystem::temp_directory_path() / ("wsbench-bench-disk-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root);
    tensors.push_back({"model.embed_tokens.weight", wsb::DType::BF16, {8192, 4096}});
    for (int i = 0; i < 12; ++i) {
      tensors.push_back({"model.layers." + std::to_string(i) + ".mlp.up_proj.weight", wsb::DType::BF16, {2048, 4096}});
    }
    std::vector<std::vector<uint8_t>> current;
    for (size_t t = 0; t < tensors.size(); ++t) {
      current.push_back(random_bytes(tensors[t].bytes(), static_cast<uint32_t>(t)));
      for (size_t i = 1; i < current.back().size(); i += 2) current.back()[i] &= 0x3F;  // valid BF16 codes only
      bytes += tensors[t].bytes();
    }
    const wsb::Store store(root / "store");
    {
      wsb::PublicationManifest manifest;
      wsb::PublicationWriter writer(store.update_dir(0), manifest, 64 << 20, true, false);
      for (size_t t = 0; t < tensors.size(); ++t) writer.add(tensors[t], current[t], wsb::xxh3_128_hex(current[t]));
      writer.commit();
    }
    for (uint32_t v = 1; v <= 3; ++v) {
      wsb::PublicationManifest manifest;
      manifest.version = v;
      manifest.kind = wsb::PublicationKind::Delta;
      manifest.base_version = v - 1;
      manifest.encoding = wsb::DeltaEncoding::Xor;
      manifest.compression_format = "zstd";
      wsb::PublicationWriter writer(store.update_dir(v), manifest, 64 << 20, true, false);
      for (size_t t = 0; t < tensors.size(); ++t) {
        std::vector<uint8_t> next = current[t];
        for (size_t i = v; i < next.size(); i += 97) next[i] ^= 0x01;
        std::vector<uint8_t> payload = wsb::encode_delta(wsb::DeltaEncoding::Xor, current[t], next, 1);
        const wsb::TensorSpec spec{tensors[t].name, wsb::DType::U8, {static_cast<int64_t>(payload.size())}};
        writer.add(spec, std::move(payload), wsb::xxh3_128_hex(next));
        current[t] = std::move(next);
      }
      writer.commit();
      store.advance_latest(v);
    }
    floor = wsb::measure_disk_floor(root, bytes);
  }
  ~DiskStore() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  /// Drops every file under `dir` from the page cache, so the next pass reads the disk.
  static void drop_cache(const std::filesystem::path& dir) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file()) continue;
      const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
  }
};

DiskStore& disk_store() {
  static DiskStore store;
  return store;
}

/// The prepare disk mode ran before the one streaming pass: seed (copy the FULL, re-read it to verify every tensor,
/// fsync), then per tensor on one thread: copy out, fold every step, verify, write back; fsync and drop.
void old_disk_prepare(const DiskStore& d, const wsb::UpdatePlan& plan, const std::filesystem::path& work) {
  namespace fs = std::filesystem;
  const fs::path full = wsb::Store(d.root / "store").update_dir(0);
  const wsb::Publication full_publication(wsb::Store(d.root / "store"), 0);
  std::set<std::string> files{wsb::kIndexFileName};
  for (const auto& [tensor, shard] : wsb::read_checkpoint_index(full / wsb::kIndexFileName).weight_map) files.insert(shard);
  fs::create_directories(work);
  for (const auto& file : files) wsb::copy_file_all(full / file, work / file);
  {
    wsb::CheckpointReader seeded(work);
    for (const auto& spec : d.tensors) {
      if (wsb::xxh3_128_hex(seeded.data(spec.name)) != full_publication.expected_checksum(spec.name)) std::abort();
      seeded.release(spec.name);
    }
  }
  for (const auto& file : files) wsb::fsync_path(work / file, false);
  std::set<fs::path> touched;
  {
    wsb::CheckpointReader local(work);
    std::vector<uint8_t> buffer;
    for (const auto& spec : d.tensors) {
      const auto current = local.data(spec.name);
      buffer.assign(current.begin(), current.end());
      local.release(spec.name);
      wsb::fold_tensor(plan, spec, buffer, nullptr);
      const auto& shard = local.shard_of(spec.name);
      wsb::Fd fd(shard.path(), O_WRONLY);
      wsb::pwrite_all(fd.get(), buffer, shard.data_start() + shard.at(spec.name).begin, shard.path());
      touched.insert(shard.path());
    }
  }
  for (const auto& path : touched) wsb::fsync_path(path, true);
}

/// Axes: steps (deltas folded: 1, or a catch-up of 3), threads of the pass, old (1: the prepare it replaced).
void BM_DiskPrepare(benchmark::State& state) {
  DiskStore& d = disk_store();
  const auto steps = static_cast<uint32_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const bool old = state.range(2) == 1;
  const wsb::Store store(d.root / "store");
  const wsb::UpdatePlan plan = wsb::plan_update(store, 0, steps);
  const auto out = d.root / "out";
  for (auto _ : state) {
    state.PauseTiming();
    std::filesystem::remove_all(out);
    DiskStore::drop_cache(d.root / "store");
    state.ResumeTiming();
    if (old) {
      old_disk_prepare(d, plan, out);
    } else {
      wsb::MaterializeJob job{.base = store.update_dir(0),
                              .base_origin = "publication 000000",
                              .plan = &plan,
                              .target = plan.steps.back().get(),
                              .version = steps,
                              .out = out,
                              .threads = threads,
                              .drop_base_cache = false,
                              .fault_hook = {}};
      const wsb::MaterializeResult result = wsb::materialize_checkpoint(job, d.tensors);
      benchmark::DoNotOptimize(result);
    }
  }
  std::filesystem::remove_all(out);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * d.bytes));
  const double floor_seconds = static_cast<double>(d.bytes) / (d.floor.read_gbps * 1e9) +
                               static_cast<double>(d.bytes) / (d.floor.write_gbps * 1e9);
  state.counters["disk_read_GBps"] = d.floor.read_gbps;
  state.counters["disk_write_GBps"] = d.floor.write_gbps;
  // Time over one read plus one write of the bytes at the floors (the disk prepare target is <= 1.3).
  state.counters["floor_ratio"] = benchmark::Counter(floor_seconds * static_cast<double>(state.iterations()),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DiskPrepare)
    ->ArgNames({"steps", "threads", "old"})
    ->Args({1, 1, 1})
    ->Args({3, 1, 1})
    ->Args({1, 2, 0})
    ->Args({3, 2, 0})
    ->Args({1, 16, 0})
    ->Args({3, 16, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
