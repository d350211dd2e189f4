// fold_in_parallel: every (tensor, segment) folded on its own, all steps of a catch-up in one pass per chunk, the
// serial hash following the folded prefix. Checked: the final bytes equal the target for every mix of encodings
// and framings and any thread count; each chunk is reported once with its exact old ^ new mask; segments follow
// the common frame boundaries; and every failure (a frame failing mid-tensor, a checksum, an invalid code) restores
// every byte of every tensor before the exact error propagates.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "modes/sync/delta_fold.hpp"
#include "modes/sync/parallel_fold.hpp"
#include "publication/delta_codec.hpp"
#include "publication/publication.hpp"
#include "publication/zstd_frame.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/store_edit.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

using Bytes = std::vector<uint8_t>;
using Canonical = std::map<std::string, Bytes>;
using test::error_message;

constexpr uint64_t kFrame = 4096;
/// Units small enough that the tensors below split into many segments and chunks.
const FoldOptions kSmall{.chunk_bytes = 1000, .min_segment_bytes = kFrame, .segment_bytes = 3 * kFrame};

const std::string kEmbed = "model.embed_tokens.weight";
const std::string kDown = "model.layers.0.mlp.down_proj.weight";

// Sizes around the 4 KiB frames: many segments, a partial last segment, tensors below one frame, an empty one.
const std::vector<TensorSpec> kTensors{
    {kEmbed, DType::BF16, {40, 1000}},           // 80000 B: 20 segments of xor frames
    {kDown, DType::F8_E4M3, {3, 4099}},          // 12297 B: 4 frames and segments (the last one 9 B)
    {"model.layers.0.mlp.experts.down_proj_scales", DType::U8, {2, 3, 5}},
    {"model.norm.weight", DType::F32, {8}},
    {"model.layers.0.input_layernorm.weight", DType::BF16, {0}},
};

/// Version v of every tensor: v0 draws whose codes are valid in every format above (bits 1..5 only), each later
/// version k flipping the low bit of every 53rd byte from byte k on, and bits 1..3 of every 97th byte from byte 0
/// by 2k (the same bytes in every version: a catch-up changes them in several steps).
Canonical at(uint32_t v) {
  Canonical out;
  for (const TensorSpec& t : kTensors) {
    Bytes b(t.bytes());
    std::mt19937 rng(static_cast<uint32_t>(t.bytes()));
    for (auto& x : b) x = static_cast<uint8_t>(rng() & 0x3E);
    for (uint32_t k = 1; k <= v; ++k) {
      for (size_t i = k; i < b.size(); i += 53) b[i] ^= 1;
      for (size_t i = 0; i < b.size(); i += 97) b[i] ^= static_cast<uint8_t>(2 * k);
    }
    out[t.name] = b;
  }
  return out;
}

/// Replaces a tensor's payload and/or checksum while a delta is written.
using Edit = std::function<void(const std::string& tensor, Bytes& payload, std::string& checksum)>;

struct Store3 {
  test::TempDir dir;
  Store store{dir.path()};
  Store3() {
    PublicationManifest manifest;
    PublicationWriter writer(store.update_dir(0), manifest, 1 << 20, true, false);
    const Canonical v0 = at(0);
    for (const TensorSpec& t : kTensors) writer.add(t, v0.at(t.name), xxh3_128_hex(v0.at(t.name)));
    writer.commit();
  }
  void delta(uint32_t v, DeltaEncoding encoding, PayloadFraming framing, const Edit& edit = {}) {
    PublicationWriter writer(store.update_dir(v), delta_manifest(v, encoding, framing), 1 << 20, true, false);
    const Canonical base = at(v - 1), target = at(v);
    for (const TensorSpec& t : kTensors) {
      Bytes payload = encode_delta(encoding, base.at(t.name), target.at(t.name), 1,
                                   framing == PayloadFraming::Frames ? kFrame : 0);
      std::string checksum = xxh3_128_hex(target.at(t.name));
      if (edit) edit(t.name, payload, checksum);
      TensorSpec spec{t.name, DType::U8, {static_cast<int64_t>(payload.size())}};
      writer.add(std::move(spec), std::move(payload), checksum);
    }
    writer.commit();
    store.advance_latest(v);
  }
};

/// The tensors at v0 and fold targets over them.
struct Image {
  Canonical bytes = at(0);
  std::vector<FoldTarget> targets;
  Image() {
    for (const TensorSpec& t : kTensors) targets.push_back(FoldTarget{&t, bytes.at(t.name)});
  }
};

