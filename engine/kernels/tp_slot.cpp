#ifdef WSBENCH_HAVE_CUDA
#include "engine/kernels/tp_slot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/device_kernels.hpp"
#include "core/errors.hpp"

namespace wsb::dk {

TpTopology::TpTopology(const std::vector<int>& rank_devices) : rank_device(rank_devices) {
  for (int device : rank_device) {
    auto it = std::find(lane_device.begin(), lane_device.end(), device);
    if (it == lane_device.end()) {
      lane_device.push_back(device);
      it = lane_device.end() - 1;
    }
    rank_lane.push_back(static_cast<int>(it - lane_device.begin()));
  }
}

TpSlot::TpSlot(const TpTopology& topology, int64_t hidden, int64_t gather_rows, const std::string& what)
    : topo_(topology), hidden_(hidden), gather_rows_(gather_rows), what_(what) {
  const int ranks = topo_.ranks();
  if (ranks < 1 || ranks > kMaxReduceParts)
    throw Error(ErrorKind::Mismatch, fmt::format("{}: {} TP ranks, the device forward supports 1..{}", what_, ranks,
                                                 kMaxReduceParts));
  partial_.assign(static_cast<size_t>(ranks), nullptr);
  partial_on0_.assign(static_cast<size_t>(ranks), nullptr);
  slice_.assign(static_cast<size_t>(ranks), nullptr);
  lanes_.resize(static_cast<size_t>(topo_.lanes()));
  try {
    allocate();
  } catch (...) {
    release();
    throw;
  }
}

void TpSlot::allocate() {
  const int ranks = topo_.ranks();
  for (int l = 0; l < topo_.lanes(); ++l) {
    Lane& lane = lanes_[static_cast<size_t>(l)];
    lane.device = topo_.lane_device[static_cast<size_t>(l)];
    DeviceScope scope(lane.device);
    // Non-blocking: the legacy default stream (used by other code in the process) never orders against a step.
    check(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking),
          fmt::format("{}: creating a stream on device {}", what_, lane.device));
    check(cudaEventCreateWithFlags(&lane.event, cudaEventDisableTiming),
          fmt::format("{}: creating an event on device {}", what_, lane.device));
    ArenaPlan plan;
    const uint64_t x_at = plan.add_floats(hidden_);
    const uint64_t scalars_at = plan.add(2 * sizeof(int32_t));
    std::vector<uint64_t> partial_at(static_cast<size_t>(ranks)), copy_at(static_cast<size_t>(ranks)),
        slice_at(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      const bool here = topo_.rank_lane[static_cast<size_t>(r)] == l;
      if (here) partial_at[static_cast<size_t>(r)] = plan.add_floats(hidden_);
      if (here && l != 0) slice_at[static_cast<size_t>(r)] = plan.add_floats(gather_rows_);
      if (!here && l == 0) copy_at[static_cast<size_t>(r)] = plan.add_floats(hidden_);
    }
    const uint64_t gathered_at = l == 0 ? plan.add_floats(gather_rows_ * ranks) : 0;
    lane.arena = DeviceArena(lane.device, plan.bytes(), fmt::format("{}: TP buffers of lane {}", what_, l));
    lane.x = lane.arena.floats(x_at);
    lane.scalars = reinterpret_cast<int32_t*>(lane.arena.data() + scalars_at);
    if (l == 0) gathered_ = lane.arena.floats(gathered_at);
    for (int r = 0; r < ranks; ++r) {
      const size_t i = static_cast<size_t>(r);
      const bool here = topo_.rank_lane[i] == l;
      if (here) partial_[i] = lane.arena.floats(partial_at[i]);
      if (here) slice_[i] = l == 0 ? gathered_ + int64_t{r} * gather_rows_ : lane.arena.floats(slice_at[i]);
      if (here && l == 0) partial_on0_[i] = partial_[i];
      if (!here && l == 0) partial_on0_[i] = lane.arena.floats(copy_at[i]);
    }
  }
  staging_ = PinnedBuffer(2 * sizeof(int32_t), what_ + ": token/position staging");
  host_out_ = PinnedBuffer(static_cast<uint64_t>(gather_rows_ * ranks) * sizeof(float), what_ + ": logits");
}

TpSlot::~TpSlot() { release(); }

void TpSlot::release() noexcept {
  synchronize_quietly();
  int previous = 0;
  const bool known = cudaGetDevice(&previous) == cudaSuccess;
  if (graph_ != nullptr) (void)cudaGraphExecDestroy(graph_);
  graph_ = nullptr;
  for (Lane& lane : lanes_) {
    if (cudaSetDevice(lane.device) != cudaSuccess) continue;
    if (lane.event != nullptr) (void)cudaEventDestroy(lane.event);
    if (lane.stream != nullptr) (void)cudaStreamDestroy(lane.stream);
    lane.event = nullptr;
    lane.stream = nullptr;
  }
  if (known) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
  // The arenas free themselves (each on its own device) when the lanes are destroyed.
}

void TpSlot::synchronize_quietly() noexcept {
  int previous = 0;
  const bool known = cudaGetDevice(&previous) == cudaSuccess;
  for (Lane& lane : lanes_) {
    if (lane.stream == nullptr || cudaSetDevice(lane.device) != cudaSuccess) continue;
    (void)cudaStreamSynchronize(lane.stream);
  }
  if (known) (void)cudaSetDevice(previous);
  (void)cudaGetLastError();
}

