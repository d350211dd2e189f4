// publish_from_checkpoints streams: publishing two checkpoints of 144 MiB each raises the peak resident set by a few
// of their largest tensors (8 MiB), never by a checkpoint. Each publish runs in a forked child whose peak RSS
// (getrusage of the child) is compared with an idle child's, forked from the same parent.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>

#include <nlohmann/json.hpp>

#include "publisher/checkpoint_publisher.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {
namespace fs = std::filesystem;

/// Llama dims whose checkpoint is 144 MiB of BF16: 4 layers of 32 MiB (gate/up/down 8 MiB each, q/k/v/o 2 MiB
/// each), embed and lm_head 8 MiB each.
ModelProfile medium_llama() {
  const nlohmann::json j = {
      {"id", "llama-medium-bf16"},
      {"family", "llama"},
      {"description", "streaming test model"},
      {"source", "wsbench test model"},
      {"quantization", "none"},
      {"dtype", "BF16"},
      {"tiny", true},
      {"dims",
       {{"layers", 4}, {"hidden", 1024}, {"intermediate", 4096}, {"heads", 8}, {"kv_heads", 8}, {"head_dim", 128},
        {"vocab", 4096}, {"rope_theta", 500000.0}, {"rms_eps", 1e-5}, {"tie_embeddings", false}}}};
  return parse_profile(j, "llama-medium-bf16");
}

/// Peak resident set (bytes) of a forked child running `work`; the child's exit status must be 0.
uint64_t child_peak_rss(const std::function<void()>& work) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int status = 0;
    try {
      work();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      status = 1;
    }
    ::_exit(status);
  }
  int status = 0;
  rusage usage{};
  EXPECT_EQ(::wait4(pid, &status, 0, &usage), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

TEST(CheckpointPublishMemory, PeakResidentSetIsAFewTensorsNotACheckpoint) {
  test::TempDir dir;
  const ModelProfile profile = medium_llama();
  uint64_t largest = 0;
  for (const TensorSpec& t : profile.canonical_tensors()) largest = std::max(largest, t.bytes());
  ASSERT_EQ(largest, 8u << 20);
  ASSERT_EQ(profile.canonical_bytes() >> 20, 144u);  // and 18 KiB of norms
  // The two checkpoints are made in a child too, so the parent's heap stays as small as when the idle child forks.
  child_peak_rss([&] {
    write_full_checkpoint(profile, 1, 0, std::nullopt, dir / "a");
    write_full_checkpoint(profile, 1, 1, std::nullopt, dir / "b");
  });
  const uint64_t idle = child_peak_rss([] {});
  for (const bool automatic : {false, true}) {
    SCOPED_TRACE(automatic ? "auto" : "xor");
    const uint64_t peak = child_peak_rss([&] {
      CheckpointPublishOptions options;
      options.store = dir / (automatic ? "store-auto" : "store-xor");
      if (automatic) options.encoding = std::nullopt;
      const auto stats = publish_from_checkpoints({dir / "a", dir / "b"}, options);
      if (stats.size() != 2 || stats[1].changed_values == 0) std::_Exit(3);
    });
    const uint64_t grown = peak > idle ? peak - idle : 0;
    std::printf("peak RSS %s: %llu MiB over an idle child (largest tensor 8 MiB, checkpoint 144 MiB)\n",
                automatic ? "auto" : "xor", static_cast<unsigned long long>(grown >> 20));
    // Two mapped tensors (base and target), the xor mask, the payloads and zstd's context: under four tensors.
    EXPECT_LT(grown, 4 * largest);
  }
}

}  // namespace
}  // namespace wsb
