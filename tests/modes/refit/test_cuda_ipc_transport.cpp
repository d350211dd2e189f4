// The refit's cuda-ipc transport between two processes, over the host stand-in of device memory (HostDeviceIpc:
// same handshake, rings and process rule as CUDA IPC, no GPU needed): a forked child exports the rings and streams
// (the trainer), this process imports them and checks every byte (the engine). Exact bytes and counts end to end;
// a slow receiver never reads a ring slot the sender already reused; an import in the exporting process, a ring of
// another bucket size, a ring on another GPU and a malformed handshake are each refused with their exact text; the
// base GPU id maps physical to local ids. The sender's staged path (send_filled: buckets packed piece by piece into
// pinned staging, each piece copied asynchronously into the ring): exact payload bytes, alignment gaps zeroed, for
// buckets spanning several pieces of odd sizes; a fill that throws mid-bucket fails the stream and delivers nothing
// of that bucket. The host stand-in performs an asynchronous copy only when it is waited for, so a staging piece
// reused too early, or a bucket announced before its copies completed, shows up as wrong bytes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <iterator>
#include <random>
#include <thread>
#include <utility>

#include "modes/refit/cuda_ipc_transport.hpp"
#include "modes/refit/host_device_ipc.hpp"
#include "tests/modes/refit/child_process.hpp"
#include "tests/modes/refit/refit_run.hpp"

namespace wsb::refit::test {
namespace {

using namespace std::chrono_literals;
using wsb::test::error_kind_and_text;

/// The child keeps its exported rings until the parent has imported and read them, as `wsbench refit-sender`
/// waits for its release pipe.
class ReleasePipe {
 public:
  ReleasePipe() {
    if (pipe(fds_) != 0) throw std::runtime_error("pipe failed");
  }
  ~ReleasePipe() {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  /// In the child: blocks until the parent released (or exited).
  void wait() {
    close(fds_[1]);
    fds_[1] = -1;
    char byte = 0;
    while (read(fds_[0], &byte, 1) < 0 && errno == EINTR) {
    }
  }
  /// In the parent.
  void release() {
    close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2] = {-1, -1};
};

/// Streams every rank of `shards` on its own thread (the trainer side, in the child); rethrows the first error.
void stream_every_rank(const Shards& shards, uint64_t bucket_bytes, Transport& transport) {
  std::vector<std::string> errors = on_every_rank(transport.ranks(), [&](int r) {
    stream_shard(r, shards.weights(r), bucket_bytes, transport);
  });
  for (const auto& e : errors) {
    if (!e.empty()) throw Error(ErrorKind::Io, e);
  }
}

/// A receiver that waits `delay` before every receive: the sender runs as far ahead as the rings let it.
class SlowTransport final : public Transport {
 public:
  SlowTransport(Transport& inner, std::chrono::microseconds delay) : inner_(inner) {
    for (int r = 0; r < inner.ranks(); ++r) receivers_.emplace_back(inner.receiver(r), delay);
  }
  int ranks() const override { return inner_.ranks(); }
  uint64_t bucket_size_bytes() const override { return inner_.bucket_size_bytes(); }
  SenderEndpoint& sender(int rank) override { return inner_.sender(rank); }
  ReceiverEndpoint& receiver(int rank) override { return receivers_.at(static_cast<size_t>(rank)); }

