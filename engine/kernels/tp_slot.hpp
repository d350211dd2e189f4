#pragma once
// Tensor-parallel emulation of one sequence slot on one or more CUDA devices (CUDA builds only): the device twin
// of the CPU forward's rank loop (models/forward/llama_forward.cpp, MoeForwardBase::rank_partials). Every rank
// computes its partial sums from its own storages on its own device; partials are reduced in rank order,
// ((p0 + p1) + p2) + ..., on rank 0's device, so the result does not depend on where the ranks run.
//
// Streams: one per distinct device ("lane"); lane 0 is rank 0's device and its stream is the slot's main stream.
// Ranks sharing a device run one after another on that device's stream. A remote lane forks from the main stream
// through an event (its stream waits for it), receives the hidden state by cudaMemcpyPeerAsync, computes its
// ranks' partials, copies them to lane 0 by cudaMemcpyPeerAsync and records its own event, which the main stream
// waits for before the reduction (the join). The same calls issued during stream capture on the main stream make a
// multi-device CUDA graph; with one device there are no events and no copies at all.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/kernels/device_arena.hpp"

namespace wsb::dk {

/// Which device each TP rank runs on, and the distinct devices ("lanes") in order of first appearance, so lane 0 is
/// rank 0's device.
struct TpTopology {
  std::vector<int> rank_device;  ///< per rank
  std::vector<int> lane_device;  ///< per lane
  std::vector<int> rank_lane;    ///< lane of each rank

  explicit TpTopology(const std::vector<int>& rank_devices);
  int ranks() const { return static_cast<int>(rank_device.size()); }
  int lanes() const { return static_cast<int>(lane_device.size()); }
};

/// One rank's share of a TP operation: enqueue on `stream` (the rank's device is current) work that reads the
/// hidden state `x` (hidden floats on the rank's device; its content is defined only when the operation was asked
/// to copy it) and writes `out` (hidden floats for rank_partials, `gather_rows` floats for gather), both on the
/// rank's device.
using RankWork = std::function<void(int rank, cudaStream_t stream, const float* x, float* out)>;

/// Per-slot streams, events, hidden state, partial-sum buffers, device scalars (token, position), gathered logits
/// and their pinned host endpoints, and the slot's CUDA graph. All memory is allocated by the constructor.
class TpSlot {
 public:
  /// `hidden`: floats of the hidden state and of each partial; `gather_rows`: floats each rank contributes to the
  /// gathered output (vocab / tp). Throws Error(Resource) when device or pinned memory is short, Error(Io) on CUDA
  /// failures; `what` names the slot in messages.
  TpSlot(const TpTopology& topology, int64_t hidden, int64_t gather_rows, const std::string& what);
  ~TpSlot();
  TpSlot(const TpSlot&) = delete;
  TpSlot& operator=(const TpSlot&) = delete;

  const TpTopology& topology() const { return topo_; }
  cudaStream_t main_stream() const { return lanes_[0].stream; }
  /// Device scalars on the rank's device: token id and position of the current step.
  const int32_t* token(int rank) const { return lane_of(rank).scalars; }
  const int32_t* position(int rank) const { return lane_of(rank).scalars + 1; }
  /// Reduced hidden state on lane 0 (the residual stream).
  float* x() const { return lanes_[0].x; }
  /// Gathered output on lane 0: ranks * gather_rows floats, rank r's rows at r * gather_rows.
  const float* gathered() const { return gathered_; }

  /// Host side, before the step's kernels: writes token and position into the pinned staging buffer and enqueues
  /// their H2D copy into lane 0's scalars on the main stream (outside any CUDA graph).
  void upload_scalars(int32_t token, int32_t position);
  /// First operation of a step: copies lane 0's scalars to every other lane (nothing with one device).
  void broadcast_scalars();
  /// For every rank in rank order: fn(rank, ...) writes the rank's partial (hidden floats); then on lane 0
  /// x = sum (accumulate false) or x += sum (accumulate true) with sum = ((p0 + p1) + p2) + ...
  /// `copy_x`: remote lanes receive the current x first (false when the work does not read it).
  void rank_partials(bool copy_x, bool accumulate, const RankWork& fn);
  /// For every rank: fn(rank, ...) writes gather_rows floats, which land at gathered() + rank * gather_rows
  /// (directly for ranks on lane 0, by peer copy otherwise). x is copied to remote lanes first.
  void gather(const RankWork& fn);
  /// Host side, after the step's kernels: D2H of gathered() into pinned memory on the main stream, waits for the
  /// main stream (the whole step), copies into `out` (resized). Throws Error(Io) naming the slot when the step
  /// failed on the device.
  void download(std::vector<float>& out);

  /// Runs `enqueue` (the step's device work, which must end joined on the main stream) under stream capture of
  /// the main stream and instantiates the graph; later steps call launch_graph(). Capture is thread-local, so
  /// other sequences may step concurrently from other threads. On failure the capture is ended and discarded.
  void capture(const std::function<void()>& enqueue);
  bool has_graph() const { return graph_ != nullptr; }
  void launch_graph();

  /// Waits for every lane's stream, ignoring errors (teardown).
  void synchronize_quietly() noexcept;

 private:
  struct Lane {
    int device = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t event = nullptr;  ///< lane 0: the fork event; other lanes: their join event
    DeviceArena arena;
    float* x = nullptr;
    int32_t* scalars = nullptr;  ///< [token, position]
  };
  const Lane& lane_of(int rank) const { return lanes_[static_cast<size_t>(topo_.rank_lane[static_cast<size_t>(rank)])]; }
  /// Main stream -> every remote lane: the fork event recorded on the main stream, each remote stream waits for
  /// it, then (copy_x) receives lane 0's x by peer copy.
  void fork(bool copy_x);
  /// Every remote lane -> main stream: each records its event, the main stream waits for all of them.
  void join();
  /// Destroys the graph, events and streams (the destructor, and a constructor that failed half-way).
  void release() noexcept;
  /// Streams, events and memory of every lane (the constructor's work).
  void allocate();

  TpTopology topo_;
  int64_t hidden_ = 0, gather_rows_ = 0;
  std::string what_;
  std::vector<Lane> lanes_;
  std::vector<float*> partial_;     ///< per rank, on the rank's device
  std::vector<float*> partial_on0_; ///< per rank, on lane 0 (== partial_ for ranks on lane 0)
  std::vector<float*> slice_;       ///< per rank, on the rank's device (into gathered_ for ranks on lane 0)
  float* gathered_ = nullptr;
  PinnedBuffer staging_;            ///< int32 [token, position]
  PinnedBuffer host_out_;           ///< ranks * gather_rows floats
  cudaGraphExec_t graph_ = nullptr;
};

}  // namespace wsb::dk
