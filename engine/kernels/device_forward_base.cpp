#ifdef WSBENCH_HAVE_CUDA
#include "engine/kernels/device_forward_base.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "engine/kernels/cuda_util.hpp"
#include "engine/kernels/view_checks.hpp"
#include "core/errors.hpp"

namespace wsb::dk {

namespace {

/// Per-sequence state: the slot it holds and its position. Returns the slot when destroyed.
class DeviceSequence final : public SequenceState {
 public:
  DeviceSequence(std::shared_ptr<SlotPool> pool, int slot, const void* owner)
      : pool_(std::move(pool)), slot_(slot), owner_(owner) {}
  ~DeviceSequence() override {
    std::lock_guard<std::mutex> lock(pool_->mutex);
    pool_->used[static_cast<size_t>(slot_)] = 0;
  }
  int64_t position() const override { return pos_; }

  int slot() const { return slot_; }
  const void* owner() const { return owner_; }
  void advance() { ++pos_; }

 private:
  std::shared_ptr<SlotPool> pool_;
  int slot_;
  const void* owner_;
  int64_t pos_ = 0;
};

WeightType weight_type(const ModelProfile& p) {
  switch (p.dtype) {
    case DType::BF16:
      return WeightType::BF16;
    case DType::F16:
      return WeightType::F16;
    case DType::F32:
      return WeightType::F32;
    default:
      throw Error(ErrorKind::Format, fmt::format("profile '{}': device forward: weight dtype {} is not supported "
                                                 "(BF16, F16, F32)",
                                                 p.id, dtype_name(p.dtype)));
  }
}

/// The layouts the caller's must equal.
std::vector<RankLayout> expected_layouts(const ModelProfile& p, const std::vector<RankLayout>& layouts) {
  if (layouts.empty())
    throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': device forward: no rank layouts", p.id));
  return build_rank_layouts(p, static_cast<int>(layouts.size()));
}

std::vector<StorageAddresses> view_addresses(const std::vector<DeviceRankView>& views) {
  std::vector<StorageAddresses> out;
  for (const DeviceRankView& v : views) out.push_back(v.storages);
  return out;
}

std::vector<int> rank_devices(const std::vector<DeviceRankView>& views) {
  std::vector<int> out;
  for (const DeviceRankView& v : views) out.push_back(v.device);
  return out;
}

/// Every storage address must be memory the rank's device can read in a kernel.
void check_addresses(const std::string& id, const std::vector<RankLayout>& layouts,
                     const std::vector<DeviceRankView>& views) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    throw Error(ErrorKind::Resource,
                fmt::format("profile '{}': device forward: no CUDA device ({})", id,
                            status == cudaSuccess ? "0 devices" : cudaGetErrorString(status)));
  }
  for (size_t r = 0; r < views.size(); ++r) {
    const DeviceRankView& view = views[r];
    if (view.device < 0 || view.device >= count)
      throw Error(ErrorKind::Mismatch, fmt::format("profile '{}': device forward: rank {} is on device {}, but {} "
                                                   "CUDA device(s) are visible",
                                                   id, r, view.device, count));
    for (size_t i = 0; i < view.storages.size(); ++i) {
      const std::string& name = layouts[r].storages[i].name;
      cudaPointerAttributes attr{};
      const cudaError_t got = cudaPointerGetAttributes(&attr, view.storages[i]);
      if (got != cudaSuccess) (void)cudaGetLastError();
      const bool on_device = got == cudaSuccess && attr.type == cudaMemoryTypeDevice && attr.device == view.device;
      const bool managed = got == cudaSuccess && attr.type == cudaMemoryTypeManaged;
      if (!on_device && !managed)
        throw Error(ErrorKind::Mismatch,
                    fmt::format("profile '{}': device forward: rank {} storage '{}': address {} is not device memory "
                                "of device {} (memory type {}, device {})",
                                id, r, name, static_cast<const void*>(view.storages[i]), view.device,
                                got == cudaSuccess ? static_cast<int>(attr.type) : -1,
                                got == cudaSuccess ? attr.device : -1));
    }
  }
}

