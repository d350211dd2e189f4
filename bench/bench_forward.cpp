// The embedded CPU engine's reference forward: one decode step of each tiny preset at TP 1 (the speed the smoke
// matrix's probes and the engine tests depend on), from synthesized v0 weights. Google Benchmark, wall time per
// step; the counter steps_per_s is its inverse. No floor applies: this is compute on a few KiB of weights.
// (Replaces the timed StepIsFast unit tests: speed targets live in benchmarks.)
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "models/forward/forward.hpp"
#include "models/layout/tp_layout.hpp"
#include "models/profile/profile.hpp"
#include "publisher/publisher.hpp"

namespace {

void BM_ReferenceForwardStep(benchmark::State& state, const std::string& profile_id) {
  const wsb::ModelProfile profile = wsb::find_profile(profile_id, wsb::default_profiles_dir());
  std::map<std::string, std::vector<uint8_t>> canonical;
  for (const wsb::TensorSpec& t : profile.canonical_tensors()) {
    auto& bytes = canonical[t.name];
    bytes.resize(t.bytes());
    wsb::synthesize_initial(profile, t, 7, bytes);
  }
  const wsb::CanonicalLookup lookup = [&](const std::string& n) { return std::span<const uint8_t>(canonical.at(n)); };
  const auto layouts = wsb::build_rank_layouts(profile, 1);
  std::vector<std::vector<uint8_t>> storages;
  wsb::RankStorageView view;
  for (const auto& spec : layouts[0].storages) {
    storages.emplace_back(spec.bytes());
    wsb::load_storage(spec, lookup, storages.back());
  }
  for (const auto& s : storages) view.storages.emplace_back(s);
  auto model = wsb::make_forward(profile, layouts, {view});
  auto seq = model->new_sequence();
  std::vector<float> logits;
  int position = 0;
  for (auto _ : state) {
    model->step(*seq, position % 256, logits);
    if (++position == 256) {  // the sequence's context is bounded: start a fresh one
      seq = model->new_sequence();
      position = 0;
    }
  }
  state.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

const bool registered = [] {
  for (const char* id :
       {"llama-tiny-bf16", "glm-tiny-fp8", "kimi-tiny-nvfp4", "gpt-oss-tiny-mxfp4", "gpt-oss-tiny-bf16"}) {
    benchmark::RegisterBenchmark((std::string("BM_ReferenceForwardStep/") + id).c_str(),
                                 [id](benchmark::State& s) { BM_ReferenceForwardStep(s, id); })
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