/// Chunks each tensor reported, and their masks.
struct Seen {
  std::mutex mutex;
  std::map<size_t, std::vector<std::pair<uint64_t, uint64_t>>> ranges;
  std::map<size_t, Bytes> masks;
  FoldListener listener() {
    return [this](size_t i, const FoldChunk& c) {
      std::lock_guard lock(mutex);
      ranges[i].emplace_back(c.from, c.to);
      Bytes& m = masks[i];
      m.resize(c.tensor.size());
      std::copy(c.mask.begin(), c.mask.end(), m.begin() + static_cast<std::ptrdiff_t>(c.from));
    };
  }
};

struct Case {
  std::vector<DeltaEncoding> steps;
  PayloadFraming framing;
  int threads;
};

class ParallelFold : public ::testing::TestWithParam<Case> {};

TEST_P(ParallelFold, EqualsTheTargetAndReportsEveryChunkOnceWithItsMask) {
  const Case c = GetParam();
  Store3 s;
  for (uint32_t v = 1; v <= c.steps.size(); ++v) s.delta(v, c.steps[v - 1], c.framing);
  const uint32_t last = static_cast<uint32_t>(c.steps.size());
  const UpdatePlan plan = plan_update(s.store, 0, last);
  Image image;
  FoldWorkspace workspace;
  Seen seen;
  fold_in_parallel(plan, image.targets, c.threads, workspace, seen.listener(), kSmall);
  const Canonical target = at(last), base = at(0);
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const std::string& name = kTensors[i].name;
    EXPECT_EQ(image.bytes.at(name), target.at(name)) << name;
    auto ranges = seen.ranges[i];
    std::sort(ranges.begin(), ranges.end());
    uint64_t covered = 0;
    for (const auto& [from, to] : ranges) {
      EXPECT_EQ(from, covered) << name;
      covered = to;
    }
    EXPECT_EQ(covered, kTensors[i].bytes()) << name;
    Bytes mask(base.at(name).size());
    for (size_t k = 0; k < mask.size(); ++k) mask[k] = base.at(name)[k] ^ target.at(name)[k];
    if (!mask.empty()) {
      EXPECT_EQ(seen.masks[i], mask) << name;
    }
  }
  // A second fold with the same workspace (its scratch and bodies reused) moves on from the target.
  s.delta(last + 1, c.steps.back(), c.framing);
  fold_in_parallel(plan_update(s.store, last, last + 1), image.targets, c.threads, workspace, {}, kSmall);
  EXPECT_EQ(image.bytes, at(last + 1));
}

INSTANTIATE_TEST_SUITE_P(
    Mixes, ParallelFold,
    ::testing::Values(Case{{DeltaEncoding::Xor}, PayloadFraming::Frames, 4},
                      Case{{DeltaEncoding::Xor}, PayloadFraming::OneFrame, 4},
                      Case{{DeltaEncoding::Xor, DeltaEncoding::Xor, DeltaEncoding::Xor}, PayloadFraming::Frames, 3},
                      Case{{DeltaEncoding::Xor, DeltaEncoding::Xor, DeltaEncoding::Xor}, PayloadFraming::OneFrame, 1},
                      Case{{DeltaEncoding::Overwrite, DeltaEncoding::Overwrite}, PayloadFraming::OneFrame, 4},
                      Case{{DeltaEncoding::Xor, DeltaEncoding::Overwrite, DeltaEncoding::Xor}, PayloadFraming::Frames, 4},
                      Case{{DeltaEncoding::Overwrite, DeltaEncoding::Xor, DeltaEncoding::Overwrite},
                           PayloadFraming::Frames, 2}));

TEST(ParallelFoldSegments, FollowTheFramesEveryXorStepShares) {
  Store3 s;
  s.delta(1, DeltaEncoding::Xor, PayloadFraming::Frames);
  s.delta(2, DeltaEncoding::Overwrite, PayloadFraming::Frames);
  s.delta(3, DeltaEncoding::Xor, PayloadFraming::OneFrame);
  Image image;
  std::vector<OverwriteBody> bodies;
  const TensorSpec& embed = kTensors[0];
  TensorFold framed(plan_update(s.store, 0, 2), embed, image.bytes.at(kEmbed), bodies, kSmall);
  ASSERT_EQ(framed.segment_count(), 20u);
  EXPECT_EQ(framed.segment_begin(7), 7 * kFrame);
  EXPECT_EQ(framed.segment_end(19), 80000u);
  TensorFold merged(plan_update(s.store, 0, 1), embed, image.bytes.at(kEmbed), bodies,
                    FoldOptions{.chunk_bytes = 1000, .min_segment_bytes = 10000, .segment_bytes = 3 * kFrame});
  ASSERT_EQ(merged.segment_count(), 7u);  // frames merged to >= 10000 B: 3 frames each, the last 2 of them
  EXPECT_EQ(merged.segment_begin(1), 3 * kFrame);
  TensorFold down(plan_update(s.store, 0, 1), kTensors[1], image.bytes.at(kDown), bodies, kSmall);
  ASSERT_EQ(down.segment_count(), 4u);  // the 9-byte last frame starts at 12288 = 3 * 4096: a segment of its own
  EXPECT_EQ(down.segment_begin(3), 3 * kFrame);
  EXPECT_EQ(down.segment_end(3), 12297u);
  // A one-frame step keeps the tensor whole.
  TensorFold whole(plan_update(s.store, 0, 3), embed, image.bytes.at(kEmbed), bodies, kSmall);
  EXPECT_EQ(whole.segment_count(), 1u);
  // Overwrite alone does not constrain segments: they are segment_bytes long.
  Store3 o;
  o.delta(1, DeltaEncoding::Overwrite, PayloadFraming::OneFrame);
  TensorFold overwrite(plan_update(o.store, 0, 1), embed, image.bytes.at(kEmbed), bodies, kSmall);
  ASSERT_EQ(overwrite.segment_count(), 7u);  // ceil(80000 / 12288)
  EXPECT_EQ(overwrite.segment_begin(6), 6 * 3 * kFrame);
}