 private:
  struct Slow final : ReceiverEndpoint {
    Slow(ReceiverEndpoint& in, std::chrono::microseconds d) : inner(in), delay(d) {}
    ReceivedBatch receive(std::span<uint8_t> into) override {
      std::this_thread::sleep_for(delay);
      return inner.receive(into);
    }
    void cancel(const std::string& reason) noexcept override { inner.cancel(reason); }
    ReceiverEndpoint& inner;
    std::chrono::microseconds delay;
  };
  Transport& inner_;
  std::vector<Slow> receivers_;
};

/// The host stand-in, with every import's read() delayed by `delay` before it copies: the receiver is slowest
/// exactly where a reused slot would hurt (after its control slot was freed, before the bucket is copied out).
class SlowReadIpc final : public DeviceIpc {
 public:
  SlowReadIpc(const HostDeviceIpc& inner, std::chrono::microseconds delay) : inner_(inner), delay_(delay) {}
  std::string_view kind() const override { return "host"; }
  std::array<uint8_t, 16> device_uuid(int device) const override { return inner_.device_uuid(device); }
  std::unique_ptr<ExportedDeviceMemory> allocate(int device, uint64_t bytes) const override {
    return inner_.allocate(device, bytes);
  }
  std::unique_ptr<PinnedHostMemory> allocate_pinned(uint64_t bytes) const override {
    return inner_.allocate_pinned(bytes);
  }
  std::unique_ptr<ImportedDeviceMemory> open(int device, const IpcMemHandle& handle, uint64_t bytes) const override {
    struct Slow final : ImportedDeviceMemory {
      std::unique_ptr<ImportedDeviceMemory> in;
      std::chrono::microseconds delay;
      void read(uint64_t offset, std::span<uint8_t> dst) override {
        std::this_thread::sleep_for(delay);
        in->read(offset, dst);
      }
    };
    auto slow = std::make_unique<Slow>();
    slow->in = inner_.open(device, handle, bytes);
    slow->delay = delay_;
    return slow;
  }