/// Lets rank 0's device and every other rank device reach each other's memory directly where the hardware
/// allows; cudaMemcpyPeerAsync stages through the host otherwise, so failures are ignored.
void enable_peer_access(const TpTopology& topo) {
  const int main = topo.lane_device[0];
  for (size_t l = 1; l < topo.lane_device.size(); ++l) {
    const int other = topo.lane_device[l];
    for (auto [from, to] : {std::pair{main, other}, std::pair{other, main}}) {
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || can == 0) continue;
      DeviceScope scope(from);
      (void)cudaDeviceEnablePeerAccess(to, 0);  // cudaErrorPeerAccessAlreadyEnabled is fine
    }
  }
  (void)cudaGetLastError();
}

}  // namespace

DecodeAttention gqa_decode_attention(const GqaShape& shape, const LlamaRankHeads& heads, const float* q,
                                     const float* k_cache, const float* v_cache, const int32_t* position,
                                     float* scores, int64_t scores_stride, float* out) {
  const int64_t kv_rows = int64_t{heads.kv_heads} * shape.head_dim;
  DecodeAttention a;
  a.q = q;
  a.k_cache = k_cache;
  a.v_cache = v_cache;
  a.k_stride = kv_rows;
  a.v_stride = kv_rows;
  a.q_heads = heads.q_heads;
  a.qk_dim = shape.head_dim;
  a.v_dim = shape.head_dim;
  a.q_head_start = heads.q_head_start;
  a.group = shape.heads / shape.kv_heads;
  a.kv_head_start = heads.kv_head_start;
  a.window = shape.window;
  a.scale = shape.scale;
  a.position = position;
  a.scores = scores;
  a.scores_stride = scores_stride;
  a.out = out;
  return a;
}

DeviceForwardBase::DeviceForwardBase(const ModelProfile& p, const std::vector<RankLayout>& layouts,
                                     const std::vector<DeviceRankView>& views, const DeviceForwardOptions& options)
    : dims_(p.dims),
      type_(weight_type(p)),  // first, so an unsupported dtype reports Format before any layout check
      // torch adds the Python float eps to a float32 tensor in float32 (dense_ops.hpp rms_norm).
      eps_(static_cast<float>(p.dims.rms_eps)),
      id_(p.id),
      vocab_(p.dims.vocab),
      hidden_(p.dims.hidden),
      options_(options),
      topo_((check_device_views(p.id, expected_layouts(p, layouts), layouts, views), rank_devices(views))),
      storages_(layouts, view_addresses(views)),
      pool_(std::make_shared<SlotPool>()) {
  if (options_.max_sequences < 1)
    throw Error(ErrorKind::Format, fmt::format("profile '{}': device forward: max_sequences must be >= 1, got {}", id_,
                                               options_.max_sequences));
  if (options_.max_positions < 1)
    throw Error(ErrorKind::Format, fmt::format("profile '{}': device forward: max_positions must be >= 1, got {}", id_,
                                               options_.max_positions));
  check_addresses(id_, layouts, views);
  enable_peer_access(topo_);
  pool_->used.assign(static_cast<size_t>(options_.max_sequences), 0);
  slots_.resize(static_cast<size_t>(options_.max_sequences));
}

void DeviceForwardBase::upload_inv_freq(const std::vector<float>& inv_freq, float cos_sin_scale) {
  rope_scale_ = cos_sin_scale;
  for (int l = 0; l < topo_.lanes(); ++l) {
    const int device = topo_.lane_device[static_cast<size_t>(l)];
    const uint64_t bytes = std::max<uint64_t>(inv_freq.size(), 1) * sizeof(float);
    inv_freq_arena_.emplace_back(device, bytes, fmt::format("profile '{}': device forward: rope frequencies", id_));
    DeviceScope scope(device);
    check(cudaMemcpy(inv_freq_arena_.back().data(), inv_freq.data(), inv_freq.size() * sizeof(float),
                     cudaMemcpyHostToDevice),
          fmt::format("profile '{}': device forward: uploading rope frequencies to device {}", id_, device));
  }
  for (int r = 0; r < topo_.ranks(); ++r)
    inv_freq_.push_back(inv_freq_arena_[static_cast<size_t>(topo_.rank_lane[static_cast<size_t>(r)])].floats(0));
}

