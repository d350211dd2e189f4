#include "modes/disk/disk_materialize.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

#include "core/errors.hpp"
#include "models/checkpoint/checkpoint.hpp"
#include "models/checkpoint/safetensors_header.hpp"
#include "modes/sync/checkpoint_files.hpp"
#include "modes/sync/chunk_fold.hpp"
#include "modes/sync/host_buffer.hpp"
#include "modes/sync/work_queue.hpp"

namespace wsb {
namespace fs = std::filesystem;
namespace {

// One read, fold and write of a tensor at a time: large enough for the disk to see deep requests, small enough
// that every worker's buffer stays far below the staging the mode already holds.
constexpr size_t kChunk = 8 << 20;
// Written chunks whose writeback may still run per worker before the oldest is waited for.
constexpr size_t kWritebackDepth = 3;

/// One output shard: its file, the tensors it holds and where their bytes go.
struct OutShard {
  std::string name;  ///< relative path, as in the base's index
  fs::path path;
  std::vector<size_t> tensors;  ///< canonical indices, in base data order
  uint64_t data_start = 0;
  uint64_t file_bytes = 0;
  std::unique_ptr<Fd> fd;
};

/// Where tensor t is read from and written to.
struct TensorIo {
  fs::path src;
  uint64_t src_offset = 0;
  size_t shard = 0;
  uint64_t dst_offset = 0;
};

void write_le_u64(uint8_t* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

/// The worker's chunk buffer, kept across prepares (page aligned: pread and pwrite of whole pages where they can).
std::span<uint8_t> chunk_buffer() {
  thread_local HostBuffer buffer;
  if (buffer.size() < kChunk) buffer = HostBuffer(kChunk, 4096);
  return buffer.span().first(kChunk);
}

/// Streams tensor `spec` from `io.src` through `fold` into `shard`'s file.
void stream_tensor(const TensorSpec& spec, const TensorIo& io, OutShard& shard, TensorChunkFold& fold,
                   bool drop_base_cache) {
  const uint64_t size = spec.bytes();
  Fd src(io.src, O_RDONLY);
  ::posix_fadvise(src.get(), static_cast<off_t>(io.src_offset), static_cast<off_t>(size), POSIX_FADV_SEQUENTIAL);
  const std::span<uint8_t> buffer = chunk_buffer();
  WritebackWindow writeback(shard.fd->get(), kWritebackDepth);
  for (uint64_t at = 0; at < size; at += kChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, size - at));
    if (at + n < size) {  // the next chunk is read from the disk while this one is folded and written
      ::posix_fadvise(src.get(), static_cast<off_t>(io.src_offset + at + n),
                      static_cast<off_t>(std::min<uint64_t>(kChunk, size - at - n)), POSIX_FADV_WILLNEED);
    }
    const std::span<uint8_t> chunk = buffer.first(n);
    pread_all(src.get(), chunk, io.src_offset + at, io.src);
    if (drop_base_cache) {
      ::posix_fadvise(src.get(), static_cast<off_t>(io.src_offset + at), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
    }
    fold.apply(chunk);
    pwrite_all(shard.fd->get(), chunk, io.dst_offset + at, shard.path);
    writeback.written(io.dst_offset + at, n);
  }
}

}  // namespace

MaterializeResult materialize_checkpoint(const MaterializeJob& job, const std::vector<TensorSpec>& canonical) {
  const CheckpointReader base(job.base);
  std::vector<TensorIo> io(canonical.size());
  std::vector<OutShard> shards;
  {
    // Output shards mirror the base's: the same relative names, each with the canonical tensors the base holds
    // there, in the base's data order (so the reload reads each file front to back, as it would the base).
    std::map<std::string, size_t> shard_index;
    std::vector<std::vector<std::pair<uint64_t, size_t>>> by_offset;
    for (size_t t = 0; t < canonical.size(); ++t) {
      const SafetensorsEntry& entry = expect_tensor(base, canonical[t], job.base_origin);
      const std::string& name = base.index().weight_map.at(canonical[t].name);
      auto [it, fresh] = shard_index.emplace(name, shards.size());
      if (fresh) {
        shards.push_back(OutShard{name, job.out / name, {}, 0, 0, nullptr});
        by_offset.emplace_back();
      }
      const SafetensorsFile& file = base.shard_of(canonical[t].name);
      io[t] = TensorIo{file.path(), file.data_start() + entry.begin, it->second, 0};
      by_offset[it->second].emplace_back(entry.begin, t);
    }
    for (size_t s = 0; s < shards.size(); ++s) {
      std::sort(by_offset[s].begin(), by_offset[s].end());
      for (const auto& [offset, t] : by_offset[s]) shards[s].tensors.push_back(t);
    }
  }

  MaterializeResult result;
  fs::create_directories(job.out);
  CheckpointIndex index;
  for (OutShard& shard : shards) {
    std::vector<TensorSpec> specs;
    std::map<std::string, std::string> checksums;
    for (size_t t : shard.tensors) {
      specs.push_back(canonical[t]);
      checksums[canonical[t].name] = job.target->expected_checksum(canonical[t].name);
      index.weight_map[canonical[t].name] = shard.name;
    }
    const std::string header = build_safetensors_header(specs, checksums, shard.path);
    shard.data_start = 8 + header.size();
    uint64_t cursor = shard.data_start;
    for (size_t t : shard.tensors) {
      io[t].dst_offset = cursor;
      cursor += canonical[t].bytes();
    }
    shard.file_bytes = cursor;
    fs::create_directories(shard.path.parent_path());
    shard.fd = std::make_unique<Fd>(shard.path, O_RDWR | O_CREAT | O_TRUNC);
    reserve_file(shard.fd->get(), shard.file_bytes, shard.path);
    std::vector<uint8_t> head(shard.data_start);
    write_le_u64(head.data(), header.size());
    std::copy(header.begin(), header.end(), head.begin() + 8);
    pwrite_all(shard.fd->get(), head, 0, shard.path);
    result.file_bytes += shard.file_bytes;
  }
  for (const auto& spec : canonical) {
    result.tensor_bytes += spec.bytes();
    index.total_size += spec.bytes();
  }

  run_largest_first(
      canonical.size(), job.threads, [&](size_t t) { return canonical[t].bytes(); },
      [&](size_t t) {
        const TensorSpec& spec = canonical[t];
        OutShard& shard = shards[io[t].shard];
        TensorChunkFold fold(*job.plan, spec, job.target->expected_checksum(spec.name, spec.bytes()), job.version);
        stream_tensor(spec, io[t], shard, fold, job.drop_base_cache);
        fold.finish([&] {
          std::vector<uint8_t> bytes(spec.bytes());  // only on the error path: the exact invalid-code message
          pread_all(shard.fd->get(), bytes, io[t].dst_offset, shard.path);
          return bytes;
        });
        fault_point(job.fault_hook, {FaultPoint::DiskCheckpointWrite, 0, t, spec.name});
      });

  for (OutShard& shard : shards) {
    shard.fd.reset();
    fsync_path(shard.path, true);
  }
  write_checkpoint_index(job.out / kIndexFileName, index);
  result.file_bytes += fs::file_size(job.out / kIndexFileName);
  for (const OutShard& shard : shards) {
    for (fs::path dir = shard.path.parent_path(); dir != job.out && !dir.empty(); dir = dir.parent_path()) {
      fsync_path(dir, false);
    }
  }
  fsync_path(job.out, false);
  return result;
}

}  // namespace wsb