 private:
  const HostDeviceIpc& inner_;
  std::chrono::microseconds delay_;
};

CudaIpcGpus gpus_of(int ranks, int base_gpu_id = 0) {
  CudaIpcGpus g;
  for (int r = 0; r < ranks; ++r) g.rank_devices.push_back(r);
  g.base_gpu_id = base_gpu_id;
  return g;
}

/// One refit: the child exports and streams every rank of `shards`; this process imports, receives and checks.
RunRecord cross_process_refit(const Shards& shards, uint64_t bucket_bytes, const CudaIpcGpus& gpus,
                              std::chrono::microseconds receive_delay = 0us, std::chrono::microseconds read_delay = 0us,
                              CudaIpcStaging staging = {}) {
  const HostDeviceIpc ipc;
  const SlowReadIpc slow_ipc(ipc, read_delay);
  const int ranks = static_cast<int>(shards.specs.size());
  ShmTransport control(ranks, kCudaIpcControlBytes);
  ReleasePipe release;
  ChildProcess child([&] {
    control.set_receiver_alive(parent_alive());
    CudaIpcTransport transport(control, bucket_bytes, ipc, gpus, staging);
    stream_every_rank(shards, bucket_bytes, transport);
    release.wait();
  });
  control.set_sender_alive(child.liveness());
  RunRecord rec;
  {
    CudaIpcTransport transport(control, bucket_bytes, slow_ipc, gpus);
    SlowTransport slow(transport, receive_delay);
    hang_guard([&] { rec = receive_and_check(shards, bucket_bytes, slow); }, 30);
    std::vector<int> opened = ipc.opened_devices();
    std::sort(opened.begin(), opened.end());
    std::vector<int> expected = gpus.rank_devices;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(opened, expected);  // one import per rank, on the rank's local GPU
  }
  release.release();
  EXPECT_EQ(child.wait(), exited_with(kChildReturned));
  return rec;
}

TEST(RefitCudaIpcTransport, CrossProcessRoundTripDeliversExactBytes) {
  std::mt19937 rng(77);
  const auto shards = make_shards(random_specs(rng, 3, 24, 1000));
  for (const uint64_t bucket : {uint64_t{1024}, uint64_t{4096}, uint64_t{1} << 20}) {
    SCOPED_TRACE("bucket " + std::to_string(bucket));
    const RunRecord rec = cross_process_refit(shards, bucket, gpus_of(3));
    EXPECT_EQ(rec.names, names_upto(24));
    EXPECT_EQ(rec.bytes, total_weight_bytes(shards));
    EXPECT_EQ(rec.batches, expected_aligned_batches(shards, bucket));
    const SenderPlan plan = sender_plan(shards, bucket);
    EXPECT_EQ(rec.transport_batches, plan.batches);  // the handshake is not a batch
    EXPECT_EQ(rec.transport_bytes, plan.bytes);
  }
}

TEST(RefitCudaIpcTransport, CrossProcessRandomLayoutsDeliverEveryWeightOnceInOrder) {
  std::mt19937 rng(20261201);
  for (int trial = 0; trial < 8; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int ranks = 1 + static_cast<int>(rng() % 4);
    const size_t weights = 1 + rng() % 40;
    const uint64_t bucket = 256 + rng() % 4096;
    const auto shards = make_shards(random_specs(rng, ranks, weights, bucket));
    const RunRecord rec = cross_process_refit(shards, bucket, gpus_of(ranks));
    EXPECT_EQ(rec.names, names_upto(weights));
    EXPECT_EQ(rec.bytes, total_weight_bytes(shards));
    EXPECT_EQ(rec.batches, expected_aligned_batches(shards, bucket));
    EXPECT_EQ(rec.transport_batches, sender_plan(shards, bucket).batches);
    if (HasFailure()) return;
  }
}

TEST(RefitCudaIpcTransport, SlowReceiverNeverReadsARingSlotTheSenderReused) {
  // Forty 1000 B weights per rank, one per 1024 B bucket: 40 buckets through a ring of 4 slots per rank, so the
  // sender is always as far ahead as the control ring lets it. The receiver is slow once before each receive, and
  // once more inside the device copy, after the control slot was freed: the window a reused slot would fall in.
  // Each bucket goes through the staging whole (one piece), and in four pieces of 300 B through two staging
  // pieces, so the back-pressure also holds while a staging piece waits for its copy.
  const auto shards = make_shards(equal_specs(2, 40, 1000));
  ASSERT_EQ(CudaIpcTransport::device_slots(2), 4u);
  for (const CudaIpcStaging staging : {CudaIpcStaging{}, CudaIpcStaging{.pieces = 2, .piece_bytes = 300}}) {
    for (const auto& [before, inside] : {std::pair{2000us, 0us}, std::pair{0us, 2000us}}) {
      SCOPED_TRACE("staging " + std::to_string(staging.pieces) + " x " + std::to_string(staging.piece_bytes) +
                   " B, delay before receive " + std::to_string(before.count()) + " us, inside the copy " +
                   std::to_string(inside.count()) + " us");
      const RunRecord rec = cross_process_refit(shards, 1024, gpus_of(2), before, inside, staging);
      EXPECT_EQ(rec.names, names_upto(40));
      EXPECT_EQ(rec.bytes, 80000u);
      EXPECT_EQ(rec.transport_batches, (std::vector<uint64_t>{40, 40}));
    }
  }
}

/// The payload a bucket of `entries` must arrive as, built without the sender's packing code: zeros, each weight's
/// bytes at its entry's offset.
std::vector<uint8_t> expected_payload(const std::vector<WireEntry>& entries, const Shards& shards, size_t first) {
  std::vector<uint8_t> out(entries.back().offset + entries.back().bytes, 0);
  for (size_t k = 0; k < entries.size(); ++k) {
    const auto& bytes = shards.data[0][first + k];
    std::copy(bytes.begin(), bytes.end(), out.begin() + static_cast<std::ptrdiff_t>(entries[k].offset));
  }
  return out;
}

/// Streams rank 0 of `shards` from a child through staging `staging` (the sender endpoint wrapped by `wrap`) and
/// receives every bucket raw in this process into a poisoned buffer. Returns each bucket's entries and payload as
/// received, and the receiver's error text ("" when the stream ended cleanly).
struct RawStream {
  std::vector<std::vector<WireEntry>> entries;
  std::vector<std::vector<uint8_t>> payloads;
  std::string error;
};
using WrapSender = std::function<std::unique_ptr<Transport>(Transport&)>;
RawStream raw_stream(const Shards& shards, uint64_t bucket_bytes, CudaIpcStaging staging, const WrapSender& wrap = {}) {
  const HostDeviceIpc ipc;
  ShmTransport control(1, kCudaIpcControlBytes);
  ReleasePipe release;
  ChildProcess child([&] {
    control.set_receiver_alive(parent_alive());
    CudaIpcTransport transport(control, bucket_bytes, ipc, gpus_of(1), staging);
    std::unique_ptr<Transport> wrapped = wrap ? wrap(transport) : nullptr;
    try {
      stream_shard(0, shards.weights(0), bucket_bytes, wrapped ? *wrapped : transport);
    } catch (const Error&) {
      // stream_shard failed the channel: the receiver reports it
    }
    release.wait();
  });
  control.set_sender_alive(child.liveness());
  RawStream out;
  {
    CudaIpcTransport transport(control, bucket_bytes, ipc, gpus_of(1));
    hang_guard([&] {
      out.error = error_kind_and_text([&] {
        while (true) {
          std::vector<uint8_t> into(bucket_bytes, kPoison);
          const ReceivedBatch b = transport.receiver(0).receive(into);
          if (b.end) return;
          into.resize(b.payload_bytes);
          out.entries.push_back(b.entries);
          out.payloads.push_back(std::move(into));
        }
      });
    });
  }
  release.release();
  EXPECT_EQ(child.wait(), exited_with(kChildReturned));
  return out;
}

TEST(RefitCudaIpcTransport, StagedBucketsSpanningSeveralPiecesArriveExactWithTheirGapsZeroed) {
  // Odd weight sizes, so most entries end mid-line and the next one starts after a gap of zeros; staging pieces of
  // odd sizes, so pieces end mid-weight and mid-gap; a bucket spans up to 41 pieces through 2 or 3 staging pieces.
  std::vector<std::vector<TensorSpec>> specs(1);
  const int64_t sizes[] = {1, 63, 65, 777, 1000, 129, 5, 2048, 3, 64, 1500, 7, 4000, 31};
  for (size_t i = 0; i < std::size(sizes); ++i) specs[0].push_back({fmt_name(i), DType::U8, {sizes[i]}});
  const auto shards = make_shards(std::move(specs));
  const uint64_t bucket = 4096;
  const auto plan = plan_buckets(0, shards.weights(0), bucket);
  ASSERT_EQ(plan.size(), 3u);
  for (const CudaIpcStaging staging : {CudaIpcStaging{.pieces = 3, .piece_bytes = 100},
                                       CudaIpcStaging{.pieces = 2, .piece_bytes = 64},
                                       CudaIpcStaging{.pieces = 2, .piece_bytes = 1000}, CudaIpcStaging{}}) {
    SCOPED_TRACE("staging " + std::to_string(staging.pieces) + " x " + std::to_string(staging.piece_bytes) + " B");
    const RawStream got = raw_stream(shards, bucket, staging);
    EXPECT_EQ(got.error, "");
    ASSERT_EQ(got.entries.size(), plan.size());
    size_t first = 0;
    for (size_t b = 0; b < plan.size(); ++b) {
      EXPECT_EQ(got.entries[b], plan[b]);
      EXPECT_EQ(got.payloads[b], expected_payload(plan[b], shards, first)) << "bucket " << b;
      first += plan[b].size();
    }
  }
}

TEST(RefitCudaIpcTransport, StagedRandomLayoutsAcrossRanksDeliverEveryWeightOnce) {
  std::mt19937 rng(424242);
  for (int trial = 0; trial < 6; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int ranks = 1 + static_cast<int>(rng() % 3);
    const size_t weights = 1 + rng() % 30;
    const uint64_t bucket = 512 + rng() % 4096;
    const CudaIpcStaging staging{.pieces = 2 + rng() % 3, .piece_bytes = 1 + rng() % 700};
    const auto shards = make_shards(random_specs(rng, ranks, weights, bucket));
    const RunRecord rec = cross_process_refit(shards, bucket, gpus_of(ranks), 0us, 0us, staging);
    EXPECT_EQ(rec.names, names_upto(weights));
    EXPECT_EQ(rec.bytes, total_weight_bytes(shards));
    EXPECT_EQ(rec.transport_batches, sender_plan(shards, bucket).batches);
    EXPECT_EQ(rec.transport_bytes, sender_plan(shards, bucket).bytes);
    if (HasFailure()) return;
  }
}

/// Forwards to a transport; its senders' filled path throws once bucket `bad_bucket` has been filled up to
/// `bad_offset` (a trainer whose weights vanish mid-bucket).
class ThrowingFill final : public Transport {
 public:
  ThrowingFill(Transport& inner, size_t bad_bucket, uint64_t bad_offset)
      : inner_(inner), sender_(inner.sender(0), bad_bucket, bad_offset) {}
  int ranks() const override { return 1; }
  uint64_t bucket_size_bytes() const override { return inner_.bucket_size_bytes(); }
  SenderEndpoint& sender(int) override { return sender_; }
  ReceiverEndpoint& receiver(int rank) override { return inner_.receiver(rank); }

