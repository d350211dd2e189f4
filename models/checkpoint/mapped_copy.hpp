#pragma once
// Copying a tensor out of a checkpoint's read-only file mapping without its pages piling up in the resident set.
// Mapped pages that were read count in the process's RSS (file-backed) until they are unmapped or released, so a
// plain copy of the largest tensor (a 1.24 GB embedding) adds its whole size to the peak RSS of a native load.
#include <cstddef>
#include <cstdint>
#include <span>

namespace wsb {

/// Bytes copied between two releases of copy_from_mapping: large enough that madvise costs nothing next to the
/// copy, small next to the tensors that matter.
inline constexpr size_t kMappedCopyChunk = size_t{64} << 20;

/// dst = src, where `src` lies in a read-only file mapping (SafetensorsFile::data, CheckpointReader::data), copied
/// `chunk` bytes at a time; after each chunk its whole pages are dropped from this process (madvise
/// MADV_DONTNEED: the page cache keeps them, a later read faults them in again). The copy adds at most about
/// `chunk` bytes of mapped pages to the resident set, not src.size(). Pages src shares with a neighbouring tensor
/// are kept (release them with SafetensorsFile::release). Never on anonymous or writable memory: there the release
/// would discard data. Throws Error(Mismatch) when the sizes differ.
void copy_from_mapping(std::span<const uint8_t> src, std::span<uint8_t> dst, size_t chunk = kMappedCopyChunk);

}  // namespace wsb
