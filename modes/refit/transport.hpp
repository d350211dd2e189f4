#pragma once
// Transport of the refit mode: one channel per rank from sender rank r (trainer) to receiver rank r (engine TP
// rank r), carrying packed buckets in order. The interface is the seam for other transports: in-process threads
// (inproc_transport.hpp), shared memory between processes on one host (shm_transport.hpp: a ring of
// bucket_size_bytes slots per rank in a memfd mapping shared across fork(), entries in a slot header, futex
// signalling; receive() copies out of the slot into the pooled buffer -- lending the slot itself is open), and CUDA IPC
// (sender exports device buckets with cudaIpcGetMemHandle, a different process imports them; receive() would then
// fill device buffers). Sender and receiver endpoints are separate objects so each can live in its own process.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "modes/refit/bucket.hpp"

namespace wsb::refit {

/// Writes bytes [offset, offset + dst.size()) of the bucket being sent into `dst` (the sender's packing, run by a
/// transport's filled path). May throw: the bucket is then abandoned.
using BucketFill = std::function<void(uint64_t offset, std::span<uint8_t> dst)>;

/// Sending end of one rank's channel. Calls come from one thread (the sender rank).
class SenderEndpoint {
 public:
  virtual ~SenderEndpoint() = default;
  /// Queues one bucket (blocks while the channel is full: back-pressure, no unbounded buffering).
  /// Throws Error(State) after finish() or fail(), Error(Mismatch) when the payload exceeds bucket_size_bytes.
  virtual void send(Bucket bucket) = 0;
  /// Sends one bucket of `entries` and `payload_bytes` whose payload the transport has `fill` write straight into
  /// its own memory, in pieces of increasing offset covering [0, payload_bytes) once, so the sender needs no
  /// payload buffer (the cuda-ipc transport: a pinned staging ring, each piece copied to the device while the next
  /// is filled). Returns false, having done nothing, when the transport has no such path -- the same answer on every
  /// call of an endpoint; the sender then packs a Bucket and calls send(). When `fill` throws, nothing of the bucket
  /// is delivered and the exception propagates. Errors otherwise as send().
  virtual bool send_filled(std::vector<WireEntry> /*entries*/, uint64_t /*payload_bytes*/, const BucketFill& /*fill*/) {
    return false;
  }
  /// Ends the stream normally; the receiver sees ReceivedBatch{end = true} after the queued buckets.
  virtual void finish() = 0;
  /// Ends the stream with a failure; the receiver's next receive() throws Error(Io) quoting `message`.
  virtual void fail(const std::string& message) noexcept = 0;
  /// The payload buffer of an earlier bucket that the transport is done with (empty when it has none), for the
  /// sender to pack its next bucket into: a bucket-sized allocation (and its page faults) once per stream instead
  /// of once per bucket. Its bytes are stale: the sender overwrites every byte it sends.
  virtual std::vector<uint8_t> spare_payload() { return {}; }
};

/// Receiving end of one rank's channel. Calls come from one thread at a time.
class ReceiverEndpoint {
 public:
  virtual ~ReceiverEndpoint() = default;
  /// Blocks for the next bucket and copies its payload into `into` (>= bucket_size_bytes). Returns end = true once
  /// the sender finished and every bucket was received. Throws Error(Io) naming the rank when the sender failed,
  /// Error(Mismatch) when `into` is smaller than the payload.
  virtual ReceivedBatch receive(std::span<uint8_t> into) = 0;
  /// The receiver gives up on the stream (its rank failed): a send() blocked for room, and every later send(),
  /// throws Error(Io, "refit: rank R: receiver gave up: <reason>"), so a sender never waits on a receiver that
  /// stopped pulling; so does a receive() waiting for a bucket of a stream still open (one on another thread of this
  /// side, e.g. a receive ahead), so no receiver waits on a sender either. Queued buckets are dropped. Never throws;
  /// the first reason wins.
  virtual void cancel(const std::string& reason) noexcept = 0;
};

/// A set of per-rank channels sharing one bucket size.
class Transport {
 public:
  virtual ~Transport() = default;
  /// Number of rank channels (= sender ranks = engine TP ranks).
  virtual int ranks() const = 0;
  /// Capacity of every bucket in bytes, fixed by the sender side at setup.
  virtual uint64_t bucket_size_bytes() const = 0;
  /// Endpoints of rank `rank` in [0, ranks()); they live as long as the transport.
  virtual SenderEndpoint& sender(int rank) = 0;
  virtual ReceiverEndpoint& receiver(int rank) = 0;
};

/// Setup handshake: throws Error(Mismatch, "refit: bucket_size_bytes mismatch: sender S B, receiver R B (both sides
/// must use the same size)") unless the two sizes are equal; also refuses 0.
void check_bucket_sizes(uint64_t sender_bytes, uint64_t receiver_bytes);

}  // namespace wsb::refit