 private:
  struct Sender final : SenderEndpoint {
    Sender(SenderEndpoint& in, size_t bucket, uint64_t offset) : inner(in), bad_bucket(bucket), bad_offset(offset) {}
    void send(Bucket bucket) override { inner.send(std::move(bucket)); }
    bool send_filled(std::vector<WireEntry> entries, uint64_t bytes, const BucketFill& fill) override {
      const bool bad = buckets++ == bad_bucket;
      return inner.send_filled(std::move(entries), bytes, [&](uint64_t offset, std::span<uint8_t> dst) {
        if (bad && offset + dst.size() > bad_offset) {
          throw Error(ErrorKind::Io, fmt::format("trainer: weights gone at bucket byte {}", offset));
        }
        fill(offset, dst);
      });
    }
    void finish() override { inner.finish(); }
    void fail(const std::string& message) noexcept override { inner.fail(message); }
    SenderEndpoint& inner;
    size_t bad_bucket;
    uint64_t bad_offset;
    size_t buckets = 0;
  };
  Transport& inner_;
  Sender sender_;
};

TEST(RefitCudaIpcTransport, AFillThatThrowsMidBucketFailsTheStreamAndDeliversNothingOfThatBucket) {
  // Twelve 1000 B weights, four per 4096 B bucket (3 buckets); staging of 2 x 300 B, so bucket 1 has had four
  // pieces copied (the last still in flight) when the fill of its fifth, at byte 1200, throws.
  const auto shards = make_shards(equal_specs(1, 12, 1000));
  const auto plan = plan_buckets(0, shards.weights(0), 4096);
  ASSERT_EQ(plan.size(), 3u);
  const RawStream got = raw_stream(shards, 4096, CudaIpcStaging{.pieces = 2, .piece_bytes = 300},
                                   [](Transport& t) { return std::make_unique<ThrowingFill>(t, 1, 1400); });
  EXPECT_EQ(got.error, "io: refit: rank 0: transport failed mid-stream: trainer: weights gone at bucket byte 1200");
  // Nothing of bucket 1 arrives. Bucket 0 arrives whole unless the failure overtook it (a failed channel raises
  // at the receiver's next receive, queued buckets or not).
  ASSERT_LE(got.entries.size(), 1u);
  if (!got.entries.empty()) {
    EXPECT_EQ(got.entries[0], plan[0]);
    EXPECT_EQ(got.payloads[0], expected_payload(plan[0], shards, 0));
  }
}

TEST(RefitCudaIpcTransport, StagingWithoutPiecesIsRefused) {
  ShmTransport control(1, kCudaIpcControlBytes);
  const HostDeviceIpc ipc;
  EXPECT_EQ(error_kind_and_text([&] { CudaIpcTransport(control, 1024, ipc, gpus_of(1), CudaIpcStaging{.pieces = 0}); }),
            "mismatch: refit: cuda-ipc transport: staging of 0 pieces of 33554432 B (both must be > 0)");
  EXPECT_EQ(error_kind_and_text(
                [&] { CudaIpcTransport(control, 1024, ipc, gpus_of(1), CudaIpcStaging{.pieces = 2, .piece_bytes = 0}); }),
            "mismatch: refit: cuda-ipc transport: staging of 2 pieces of 0 B (both must be > 0)");
}

TEST(RefitCudaIpcTransport, HostAsyncWritesNumberTheirTicketsAndRefuseAWaitForOneNotStarted) {
  const HostDeviceIpc ipc;
  auto ring = ipc.allocate(0, 4096);
  auto staging = ipc.allocate_pinned(256);
  EXPECT_EQ(staging->bytes().size(), 256u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(staging->bytes().data()) % 4096, 0u);
  EXPECT_EQ(ring->write_async(0, staging->bytes().first(100)), 1u);
  EXPECT_EQ(ring->write_async(100, staging->bytes().first(0)), 2u);
  ring->wait_written(0);
  ring->wait_written(2);
  ring->wait_written(1);  // done already
  EXPECT_EQ(error_kind_and_text([&] { ring->wait_written(3); }),
            "mismatch: host ipc: wait for copy 3, but only 2 were started");
  EXPECT_EQ(error_kind_and_text([&] { ring->write_async(4000, staging->bytes().first(100)); }),
            "mismatch: host ipc: write of [4000, 4100) outside the 4096 B ring");
}

TEST(RefitCudaIpcTransport, BaseGpuIdMapsThePhysicalIdsOfTheHandshakeToLocalIds) {
  // The sender announces physical GPUs 4 and 5; with base_gpu_id 4 the engine imports on its local GPUs 0 and 1.
  const auto shards = make_shards(equal_specs(2, 6, 100));
  const RunRecord rec = cross_process_refit(shards, 1024, gpus_of(2, 4));
  EXPECT_EQ(rec.bytes, 1200u);
}

TEST(RefitCudaIpcTransport, LocalGpuIdRefusesAPhysicalIdBelowTheBaseOrOnAnotherRanksGpu) {
  EXPECT_EQ(local_gpu_id(0, 4, 4, 0), 0);
  EXPECT_EQ(local_gpu_id(3, 7, 4, 3), 3);
  EXPECT_EQ(error_kind_and_text([] { local_gpu_id(1, 2, 4, 1); }),
            "mismatch: refit: rank 1: the sender's bucket ring is on physical GPU 2, below the engine's base_gpu_id 4");
  EXPECT_EQ(error_kind_and_text([] { local_gpu_id(1, 6, 4, 1); }),
            "mismatch: refit: rank 1: the sender's bucket ring is on physical GPU 6 (local GPU 2 with base_gpu_id 4), "
            "but engine TP rank 1 lives on local GPU 1");
}

/// The sender process (bucket `sender_bucket`, `sender_gpus`) streams three small weights; this process's receiver
/// (`receiver_bucket`, `receiver_gpus`) gets its handshake. Returns the receiver's error; checks that nothing was
/// imported and that the sender, released, exits cleanly.
std::string handshake_error(uint64_t sender_bucket, const CudaIpcGpus& sender_gpus, uint64_t receiver_bucket,
                            const CudaIpcGpus& receiver_gpus) {
  const HostDeviceIpc ipc;
  ShmTransport control(1, kCudaIpcControlBytes);
  const auto shards = make_shards(equal_specs(1, 3, 100));
  ReleasePipe release;
  ChildProcess child([&] {
    control.set_receiver_alive(parent_alive());
    CudaIpcTransport transport(control, sender_bucket, ipc, sender_gpus);
    try {
      stream_shard(0, shards.weights(0), sender_bucket, transport);
    } catch (const Error&) {
      // the receiver gave up: expected
    }
    release.wait();
  });
  control.set_sender_alive(child.liveness());
  CudaIpcTransport transport(control, receiver_bucket, ipc, receiver_gpus);
  std::vector<uint8_t> into(receiver_bucket);
  std::string error;
  hang_guard([&] { error = error_kind_and_text([&] { transport.receiver(0).receive(into); }); });
  EXPECT_TRUE(ipc.opened_devices().empty());
  transport.receiver(0).cancel("refused at the handshake");
  release.release();
  EXPECT_EQ(child.wait(), exited_with(kChildReturned));
  return error;
}

TEST(RefitCudaIpcTransport, ARingOnAnotherGpuIsRefusedAtTheHandshake) {
  EXPECT_EQ(handshake_error(1024, CudaIpcGpus{.rank_devices = {1}, .base_gpu_id = 0}, 1024, gpus_of(1)),
            "mismatch: refit: rank 0: the sender's bucket ring is on physical GPU 1 (local GPU 1 with base_gpu_id "
            "0), but engine TP rank 0 lives on local GPU 0");
}

TEST(RefitCudaIpcTransport, ARingWhoseGpuUuidIsNotTheRanksIsRefusedEvenWhenTheIdsAgree) {
  // The sender counts from base 1 and allocates on its device 0 (physical 1); the engine counts from base 0, so
  // physical 1 is its local GPU 1 -- the rank's -- but the ring is on the other GPU: the UUIDs tell.
  EXPECT_EQ(handshake_error(1024, CudaIpcGpus{.rank_devices = {0}, .base_gpu_id = 1}, 1024,
                            CudaIpcGpus{.rank_devices = {1}, .base_gpu_id = 0}),
            "mismatch: refit: rank 0: cuda-ipc: the sender's bucket ring (physical GPU 1) is not on engine TP rank "
            "0's local GPU 1: their GPU UUIDs differ (check base_gpu_id and the GPUs both processes see)");
}

TEST(RefitCudaIpcTransport, ARingOfAnotherBucketSizeIsRefusedAtTheHandshake) {
  EXPECT_EQ(handshake_error(2048, gpus_of(1), 4096, gpus_of(1)),
            "mismatch: refit: rank 0: cuda-ipc: the sender's ring has 4 slots of 2048 B, the receiver expects 4 "
            "slots of bucket_size_bytes 4096 B (both sides must use the same size)");
}

TEST(RefitCudaIpcTransport, AnImportInTheExportingProcessIsRefused) {
  // Sender and receiver in one process: the handshake names this process as the exporter.
  const HostDeviceIpc ipc;
  ShmTransport control(1, kCudaIpcControlBytes);
  CudaIpcTransport transport(control, 1024, ipc, gpus_of(1));
  const auto shards = make_shards(equal_specs(1, 3, 100));
  std::thread sender([&] {
    try {
      stream_shard(0, shards.weights(0), 1024, transport);
    } catch (const Error&) {
    }
  });
  std::vector<uint8_t> into(1024);
  const std::string error = error_kind_and_text([&] { transport.receiver(0).receive(into); });
  transport.receiver(0).cancel("refused");
  sender.join();
  EXPECT_EQ(error, fmt::format("state: refit: rank 0: cuda-ipc: the bucket ring was exported by this very process "
                               "(pid {}); a CUDA IPC handle is imported only by a process other than its exporter",
                               getpid()));
  EXPECT_TRUE(ipc.opened_devices().empty());
}

TEST(RefitCudaIpcTransport, AMalformedHandshakeOrSlotMessageIsAFormatErrorNamingTheRank) {
  const HostDeviceIpc ipc;
  ShmTransport control(2, kCudaIpcControlBytes);
  CudaIpcTransport transport(control, 1024, ipc, gpus_of(2));
  control.sender(0).send(Bucket{.entries = {}, .payload = {1, 2, 3, 4, 5}});
  std::vector<uint8_t> into(1024);
  EXPECT_EQ(error_kind_and_text([&] { transport.receiver(0).receive(into); }),
            "format: refit: rank 0: cuda-ipc: control message of 5 B is not a handshake");
  // Rank 1: a handshake of the right size but another magic.
  control.sender(1).send(Bucket{.entries = {}, .payload = std::vector<uint8_t>(112, 0)});
  EXPECT_EQ(error_kind_and_text([&] { transport.receiver(1).receive(into); }),
            "format: refit: rank 1: cuda-ipc: control message of 112 B is not a handshake");
}

TEST(RefitCudaIpcTransport, ASenderThatExitsAfterTheHandshakeFailsTheStreamNotHangsIt) {
  const HostDeviceIpc ipc;
  ShmTransport control(1, kCudaIpcControlBytes);
  const auto shards = make_shards(equal_specs(1, 10, 1000));
  ReleasePipe imported;
  ChildProcess child([&] {
    CudaIpcTransport transport(control, 1024, ipc, gpus_of(1));
    Bucket b;
    b.entries = {{shards.specs[0][0], 0, 1000}};
    b.payload = shards.data[0][0];
    transport.sender(0).send(std::move(b));
    imported.wait();  // the parent has imported the ring and read the bucket
    _exit(0);         // no finish(): the trainer died
  });
  control.set_sender_alive(child.liveness());
  CudaIpcTransport transport(control, 1024, ipc, gpus_of(1));
  std::vector<uint8_t> into(1024);
  hang_guard([&] {
    const ReceivedBatch first = transport.receiver(0).receive(into);
    EXPECT_FALSE(first.end);
    EXPECT_EQ(first.payload_bytes, 1000u);
    EXPECT_TRUE(std::equal(shards.data[0][0].begin(), shards.data[0][0].end(), into.begin()));
    imported.release();
    EXPECT_EQ(error_kind_and_text([&] { transport.receiver(0).receive(into); }),
              "io: refit: rank 0: transport failed mid-stream: sender process exited before finishing the stream");
  });
  EXPECT_EQ(child.wait(), exited_with(0));
}

}  // namespace
}  // namespace wsb::refit::test
