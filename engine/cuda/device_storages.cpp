// make_device_storages (engine/cuda/device_storages.hpp): the C++20 side; every CUDA call goes through
// engine/cuda/cuda_ops.hpp, so this file compiles in builds with and without CUDA.
#include "engine/cuda/device_storages.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>
#include <map>
#include <set>
#include <thread>
#include <string>
#include <utility>

#include "engine/cuda/cuda_ops.hpp"
#include "engine/cuda/delta_ops.hpp"
#include "core/digest64.hpp"
#include "core/errors.hpp"
#include "modes/sync/rank_image.hpp"

namespace wsb {
namespace {

/// One TP rank's device arena: every storage at the offset storage_offsets gives it (the rank image's layout).
struct RankArena {
  int device = 0;
  uint8_t* base = nullptr;
  uint64_t bytes = 0;
  std::vector<uint64_t> offsets;
  std::vector<uint64_t> sizes;
  std::vector<std::string> names;
  std::vector<void*> streams;  ///< cudaStream_t, non-blocking, on `device`
  uint64_t next_chunk = 0;     ///< chunks issued since the last synchronize(): chunk i goes to streams[i % S]
};

/// One device's delta staging area (allocated by reserve_delta_staging, or else at the first staging) and its digest
/// slot.
struct DeltaArea {
  uint8_t* pack = nullptr;  ///< device copy of the staged pack
  uint64_t capacity = 0;
  uint64_t staged = 0;      ///< bytes of the staged pack; 0 when nothing is staged
  uint64_t segments = 0, slots = 0;
  uint64_t digest = 0;      ///< digest64 of the staged pack, as packed on the host
  uint64_t* slot = nullptr;  ///< 8 device bytes the digest kernel reduces into
  void* stream = nullptr;    ///< the first rank on this device's copy stream 0 (synchronize() waits on it)
};

class CudaDeviceStorages final : public DeviceStorages {
 public:
  CudaDeviceStorages(uint64_t chunk_bytes, uint64_t delta_bytes) : chunk_bytes_(chunk_bytes), delta_bytes_(delta_bytes) {}
  ~CudaDeviceStorages() override {
    for (auto& [device, area] : areas_) {
      if (area.stream != nullptr) cuda_ops::stream_synchronize(device, area.stream);
      cuda_ops::device_free(device, area.pack);
      cuda_ops::device_free(device, area.slot);
    }
    for (auto& rank : ranks_) {
      for (void* s : rank.streams) cuda_ops::stream_destroy(rank.device, s);  // waits for in-flight copies
      cuda_ops::device_free(rank.device, rank.base);
    }
  }
  CudaDeviceStorages(const CudaDeviceStorages&) = delete;
  CudaDeviceStorages& operator=(const CudaDeviceStorages&) = delete;

  /// Allocates, zero-fills and adds one rank's arena (kept in ranks_ as soon as it exists, so the destructor
  /// frees it if a later step throws).
  void add_rank(const RankLayout& layout, int device, int streams) {
    const int r = static_cast<int>(ranks_.size());
    RankArena& arena = ranks_.emplace_back();
    arena.device = device;
    arena.offsets = storage_offsets(layout, &arena.bytes);
    for (const auto& s : layout.storages) {
      arena.sizes.push_back(s.bytes());
      arena.names.push_back(s.name);
    }
    const std::string what = fmt::format("rank {} storage arena", r);
    for (int i = 0; i < streams; ++i) {
      arena.streams.push_back(cuda_ops::stream_create(device, fmt::format("rank {} copy stream {}", r, i)));
    }
    if (arena.bytes == 0) return;  // no storages: nothing to allocate
    arena.base = static_cast<uint8_t*>(cuda_ops::device_alloc(device, arena.bytes, what));
    // On the rank's own stream: the streams are non-blocking, so a memset on the legacy default stream would not
    // be ordered before the first write.
    cuda_ops::memset_async(device, arena.base, 0, arena.bytes, arena.streams[0], what + ": zero fill");
    const std::string failure = cuda_ops::stream_synchronize(device, arena.streams[0]);
    if (!failure.empty()) throw Error(ErrorKind::Io, fmt::format("{}: zero fill: {}", what, failure));
  }

