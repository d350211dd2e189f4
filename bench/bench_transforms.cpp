// Host quantization post-load transforms (models/transform) on real per-tensor shapes, against the host memcpy floor
// of their output bytes: FP8 channel transpose + pad, NVFP4 128x4 scale swizzle, MXFP4 value pad and Hopper scale
// swizzle. These run in every cpu-mode prepare and every disk-mode commit, tensor by tensor.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench/bench_floor.hpp"
#include "core/dtype.hpp"
#include "models/transform/fp8_channel.hpp"
#include "models/transform/mxfp4.hpp"
#include "models/transform/nvfp4.hpp"
#include "models/transform/transform.hpp"

namespace {

using wsb::DType;
using wsb::Shape;

/// Gathered input and runtime output of one transform, allocated once per case.
struct TransformCase {
  std::string_view name;
  DType dtype;
  Shape gathered_shape, runtime_shape;
  std::vector<uint8_t> gathered, out;

  TransformCase(std::string_view n, DType d, Shape g, Shape r)
      : name(n), dtype(d), gathered_shape(std::move(g)), runtime_shape(std::move(r)) {
    gathered = wsb::bench::random_bytes(wsb::shape_numel(gathered_shape) * wsb::dtype_size(dtype), 1);
    out.assign(wsb::shape_numel(runtime_shape) * wsb::dtype_size(dtype), 0);
  }
  void run() {
    wsb::TransformIo io;
    io.storage = "bench";
    io.dtype = dtype;
    io.gathered_shape = gathered_shape;
    io.gathered = gathered;
    io.runtime_shape = runtime_shape;
    io.out = out;
    wsb::apply_transform(name, io);
  }
};

void run_case(benchmark::State& state, TransformCase& c) {
  for (auto _ : state) {
    c.run();
    benchmark::DoNotOptimize(c.out.data());
    benchmark::ClobberMemory();
  }
  wsb::bench::set_counters(state, c.out.size());
  state.counters["gathered_bytes"] = static_cast<double>(c.gathered.size());
}

/// FP8 channel weight [E, N, K] -> [E, Kp, Np] (transpose + pad to 16): GLM-4.5-Air experts (E 8, N 2816, K 4096)
/// and a TP8 down_proj shard whose K (1368) pads to 1376.
void BM_Fp8ChannelTranspose(benchmark::State& state) {
  const Shape g = {state.range(0), state.range(1), state.range(2)};
  TransformCase c(wsb::kFp8ChannelWeight, DType::F8_E4M3, g, wsb::fp8_channel_weight_shape(g));
  run_case(state, c);
}
BENCHMARK(BM_Fp8ChannelTranspose)
    ->ArgNames({"E", "N", "K"})
    ->Args({8, 2816, 4096})
    ->Args({1, 4096, 1368})
    ->Unit(benchmark::kMillisecond);

/// NVFP4 block scales [E, M, K16] -> 128x4 tiles: Kimi-K2 / DeepSeek-V3 w13 (M 4096, K16 448) and w2 (M 7168,
/// K16 128), 32 experts.
void BM_Nvfp4ScaleSwizzleHost(benchmark::State& state) {
  const Shape g = {state.range(0), state.range(1), state.range(2)};
  TransformCase c(wsb::kNvfp4ScaleSwizzle, DType::F8_E4M3, g, wsb::nvfp4_scale_swizzled_shape(g));
  run_case(state, c);
}
BENCHMARK(BM_Nvfp4ScaleSwizzleHost)
    ->ArgNames({"E", "M", "K16"})
    ->Args({32, 4096, 448})
    ->Args({32, 7168, 128})
    ->Unit(benchmark::kMillisecond);

/// MXFP4 E8M0 scales [E, M, Kb] -> Hopper swizzle: gpt-oss-120b w13 (M 5760, Kb 90) and w2 (M 2880, Kb 90).
void BM_Mxfp4ScaleSwizzle(benchmark::State& state) {
  const int64_t e = state.range(0), m = state.range(1), kb = state.range(2);
  TransformCase c(wsb::kMxfp4ScaleSwizzle, DType::U8, {e, m, kb}, wsb::mxfp4_scale_swizzled_shape(e, m, kb));
  run_case(state, c);
}
BENCHMARK(BM_Mxfp4ScaleSwizzle)
    ->ArgNames({"E", "M", "Kb"})
    ->Args({32, 5760, 90})
    ->Args({32, 2880, 90})
    ->Unit(benchmark::kMillisecond);

/// MXFP4 values [E, N, Kb, 16] padded to [E, Np, Kb, 16]: gpt-oss w13 rows at TP 3 (1920 -> 2048).
void BM_Mxfp4ValuePad(benchmark::State& state) {
  const int64_t e = state.range(0), n = state.range(1), np = state.range(2);
  TransformCase c(wsb::kMxfp4Pad, DType::U8, {e, n, 90, 16}, {e, np, 90, 16});
  run_case(state, c);
}
BENCHMARK(BM_Mxfp4ValuePad)->ArgNames({"E", "N", "Np"})->Args({16, 1920, 2048})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