/// Folds 0 -> last of `s` on 4 threads: must throw exactly `message` and leave every tensor at v0.
void expect_failure_restores(Store3& s, uint32_t last, ErrorKind kind, const std::string& message) {
  Image image;
  FoldWorkspace workspace;
  EXPECT_EQ(error_message([&] { fold_in_parallel(plan_update(s.store, 0, last), image.targets, 4, workspace, {}, kSmall); },
                          kind),
            message);
  EXPECT_EQ(image.bytes, at(0));
}

TEST(ParallelFoldFailures, AFrameFailingMidTensorRestoresEveryTensor) {
  Store3 s;
  s.delta(1, DeltaEncoding::Xor, PayloadFraming::Frames);
  uint64_t offset = 0;
  s.delta(2, DeltaEncoding::Xor, PayloadFraming::Frames, [&](const std::string& name, Bytes& payload, std::string&) {
    if (name != kEmbed) return;
    // Frame 12 declares 4096 bytes but its raw block holds 4000: the walk of the extents passes, the decode fails
    // after frames 0..11 (other segments) are applied.
    const auto frames = zstd_frame_extents(payload, 80000, "m");
    const Bytes mask(4000, 0);
    Bytes bad = test::ZstdFrameBuilder(kFrame).raw(mask).finish();
    offset = frames[12].offset;
    Bytes out(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(frames[12].offset));
    out.insert(out.end(), bad.begin(), bad.end());
    out.insert(out.end(), payload.begin() + static_cast<std::ptrdiff_t>(frames[13].offset), payload.end());
    payload = out;
  });
  expect_failure_restores(s, 2, ErrorKind::Format,
                          "xor mask of tensor '" + kEmbed + "': frame 12 at byte " + std::to_string(offset) +
                              ": corrupt zstd frame (Data corruption detected)");
}

TEST(ParallelFoldFailures, AChecksumOfAMultiSegmentTensorRestoresEveryTensor) {
  Store3 s;
  s.delta(1, DeltaEncoding::Xor, PayloadFraming::Frames);
  std::string fake;
  s.delta(2, DeltaEncoding::Overwrite, PayloadFraming::Frames, [&](const std::string& name, Bytes&, std::string& sum) {
    if (name != kEmbed) return;
    sum[5] = sum[5] == 'a' ? 'b' : 'a';
    fake = sum;
  });
  expect_failure_restores(s, 2, ErrorKind::Checksum,
                          "tensor '" + kEmbed + "': xxh3-128 of version 000002 is " + xxh3_128_hex(at(2).at(kEmbed)) +
                              ", publication says " + fake);
}

TEST(ParallelFoldFailures, AChecksumAfterOverwriteStepsWrittenInPlaceRestoresEveryTensor) {
  // Overwrite steps only: the fold writes the changed bytes in place (no mask applied at the end), so the undo
  // must swap back exactly the bytes each step replaced, in reverse order, across several segments.
  Store3 s;
  s.delta(1, DeltaEncoding::Overwrite, PayloadFraming::OneFrame);
  std::string fake;
  s.delta(2, DeltaEncoding::Overwrite, PayloadFraming::Frames, [&](const std::string& name, Bytes&, std::string& sum) {
    if (name != kDown) return;
    sum[0] = sum[0] == 'a' ? 'b' : 'a';
    fake = sum;
  });
  expect_failure_restores(s, 2, ErrorKind::Checksum,
                          "tensor '" + kDown + "': xxh3-128 of version 000002 is " + xxh3_128_hex(at(2).at(kDown)) +
                              ", publication says " + fake);
}