  int tp() const override { return static_cast<int>(ranks_.size()); }
  std::string backend() const override { return "cuda"; }
  Floor copy_floor() const override { return Floor::H2D; }
  size_t storage_count(int rank) const override { return arena(rank).sizes.size(); }
  uint64_t storage_bytes(int rank, size_t index) const override { return arena(rank).sizes.at(index); }
  uintptr_t address(int rank, size_t index) const override {
    const RankArena& a = arena(rank);
    return reinterpret_cast<uintptr_t>(a.base + a.offsets.at(index));
  }
  int device_of(int rank) const override { return arena(rank).device; }

  std::vector<DeviceRankView> views() const override {
    std::vector<DeviceRankView> out;
    for (const auto& a : ranks_) {
      DeviceRankView view;
      view.device = a.device;
      for (size_t i = 0; i < a.sizes.size(); ++i) view.storages.push_back(a.base + a.offsets[i]);
      view.bytes = a.sizes;
      out.push_back(std::move(view));
    }
    return out;
  }

  void write(int rank, size_t index, uint64_t offset, std::span<const uint8_t> src) override {
    RankArena& a = arena(rank);
    check_range(rank, index, offset, src.size(), "write");
    uint8_t* dst = a.base + a.offsets[index] + offset;
    const std::string what = fmt::format("rank {} storage '{}': write", rank, a.names[index]);
    for (uint64_t done = 0; done < src.size(); done += chunk_bytes_) {
      const uint64_t n = std::min<uint64_t>(chunk_bytes_, src.size() - done);
      void* stream = a.streams[a.next_chunk % a.streams.size()];
      cuda_ops::copy_h2d_async(a.device, dst + done, src.data() + done, n, stream, what);
      ++a.next_chunk;
    }
  }

  void synchronize() override {
    std::string first_failure;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      RankArena& a = ranks_[r];
      // Every stream is waited for even after a failure, so no copy is still in flight when this throws.
      for (size_t s = 0; s < a.streams.size(); ++s) {
        const std::string failure = cuda_ops::stream_synchronize(a.device, a.streams[s]);
        if (!failure.empty() && first_failure.empty()) {
          first_failure = fmt::format("rank {} (device {}) copy stream {}: synchronize failed: {}", r, a.device, s,
                                      failure);
        }
      }
      a.next_chunk = 0;
    }
    if (!first_failure.empty()) throw Error(ErrorKind::Io, first_failure);
  }

  void read(int rank, size_t index, std::span<uint8_t> out) const override {
    const RankArena& a = arena(rank);
    const uint64_t bytes = a.sizes.at(index);
    if (out.size() != bytes) {
      throw Error(ErrorKind::Mismatch, fmt::format("rank {} storage '{}': read into {} bytes, the storage holds {}",
                                                   rank, a.names[index], out.size(), bytes));
    }
    const_cast<CudaDeviceStorages*>(this)->synchronize();  // every issued write lands first
    if (bytes == 0) return;
    const std::string what = fmt::format("rank {} storage '{}': read", rank, a.names[index]);
    cuda_ops::copy_d2h_async(a.device, out.data(), a.base + a.offsets[index], bytes, a.streams[0], what);
    wait(a, what);
  }

  uint64_t delta_staging_bytes(int rank) const override {
    const int device = arena(rank).device;
    if (delta_bytes_ > 0) return delta_bytes_;
    uint64_t free_bytes = 0, total_bytes = 0;
    cuda_ops::memory_info(device, &free_bytes, &total_bytes);
    return static_cast<uint64_t>(static_cast<double>(total_bytes) * kDefaultDeltaStagingShare) / 256 * 256;
  }
  int delta_staging_group(int rank) const override { return arena(rank).device; }

  void reserve_delta_staging() override {
    std::set<int> devices;
    for (const RankArena& a : ranks_) devices.insert(a.device);
    for (int device : devices) pack_area(device);
  }

  uint64_t delta_address(int rank, size_t index) const override { return address(rank, index); }

  uint64_t live_digest(int rank, size_t index) override {
    const StorageIndex one[] = {{rank, index}};
    return live_digests(one).front();
  }

