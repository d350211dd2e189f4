// Deterministic, batch-invariant greedy decoding: same weights => same fingerprint across fresh engines and
// batch compositions; one flipped weight byte => a different fingerprint.
#include <gtest/gtest.h>

#include <future>

#include "engine/engine.hpp"
#include "models/forward/forward.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

GenerateRequest request_for(const std::string& prompt, int tokens = 8) {
  GenerateRequest r;
  r.input_ids = tokenize_bytes(prompt);
  r.max_new_tokens = tokens;
  return r;
}

class EngineDeterminism : public ::testing::Test {
 protected:
  void SetUp() override { test::publish_tiny(dir_ / "store", 1); }
  std::unique_ptr<Engine> boot(int tp, const std::string& mode = "cpu") {
    auto engine = std::make_unique<Engine>(EngineOptions{test::tiny_profile(), tp, test::sync_of(mode), dir_ / "store",
                                                         dir_ / ("work" + std::to_string(counter_++)), 2});
    engine->load_native(Store(dir_ / "store").update_dir(0), 0);
    return engine;
  }
  test::TempDir dir_;
  int counter_ = 0;
};

TEST_F(EngineDeterminism, FreshEnginesAgreeBitForBit) {
  const auto request = request_for("determinism");
  auto a = boot(2);
  auto b = boot(2);
  const auto ra = a->generate(request);
  const auto rb = b->generate(request);
  EXPECT_EQ(ra.output_ids, rb.output_ids);
  EXPECT_EQ(fingerprint(ra), fingerprint(rb));
  EXPECT_EQ(ra.output_ids.size(), 8u);
  EXPECT_EQ(ra.logprobs.size(), 8u);
  EXPECT_EQ(ra.weight_version, 0u);
  EXPECT_EQ(a->storage_checksums(), b->storage_checksums());
}

TEST_F(EngineDeterminism, BatchCompositionDoesNotChangeAResponse) {
  auto engine = boot(2);
  const auto probe = request_for("probe text");
  const std::string alone = fingerprint(engine->generate(probe));
  // Same request inside a batch of other, longer requests submitted concurrently.
  std::vector<std::future<GenerateResponse>> others;
  for (int i = 0; i < 3; ++i) {
    others.push_back(std::async(std::launch::async, [&, i] {
      return engine->generate(request_for("another prompt number " + std::to_string(i), 12));
    }));
  }
  const std::string batched = fingerprint(engine->generate(probe));
  for (auto& f : others) EXPECT_EQ(f.get().output_ids.size(), 12u);
  EXPECT_EQ(alone, batched);
}

TEST_F(EngineDeterminism, OneFlippedWeightByteChangesTheFingerprint) {
  auto engine = boot(2);
  const auto probe = request_for("probe text");
  const std::string before = fingerprint(engine->generate(probe));
  const auto layout = engine->layouts()[1];
  const size_t qkv = layout.index_of("model.layers.0.self_attn.qkv_proj.weight");
  engine->debug_flip_storage_byte(1, qkv, 1);  // high byte of element 0 of rank 1's layer-0 qkv
  const std::string after = fingerprint(engine->generate(probe));
  EXPECT_NE(before, after);
}

TEST_F(EngineDeterminism, ResponsesFailAfterEngineIsDestroyedNeverHang) {
  auto engine = boot(1);
  EXPECT_THROW(engine->generate(GenerateRequest{}), Error);  // empty input is refused up front
  GenerateRequest out_of_vocab;
  out_of_vocab.input_ids = {1 << 30};
  EXPECT_THROW(engine->generate(out_of_vocab), Error);
}

}  // namespace
}  // namespace wsb