TEST(ParallelFoldFailures, AnInvalidCodeInALaterSegmentIsRefusedAfterAMatchingChecksum) {
  Store3 s;
  Bytes target = at(1).at(kDown);
  target[9000] = 0x7F;  // E4M3 NaN in the third segment
  s.delta(1, DeltaEncoding::Xor, PayloadFraming::Frames, [&](const std::string& name, Bytes& payload, std::string& sum) {
    if (name != kDown) return;
    payload = encode_delta(DeltaEncoding::Xor, at(0).at(kDown), target, 1, kFrame);
    sum = xxh3_128_hex(target);
  });
  expect_failure_restores(s, 1, ErrorKind::Format,
                          "publication 000001: tensor '" + kDown +
                              "' (F8_E4M3 [3, 4099]): element 9000 [2, 802] holds E4M3 code 0x7F, which is NaN (1 "
                              "invalid code in the tensor)");
}

TEST(ParallelFoldFailures, TheLowestFailingTensorIsReported) {
  Store3 s;
  s.delta(1, DeltaEncoding::Xor, PayloadFraming::Frames, [&](const std::string& name, Bytes&, std::string& sum) {
    if (name == kEmbed || name == kDown) sum = std::string(32, '0');
  });
  expect_failure_restores(s, 1, ErrorKind::Checksum,
                          "tensor '" + kEmbed + "': xxh3-128 of version 000001 is " + xxh3_128_hex(at(1).at(kEmbed)) +
                              ", publication says " + std::string(32, '0'));
}

TEST(ParallelFoldFailures, ALowerTensorStillReportsWhenAHigherOneFailedFirst) {
  // Forces the interleaving that a fold stopping every worker at the first failure gets wrong: one worker holds
  // a segment of the embedding (tensor 0) until down_proj (tensor 1) has folded and failed its checksum; the
  // embedding must still finish, fail, and be the error reported.
  Store3 s;
  s.delta(1, DeltaEncoding::Xor, PayloadFraming::Frames, [&](const std::string& name, Bytes&, std::string& sum) {
    if (name == kEmbed || name == kDown) sum = std::string(32, '0');
  });
  Image image;
  FoldWorkspace workspace;
  std::atomic<uint64_t> down_folded{0};
  std::atomic<bool> held{false};
  const FoldListener listener = [&](size_t i, const FoldChunk& c) {
    if (i == 1) down_folded += c.to - c.from;
    if (i != 0 || held.exchange(true)) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (down_folded.load() < kTensors[1].bytes() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // down_proj's checksum fails meanwhile
  };
  EXPECT_EQ(error_message([&] { fold_in_parallel(plan_update(s.store, 0, 1), image.targets, 4, workspace, listener,
                                                 kSmall); },
                          ErrorKind::Checksum),
            "tensor '" + kEmbed + "': xxh3-128 of version 000001 is " + xxh3_128_hex(at(1).at(kEmbed)) +
                ", publication says " + std::string(32, '0'));
  EXPECT_EQ(down_folded.load(), kTensors[1].bytes());
  EXPECT_EQ(image.bytes, at(0));
}

TEST(ParallelFoldFailures, APayloadRefusedWhenOpenedChangesNothing) {
  Store3 s;
  s.delta(1, DeltaEncoding::Xor, PayloadFraming::Frames, [&](const std::string& name, Bytes& payload, std::string&) {
    if (name == kDown) payload.resize(payload.size() - 2);
  });
  Store3 t;  // the extents' error names the last frame
  t.delta(1, DeltaEncoding::Xor, PayloadFraming::Frames);
  const Publication published(t.store, 1);
  const std::span<const uint8_t> payload = published.payload(kDown);
  const Bytes good(payload.begin(), payload.end());
  const auto frames = zstd_frame_extents(good, 12297, "m");
  expect_failure_restores(s, 1, ErrorKind::Format,
                          "xor mask of tensor '" + kDown + "', frame 3 at byte " + std::to_string(frames[3].offset) +
                              ": truncated or corrupt zstd frame (" +
                              std::to_string(good.size() - 2 - frames[3].offset) +
                              " bytes left: Src size is incorrect)");
}

TEST(FoldTensor, UndoRestoresAfterSuccessAndCatchUpStaysExact) {
  Store3 s;
  s.delta(1, DeltaEncoding::Xor, PayloadFraming::Frames);
  s.delta(2, DeltaEncoding::Overwrite, PayloadFraming::OneFrame);
  const UpdatePlan plan = plan_update(s.store, 0, 2);
  Canonical bytes = at(0);
  FoldUndo undo;
  fold_tensor(plan, kTensors[0], bytes.at(kEmbed), &undo);
  EXPECT_EQ(bytes.at(kEmbed), at(2).at(kEmbed));
  unfold_tensor(plan, undo, bytes.at(kEmbed));
  EXPECT_EQ(bytes.at(kEmbed), at(0).at(kEmbed));
}

}  // namespace
}  // namespace wsb