  std::vector<uint64_t> live_digests(std::span<const StorageIndex> storages) override {
    std::vector<uint64_t> out(storages.size());
    std::map<int, std::vector<size_t>> by_device;
    for (size_t i = 0; i < storages.size(); ++i) {
      check_range(storages[i].rank, storages[i].index, 0, 0, "live digest");
      by_device[arena(storages[i].rank).device].push_back(i);
    }
    for (const auto& [device, items] : by_device) area_of(storages[items.front()].rank);  // before any thread runs
    on_every_device(by_device, [&](int device, const std::vector<size_t>& items) {
      wait_device(device);  // every write issued to a storage of this device has landed
      DeltaArea& area = areas_.at(device);
      for (size_t i : items) {
        const RankArena& a = arena(storages[i].rank);
        const size_t index = storages[i].index;
        const std::string what = fmt::format("rank {} storage '{}': live digest", storages[i].rank, a.names[index]);
        out[i] = digest64_close(cuda_ops::digest64_sum_device(device, a.base + a.offsets[index], a.sizes[index],
                                                              area.slot, area.stream, what.c_str()),
                                a.sizes[index]);
      }
    });
    return out;
  }

  void stage_packs(std::span<const StagedPack> packs) override {
    for (auto& [device, area] : areas_) area.staged = 0;
    std::map<int, std::vector<size_t>> by_device;
    for (size_t i = 0; i < packs.size(); ++i) {
      auto& group = by_device[packs[i].group];
      if (!group.empty()) {
        throw Error(ErrorKind::Mismatch, fmt::format("delta staging: two packs for device {}", packs[i].group));
      }
      group.push_back(i);
    }
    // Everything that can refuse the packs, and every allocation, before any upload starts.
    for (const auto& [device, items] : by_device) {
      const StagedPack& pack = packs[items.front()];
      pack_counts(pack.bytes);
      const DeltaArea& area = pack_area(device);
      if (pack.bytes.size() > area.capacity) {
        throw Error(ErrorKind::Resource, fmt::format("delta staging on device {}: a pack of {} bytes exceeds the {} "
                                                     "byte area",
                                                     device, pack.bytes.size(), area.capacity));
      }
    }
    // Every device uploads and checks its pack at once (the host packs are pinned: the copies are DMA). A failure
    // on one device leaves nothing staged anywhere.
    try {
      upload_packs(packs, by_device);
    } catch (...) {
      for (auto& [device, area] : areas_) area.staged = 0;
      throw;
    }
  }

  void upload_packs(std::span<const StagedPack> packs, const std::map<int, std::vector<size_t>>& by_device) {
    on_every_device(by_device, [&](int device, const std::vector<size_t>& items) {
      const StagedPack& pack = packs[items.front()];
      DeltaArea& area = areas_.at(device);
      const PackCounts counts = pack_counts(pack.bytes);
      cuda_ops::copy_h2d_async(device, area.pack, pack.bytes.data(), pack.bytes.size(), area.stream,
                               fmt::format("delta staging on device {}: upload", device));
      area.staged = pack.bytes.size();
      area.segments = counts.segments;
      area.slots = counts.slots;
      area.digest = pack.digest;
      if (!area_intact(device, area)) {
        area.staged = 0;
        throw Error(ErrorKind::Checksum, fmt::format("delta staging on device {}: the staged pack's digest differs "
                                                     "from the {} bytes uploaded",
                                                     device, pack.bytes.size()));
      }
    });
  }

  bool staged_deltas_intact() override {
    for (auto& [device, area] : areas_) {
      if (area.staged > 0 && !area_intact(device, area)) return false;
    }
    return true;
  }

  void apply_staged_deltas() override {
    for (auto& [device, area] : areas_) {
      if (area.staged == 0) continue;
      const std::string what = fmt::format("delta apply on device {}", device);
      cuda_ops::apply_pack_async(device, area.pack, area.segments, area.slots, area.stream, what.c_str());
    }
  }

  void corrupt_staged_delta(uint64_t offset) override {
    for (auto& [device, area] : areas_) {
      if (area.staged == 0) continue;
      if (offset >= area.staged) throw Error(ErrorKind::Mismatch, "corrupt_staged_delta: offset beyond the pack");
      uint8_t byte = 0;
      cuda_ops::copy_d2h_async(device, &byte, area.pack + offset, 1, area.stream, "corrupt_staged_delta");
      cuda_ops::stream_synchronize(device, area.stream);
      byte ^= 0x01;
      cuda_ops::copy_h2d_async(device, area.pack + offset, &byte, 1, area.stream, "corrupt_staged_delta");
      cuda_ops::stream_synchronize(device, area.stream);
      return;
    }
    throw Error(ErrorKind::State, "corrupt_staged_delta: nothing staged");
  }

