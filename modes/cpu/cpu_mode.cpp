#include "modes/cpu/cpu_mode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "core/errors.hpp"
#include "core/nvtx.hpp"
#include "publication/store.hpp"
#include "publication/xor_stream.hpp"
#include "models/transform/fp8_channel.hpp"
#include "modes/sync/commit_copy.hpp"
#include "modes/sync/work_queue.hpp"

namespace wsb {

namespace {

std::vector<RankImage> make_images(const SyncContext& context) {
  std::vector<RankImage> images;
  for (const auto& layout : context.layouts) images.emplace_back(layout, context.pinner);
  return images;
}

/// Puts the fold's in-place bytes [chunk.from, chunk.to) of a homed tensor through `recorder`, which finds the
/// changes by comparing each word with the one it replaces: the old bytes (new ^ mask) go back first and the new
/// ones are written through it, all while the chunk is still in cache.
void record_in_place(DeltaRecorder& recorder, size_t flat, uint64_t storage_offset, std::span<uint8_t> bytes,
                     std::span<const uint8_t> mask) {
  thread_local ScratchBytes fresh;  // one chunk per fold worker
  fresh.reserve(bytes.size());
  std::memcpy(fresh.data(), bytes.data(), bytes.size());
  xor_into(bytes.data(), mask.data(), bytes.size());
  recorder.copy(flat, storage_offset, std::span<const uint8_t>(fresh.data(), bytes.size()));
}

}  // namespace

CpuMode::CpuMode(SyncContext context)
    : context_(std::move(context)),
      images_(make_images(context_)),
      homes_(canonical_homes(context_.profile.canonical_tensors(), context_.layouts, images_)),
      canonical_(context_.profile, "cpu mode", HostMemory::Private, homes_.tensor),
      staged_homes_(homes_.storage.size(), false) {
  if (device_delta()) delta_ = std::make_unique<DeviceDeltaCommit>(context_, images_);
}

void CpuMode::on_native_load(const CheckpointReader& checkpoint, uint32_t version, PhaseLog& log) {
  // A home the native load staged holds the checkpoint's bytes already: the canonical load need not copy it again.
  std::vector<bool> present(homes_.storage_of.size(), false);
  for (size_t i = 0; i < present.size(); ++i) {
    const size_t flat = homes_.storage_of[i];
    present[i] = flat != CanonicalHomes::kNoHome && staged_homes_[flat];
  }
  staged_homes_.assign(staged_homes_.size(), false);  // a retried load stages afresh
  canonical_.load(checkpoint, version, log, present);
  images_version_.reset();
  size_t storages = 0;
  for (const auto& layout : context_.layouts) storages += layout.storages.size();
  // When the native load staged every storage in the images and copied it from there, they hold the live bytes.
  const bool staged_all = native_staged_ == storages;
  native_staged_ = 0;  // also when the device-delta load below throws: a retried load counts afresh
  if (delta_) delta_->on_native_load(staged_all, log);
}

std::vector<std::vector<CpuMode::Placement>> CpuMode::plan_placements(std::vector<bool>& placed) {
  std::vector<std::vector<Placement>> by_tensor(canonical_.tensors().size());
  std::vector<RankImage>& images = images_;
  size_t flat = 0;
  for (size_t r = 0; r < images.size(); ++r) {
    for (size_t s = 0; s < context_.layouts[r].storages.size(); ++s, ++flat) {
      std::vector<FragmentRun> runs = fragment_runs(context_.layouts[r].storages[s]);
      // Every fragment must name a canonical tensor of the size its shape implies; otherwise load_storage reports it.
      const bool known = !runs.empty() && std::all_of(runs.begin(), runs.end(), [&](const FragmentRun& run) {
        const auto index = canonical_.index_of(run.canonical);
        return index && canonical_.tensors()[*index].bytes() == run.canonical_bytes;
      });
      if (!known) continue;
      for (FragmentRun& run : runs) {
        by_tensor[*canonical_.index_of(run.canonical)].push_back(
            Placement{images[r].storage(s), flat, std::move(run), homes_.storage[flat]});
      }
      placed[flat] = true;
    }
  }
  return by_tensor;
}

void CpuMode::build_rank_images(PhaseLog& log, const std::vector<bool>& placed, DeltaRecorder* recorder) {
  ScopedPhase phase(log, "prepare.transform", Floor::HostMemcpy);
  CanonicalLookup lookup = [this](const std::string& name) { return canonical_.tensor(name); };
  std::vector<RankImage>& images = images_;
  // Every item is independent: storages are disjoint, expert ranges of one storage and row bands of one FP8
  // weight write disjoint bytes, and the canonical image is only read. Storages are split into items of about
  // kPieceBytes, so no storage (they grow with the expert count) leaves one thread working while the rest wait.
  constexpr uint64_t kPieceBytes = 4ull << 20;
  // device-delta builds an FP8 weight 64 runtime rows at a time: each read canonical line is used whole, and the
  // piece (64 x Np bytes, under 1 MiB for every profile's shapes) is still in L2 when the recorder compares it.
  constexpr int64_t kRowPiece = 64;
  struct Item {
    size_t rank, storage, flat;
    StoragePiece piece;      ///< slices, or an FP8 weight band (full copy); for device-delta's rows, the expert
    int64_t k0 = 0, k1 = 0;  ///< FP8 weight rows (device-delta): runtime rows [k0, k1) of expert piece.first
    uint64_t bytes() const { return piece.bytes; }
  };
  std::vector<Item> items;
  uint64_t built = 0;
  size_t flat = 0;
  for (size_t r = 0; r < images.size(); ++r) {
    for (size_t s = 0; s < context_.layouts[r].storages.size(); ++s, ++flat) {
      if (placed[flat]) continue;
      const RuntimeStorageSpec& spec = context_.layouts[r].storages[s];
      built += spec.bytes();
      if (recorder != nullptr && loads_by_band(spec)) {
        // The recorder takes contiguous ranges: bands of runtime rows, each built piece by piece in cache.
        const size_t rank = spec.shape.size();
        const int64_t experts = rank == 3 ? spec.gathered_shape[0] : 1;
        const int64_t kp = spec.shape[rank - 2], np = std::max<int64_t>(1, spec.shape[rank - 1]);
        const int64_t band = std::max<int64_t>(kRowPiece, static_cast<int64_t>(kPieceBytes) / np / kRowPiece * kRowPiece);
        for (int64_t e = 0; e < experts; ++e) {
          for (int64_t k0 = 0; k0 < kp; k0 += band) {
            const int64_t k1 = std::min(kp, k0 + band);
            items.push_back(Item{r, s, flat, StoragePiece{e, 1, 0, 0, static_cast<uint64_t>((k1 - k0) * np)}, k0, k1});
          }
        }
        continue;
      }
      // A full copy transposes FP8 weights in bands of gathered rows straight into the image (no gathered copy).
      for (const StoragePiece& piece : storage_pieces(spec, kPieceBytes)) items.push_back(Item{r, s, flat, piece});
    }
  }
  const auto workers = static_cast<size_t>(std::max(context_.threads, 1));
  if (piece_scratch_.size() < workers) piece_scratch_.resize(workers);
  if (recorder != nullptr && build_scratch_.size() < workers) build_scratch_.resize(workers);
  run_largest_first(
      items.size(), context_.threads, [&](size_t i) { return items[i].bytes(); },
      [&](size_t i, size_t worker) {
        const Item& it = items[i];
        const RuntimeStorageSpec& spec = context_.layouts[it.rank].storages[it.storage];
        const std::span<uint8_t> image = images[it.rank].storage(it.storage);
        if (recorder == nullptr) {
          load_storage_piece(spec, lookup, it.piece, image, piece_scratch_[worker]);
          return;
        }
        // device-delta: the item is built into scratch and written through the recorder, which compares each word
        // with the live one it replaces (the image holds the live bytes until then) and writes only those that
        // differ: every change is found, whatever the transform does with the canonical bytes, and the image is
        // read once and written only where it changes.
        ScratchBytes& built_bytes = build_scratch_[worker];
        if (it.k1 > it.k0) {
          const size_t rank = spec.shape.size();
          const int64_t n = spec.gathered_shape[rank - 2], kp = spec.shape[rank - 2], np = spec.shape[rank - 1];
          std::vector<const uint8_t*>& rows = piece_scratch_[worker].rows;
          rows.resize(static_cast<size_t>(n));
          storage_rows(spec, lookup, it.piece.first * n, rows);
          built_bytes.reserve(static_cast<uint64_t>(kRowPiece * np));
          for (int64_t k0 = it.k0; k0 < it.k1; k0 += kRowPiece) {
            const int64_t k1 = std::min(it.k1, k0 + kRowPiece);
            const std::span<uint8_t> piece(built_bytes.data(), static_cast<size_t>((k1 - k0) * np));
            fp8_channel_weight_rows(spec.name, spec.gathered_shape, spec.shape, it.piece.first, k0, k1, rows, piece);
            recorder->copy(it.flat, static_cast<uint64_t>((it.piece.first * kp + k0) * np), piece);
          }
          return;
        }
        built_bytes.reserve(it.bytes());
        const std::span<uint8_t> out(built_bytes.data(), it.bytes());
        load_storage_slices_into(spec, lookup, out, it.piece.first, it.piece.count, &piece_scratch_[worker].gathered);
        const uint64_t offset = spec.bytes() / static_cast<uint64_t>(storage_slices(spec)) *
                                static_cast<uint64_t>(it.piece.first);
        recorder->copy(it.flat, offset, out);
      });
  phase.add_bytes(built);
}

void CpuMode::prepare(uint32_t served, uint32_t target, PhaseLog& log) {
  if (!canonical_.loaded()) throw Error(ErrorKind::State, "cpu mode: prepare before the engine's native load");
  if (canonical_.version() > target) {
    throw Error(ErrorKind::State, fmt::format("cpu mode: the canonical image holds {}, newer than target {} (served {})",
                                              version_string(canonical_.version()), version_string(target),
                                              version_string(served)));
  }
  size_t storages = 0;
  for (const auto& layout : context_.layouts) storages += layout.storages.size();
  // A home holds its tensors' bytes whatever the fold does (and a copy onto itself is no copy).
  std::vector<bool> placed = homes_.storage;
  DeltaRecorder* recorder = nullptr;  // device-delta: every write into the rank images goes through it
  bool writing = false;
  if (canonical_.version() < target) {
    // Plain-gather storages are written from each final chunk while it is in cache: one memory pass less than
    // folding everything and then gathering it (prepare is memory-bound). The placed bytes stay in the image set
    // being prepared, which nothing reads until images_version_ is set again, also when the fold fails.
    std::vector<std::vector<Placement>> placements;
    const auto before_mutation = [&] {
      images_version_.reset();  // from here on the rank images are rebuilt for the target
      placements = plan_placements(placed);
      if (delta_) recorder = delta_->begin_writes(log);
      writing = true;
    };
    const FoldListener listener = [&](size_t i, const FoldChunk& chunk) {
      for (const Placement& p : placements[i]) {
        if (p.home) {
          if (recorder != nullptr) {
            const size_t n = static_cast<size_t>(chunk.to - chunk.from);
            record_in_place(*recorder, p.flat, p.run.dst_offset + chunk.from,
                            p.storage.subspan(p.run.dst_offset + chunk.from, n), chunk.mask);
          }
          continue;
        }
        if (recorder == nullptr) {
          place_run_range(p.run, chunk.tensor, chunk.from, chunk.to, p.storage);
          continue;
        }
        for_each_run_piece(p.run, chunk.from, chunk.to, [&](uint64_t src, uint64_t dst, uint64_t n) {
          recorder->copy(p.flat, dst, chunk.tensor.subspan(src, n));
        });
      }
    };
    canonical_.advance(context_.store, target, context_.threads, log, "prepare", before_mutation, listener);
  }
  images_version_.reset();
  if (delta_ && !writing) recorder = delta_->begin_writes(log);
  build_rank_images(log, placed, recorder);
  if (delta_) delta_->finish_writes(log);
  images_version_ = target;
}

void CpuMode::preflight(uint32_t target) const {
  if (!images_version_ || *images_version_ != target) {
    throw Error(ErrorKind::State, fmt::format("cpu mode: rank images are not prepared for {}", version_string(target)));
  }
  // Before the gate closes: a staged pack whose bytes changed since they were verified is dropped, and this
  // commit copies every storage in full instead (the rank images are verified; the staged copy is not).
  if (delta_) delta_->preflight();
}

void CpuMode::commit(StorageTarget& storages, PhaseLog& log) {
  if (delta_) {
    delta_->commit(storages, log);
    return;
  }
  copy_rank_images(images_, context_.layouts, storages, context_.fault_hook, log);
}

std::span<uint8_t> CpuMode::native_load_staging(int rank, size_t index, uint64_t bytes) {
  RankImage& image = images_.at(static_cast<size_t>(rank));
  auto span = image.storage(index);
  if (delta_) delta_->before_native_load();  // its background digests read the images
  // device-delta needs the images to hold the live bytes after the load, pinned or not.
  if (span.size() != bytes || !(image.pinned() || device_delta())) return {};
  size_t flat = index;
  for (int r = 0; r < rank; ++r) flat += context_.layouts[static_cast<size_t>(r)].storages.size();
  // The load writes canonical tensors kept in this storage: until on_native_load reloads the canonical image,
  // nothing may fold them (a load that fails part way would leave them at another version).
  if (homes_.storage[flat]) {
    canonical_.invalidate();
    staged_homes_[flat] = true;
  }
  ++native_staged_;
  return span;
}

ModeMemory CpuMode::memory() const {
  ModeMemory m;
  m.canonical_bytes = canonical_.bytes();
  for (const auto& image : images_) m.rank_image_bytes += image.bytes();
  if (delta_) m.staging_bytes += delta_->host_bytes();
  for (const ScratchBytes& b : build_scratch_) m.staging_bytes += b.capacity();
  return m;
}

}  // namespace wsb