void TpSlot::upload_scalars(int32_t token, int32_t position) {
  int32_t* staged = static_cast<int32_t*>(staging_.data());
  staged[0] = token;
  staged[1] = position;
  set_device(lanes_[0].device);
  check(cudaMemcpyAsync(lanes_[0].scalars, staged, 2 * sizeof(int32_t), cudaMemcpyHostToDevice, main_stream()),
        what_ + ": uploading token and position");
}

void TpSlot::fork(bool copy_x) {
  if (lanes_.size() < 2) return;
  const Lane& main = lanes_[0];
  set_device(main.device);
  check(cudaEventRecord(main.event, main.stream), what_ + ": recording the fork event");
  for (size_t l = 1; l < lanes_.size(); ++l) {
    const Lane& lane = lanes_[l];
    set_device(lane.device);
    check(cudaStreamWaitEvent(lane.stream, main.event, 0),
          fmt::format("{}: device {} waiting for device {}", what_, lane.device, main.device));
    if (copy_x)
      check(cudaMemcpyPeerAsync(lane.x, lane.device, main.x, main.device, static_cast<size_t>(hidden_) * sizeof(float),
                                lane.stream),
            fmt::format("{}: copying the hidden state from device {} to device {}", what_, main.device, lane.device));
  }
}

void TpSlot::join() {
  if (lanes_.size() < 2) return;
  const Lane& main = lanes_[0];
  for (size_t l = 1; l < lanes_.size(); ++l) {
    const Lane& lane = lanes_[l];
    set_device(lane.device);
    check(cudaEventRecord(lane.event, lane.stream), fmt::format("{}: recording the join event of device {}", what_,
                                                                lane.device));
    set_device(main.device);
    check(cudaStreamWaitEvent(main.stream, lane.event, 0),
          fmt::format("{}: device {} waiting for device {}", what_, main.device, lane.device));
  }
  set_device(main.device);
}

void TpSlot::broadcast_scalars() {
  if (lanes_.size() < 2) return;
  fork(false);
  const Lane& main = lanes_[0];
  for (size_t l = 1; l < lanes_.size(); ++l) {
    const Lane& lane = lanes_[l];
    set_device(lane.device);
    check(cudaMemcpyPeerAsync(lane.scalars, lane.device, main.scalars, main.device, 2 * sizeof(int32_t), lane.stream),
          fmt::format("{}: copying token and position to device {}", what_, lane.device));
  }
  // No join here: every later operation forks from the main stream after this point, and the step's final gather
  // joins every lane back before the capture (or the step) ends.
  set_device(main.device);
}

void TpSlot::rank_partials(bool copy_x, bool accumulate, const RankWork& fn) {
  fork(copy_x);
  const Lane& main = lanes_[0];
  for (int r = 0; r < topo_.ranks(); ++r) {
    const size_t i = static_cast<size_t>(r);
    const Lane& lane = lane_of(r);
    set_device(lane.device);
    fn(r, lane.stream, lane.x, partial_[i]);
    if (&lane != &main)
      check(cudaMemcpyPeerAsync(partial_on0_[i], main.device, partial_[i], lane.device,
                                static_cast<size_t>(hidden_) * sizeof(float), lane.stream),
            fmt::format("{}: copying the partial sum of rank {} to device {}", what_, r, main.device));
  }
  join();
  reduce_ranks(main.x, partial_on0_.data(), topo_.ranks(), hidden_, accumulate, main.stream);
}

void TpSlot::gather(const RankWork& fn) {
  fork(true);
  const Lane& main = lanes_[0];
  for (int r = 0; r < topo_.ranks(); ++r) {
    const size_t i = static_cast<size_t>(r);
    const Lane& lane = lane_of(r);
    set_device(lane.device);
    fn(r, lane.stream, lane.x, slice_[i]);
    if (&lane != &main)
      check(cudaMemcpyPeerAsync(gathered_ + int64_t{r} * gather_rows_, main.device, slice_[i], lane.device,
                                static_cast<size_t>(gather_rows_) * sizeof(float), lane.stream),
            fmt::format("{}: copying the output rows of rank {} to device {}", what_, r, main.device));
  }
  join();
}

void TpSlot::download(std::vector<float>& out) {
  const size_t count = static_cast<size_t>(gather_rows_ * topo_.ranks());
  set_device(lanes_[0].device);
  check(cudaMemcpyAsync(host_out_.data(), gathered_, count * sizeof(float), cudaMemcpyDeviceToHost, main_stream()),
        what_ + ": copying the logits to the host");
  check(cudaStreamSynchronize(main_stream()), what_ + ": decode step on the device");
  out.resize(count);
  std::memcpy(out.data(), host_out_.data(), count * sizeof(float));
}

void TpSlot::capture(const std::function<void()>& enqueue) {
  set_device(lanes_[0].device);
  check(cudaStreamBeginCapture(main_stream(), cudaStreamCaptureModeThreadLocal),
        what_ + ": beginning the capture of the decode step");
  cudaGraph_t graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    set_device(lanes_[0].device);
    if (cudaStreamEndCapture(main_stream(), &graph) == cudaSuccess && graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  set_device(lanes_[0].device);
  check(cudaStreamEndCapture(main_stream(), &graph), what_ + ": ending the capture of the decode step");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  check(status, what_ + ": instantiating the decode-step graph");
  graph_ = exec;
}

void TpSlot::launch_graph() {
  set_device(lanes_[0].device);
  check(cudaGraphLaunch(graph_, main_stream()), what_ + ": launching the decode-step graph");
}

}  // namespace wsb::dk
#endif  // WSBENCH_HAVE_CUDA