  void flip_byte(int rank, size_t index, uint64_t offset) override {
    RankArena& a = arena(rank);
    check_range(rank, index, offset, 1, "flip_byte");
    synchronize();
    const std::string what = fmt::format("rank {} storage '{}': flip_byte at {}", rank, a.names[index], offset);
    uint8_t* p = a.base + a.offsets[index] + offset;
    uint8_t byte = 0;
    cuda_ops::copy_d2h_async(a.device, &byte, p, 1, a.streams[0], what);
    wait(a, what);
    byte ^= 0x01;
    cuda_ops::copy_h2d_async(a.device, p, &byte, 1, a.streams[0], what);
    wait(a, what);  // `byte` lives on this stack frame: the copy must land before it goes
  }

 private:
  RankArena& arena(int rank) { return const_cast<RankArena&>(std::as_const(*this).arena(rank)); }
  const RankArena& arena(int rank) const {
    if (rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) {
      throw Error(ErrorKind::Mismatch, fmt::format("device storages: rank {} out of range (tp {})", rank, ranks_.size()));
    }
    return ranks_[static_cast<size_t>(rank)];
  }

  /// Same rule and message as HostStorages::write.
  void check_range(int rank, size_t index, uint64_t offset, uint64_t bytes, const char* op) const {
    const RankArena& a = arena(rank);
    if (index >= a.sizes.size()) {
      throw Error(ErrorKind::Mismatch, fmt::format("rank {}: {} to storage index {} out of range ({} storages)", rank,
                                                   op, index, a.sizes.size()));
    }
    const uint64_t size = a.sizes[index];
    if (offset > size || bytes > size - offset) {
      throw Error(ErrorKind::Mismatch, fmt::format("rank {} storage '{}': {} of {} bytes at {} exceeds {} bytes", rank,
                                                   a.names[index], op, bytes, offset, size));
    }
  }

  static void wait(const RankArena& a, const std::string& what) {
    const std::string failure = cuda_ops::stream_synchronize(a.device, a.streams[0]);
    if (!failure.empty()) throw Error(ErrorKind::Io, fmt::format("{}: {}", what, failure));
  }

  /// The delta area of `rank`'s device, its digest slot allocated on first use. Not thread-safe (areas_ grows).
  DeltaArea& area_of(int rank) { return area_of_device(arena(rank).device); }
  /// `device`'s area with its pack buffer allocated and the delta kernels loaded (both once per device).
  DeltaArea& pack_area(int device) {
    DeltaArea& area = area_of_device(device);
    if (area.pack == nullptr) {
      // Kernels first: an area is marked ready (pack set) only once both steps succeeded.
      cuda_ops::load_delta_kernels(device, fmt::format("delta kernels on device {}", device).c_str());
      area.capacity = delta_staging_bytes(first_rank_on(device));
      area.pack = static_cast<uint8_t*>(
          cuda_ops::device_alloc(device, area.capacity, fmt::format("delta staging area on device {}", device)));
    }
    return area;
  }
  DeltaArea& area_of_device(int device) {
    DeltaArea& area = areas_[device];
    if (area.slot == nullptr) {
      area.stream = arena(first_rank_on(device)).streams.front();
      area.slot = static_cast<uint64_t*>(
          cuda_ops::device_alloc(device, 8, fmt::format("delta digest slot on device {}", device)));
    }
    return area;
  }
  /// The lowest TP rank on `device`; Error(Mismatch) when no rank lives there.
  int first_rank_on(int device) const {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].device == device) return static_cast<int>(r);
    }
    throw Error(ErrorKind::Mismatch, fmt::format("device storages: no TP rank on device {}", device));
  }
  /// Waits for every copy stream of the ranks on `device` (a device-local synchronize()).
  void wait_device(int device) {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].device != device) continue;
      for (size_t s = 0; s < ranks_[r].streams.size(); ++s) {
        const std::string failure = cuda_ops::stream_synchronize(device, ranks_[r].streams[s]);
        if (!failure.empty()) {
          throw Error(ErrorKind::Io, fmt::format("rank {} (device {}) copy stream {}: synchronize failed: {}", r,
                                                 device, s, failure));
        }
      }
    }
  }
  /// Runs fn(device, items) for every entry of `work`, each device on its own thread (the calling thread takes the
  /// first), so devices work at once; rethrows the first failure once all have finished.
  template <class Fn>
  static void on_every_device(const std::map<int, std::vector<size_t>>& work, Fn&& fn) {
    std::vector<std::exception_ptr> errors(work.size());
    {
      std::vector<std::jthread> threads;
      size_t k = 0;
      for (const auto& [device, items] : work) {
        auto run = [&, device = device, k] {
          try {
            fn(device, work.at(device));
          } catch (...) {
            errors[k] = std::current_exception();
          }
        };
        if (k++ == 0) continue;
        threads.emplace_back(run);
      }
      if (!work.empty()) {
        const int device = work.begin()->first;
        try {
          fn(device, work.begin()->second);
        } catch (...) {
          errors[0] = std::current_exception();
        }
      }
    }
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }

  bool area_intact(int device, DeltaArea& area) {
    const uint64_t sum = cuda_ops::digest64_sum_device(device, area.pack, area.staged, area.slot, area.stream,
                                                       "staged delta digest");
    return digest64_close(sum, area.staged) == area.digest;
  }

  uint64_t chunk_bytes_;
  uint64_t delta_bytes_;
  std::vector<RankArena> ranks_;
  std::map<int, DeltaArea> areas_;  ///< by device
};