DeviceForwardBase::KvCachePlan DeviceForwardBase::add_kv_caches(ArenaPlan& plan, int64_t k_width,
                                                                int64_t v_width) const {
  const int64_t positions = options_.max_positions;
  KvCachePlan caches;
  for (int l = 0; l < dims_.layers; ++l) {
    caches.k.push_back(plan.add_floats(positions * k_width));
    caches.v.push_back(plan.add_floats(positions * v_width));
  }
  return caches;
}

DeviceArena DeviceForwardBase::allocate_slot_arena(int slot, int rank, const ArenaPlan& plan,
                                                   const KvCachePlan& caches, std::vector<float*>& k,
                                                   std::vector<float*>& v) const {
  DeviceArena arena(topo_.rank_device[static_cast<size_t>(rank)], plan.bytes(),
                    fmt::format("profile '{}': device forward: slot {} rank {} KV caches ({} positions) and scratch",
                                id_, slot, rank, options_.max_positions));
  for (size_t l = 0; l < caches.k.size(); ++l) {
    k.push_back(arena.floats(caches.k[l]));
    v.push_back(arena.floats(caches.v[l]));
  }
  return arena;
}

DeviceForwardBase::~DeviceForwardBase() {
  // A step that failed half-way may have left work queued: wait before any buffer is freed.
  for (Slot& slot : slots_)
    if (slot.tp) slot.tp->synchronize_quietly();
}

std::unique_ptr<SequenceState> DeviceForwardBase::new_sequence() const {
  std::lock_guard<std::mutex> lock(pool_->mutex);
  for (size_t i = 0; i < pool_->used.size(); ++i) {
    if (pool_->used[i]) continue;
    Slot& slot = slots_[i];
    if (!slot.tp) {
      const std::string what = fmt::format("profile '{}': device forward: sequence slot {}", id_, i);
      auto tp = std::make_unique<TpSlot>(topo_, hidden_, vocab_ / topo_.ranks(), what);
      slot.buffers = make_slot_buffers(static_cast<int>(i));
      slot.tp = std::move(tp);
    }
    pool_->used[i] = 1;
    return std::make_unique<DeviceSequence>(pool_, static_cast<int>(i), this);
  }
  throw Error(ErrorKind::Resource,
              fmt::format("profile '{}': device forward: all {} sequence slots are in use (max_sequences); destroy "
                          "a sequence to free one",
                          id_, pool_->used.size()));
}

void DeviceForwardBase::step(SequenceState& state, int32_t token, std::vector<float>& logits) const {
  auto* seq = dynamic_cast<DeviceSequence*>(&state);
  if (seq == nullptr || seq->owner() != this)
    throw Error(ErrorKind::Mismatch,
                fmt::format("profile '{}': device forward: sequence state was created by another forward model", id_));
  check_token(id_, token, vocab_);
  if (seq->position() >= options_.max_positions)
    throw Error(ErrorKind::Resource,
                fmt::format("profile '{}': device forward: sequence slot {} holds {} tokens = max_positions; no KV "
                            "cache row left",
                            id_, seq->slot(), seq->position()));
  Slot& slot = slots_[static_cast<size_t>(seq->slot())];
  DeviceScope scope(topo_.lane_device[0]);
  slot.tp->upload_scalars(token, static_cast<int32_t>(seq->position()));
  if (options_.use_graphs) {
    if (!slot.tp->has_graph()) slot.tp->capture([&] { enqueue_step(*slot.tp, *slot.buffers); });
    slot.tp->launch_graph();
  } else {
    enqueue_step(*slot.tp, *slot.buffers);
  }
  slot.tp->download(logits);
  seq->advance();
}

}  // namespace wsb::dk
#endif  // WSBENCH_HAVE_CUDA