/// Device memory each used device must hold, and the TP ranks that need it.
struct DeviceNeed {
  uint64_t bytes = 0;
  std::vector<int> ranks;
};

}  // namespace

std::unique_ptr<DeviceStorages> make_device_storages(const std::vector<RankLayout>& layouts,
                                                     const DeviceStorageOptions& options) {
  if (!cuda_ops::built()) {
    throw Error(ErrorKind::Resource, "device storages: this wsbench was built without CUDA (no nvcc at configure "
                                     "time); the cuda backend needs a CUDA build and a device");
  }
  if (options.chunk_bytes == 0 || options.copy_streams < 1 || options.device_count < 0) {
    throw Error(ErrorKind::Mismatch,
                fmt::format("device storage options: chunk_bytes {} must be > 0, copy_streams {} >= 1, "
                            "device_count {} >= 0",
                            options.chunk_bytes, options.copy_streams, options.device_count));
  }
  const int visible = cuda_ops::visible_devices();
  if (visible == 0) throw Error(ErrorKind::Resource, "no CUDA device: the cuda backend needs one");
  if (options.device_count > visible) {
    throw Error(ErrorKind::Resource, fmt::format("device storages: {} CUDA devices requested, {} visible",
                                                 options.device_count, visible));
  }
  const int count = options.device_count > 0 ? options.device_count : visible;

  // Check every device before allocating anything, so a machine that cannot hold the model fails cleanly.
  std::map<int, DeviceNeed> needs;
  for (size_t r = 0; r < layouts.size(); ++r) {
    uint64_t total = 0;
    storage_offsets(layouts[r], &total);
    DeviceNeed& need = needs[static_cast<int>(r) % count];
    need.bytes += total;
    need.ranks.push_back(static_cast<int>(r));
  }
  std::vector<std::string> short_devices;
  for (const auto& [device, need] : needs) {
    uint64_t free_bytes = 0, total_bytes = 0;
    cuda_ops::memory_info(device, &free_bytes, &total_bytes);
    if (need.bytes > free_bytes) {
      short_devices.push_back(fmt::format("device {} ({}): needs {} bytes for TP ranks {{{}}}, {} free", device,
                                          cuda_ops::device_name(device), need.bytes, fmt::join(need.ranks, ", "),
                                          free_bytes));
    }
  }
  if (!short_devices.empty()) {
    throw Error(ErrorKind::Resource, fmt::format("device storages: not enough device memory: {}",
                                                 fmt::join(short_devices, "; ")));
  }

  auto storages = std::make_unique<CudaDeviceStorages>(options.chunk_bytes, options.delta_staging_bytes);
  for (size_t r = 0; r < layouts.size(); ++r) {
    storages->add_rank(layouts[r], static_cast<int>(r) % count, options.copy_streams);
  }
  return storages;
}

}  // namespace wsb
