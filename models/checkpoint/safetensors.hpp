#pragma once
// safetensors reader (mmap) and writer. Format facts from the safetensors spec (huggingface/safetensors):
// 8-byte little-endian header length N, N bytes of UTF-8 JSON (may be space padded), then the data buffer.
// Each entry has dtype, shape, data_offsets [begin, end) relative to the data buffer; offsets must tile the
// buffer with no holes or overlaps; "__metadata__" is an optional string->string map.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/tensor_spec.hpp"

namespace wsb {

/// One tensor entry of a safetensors header. `begin`/`end` are byte offsets relative to the data buffer.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::U8;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t bytes() const { return end - begin; }
  TensorSpec spec() const { return TensorSpec{name, dtype, shape}; }
};

/// Largest header accepted, in bytes (the reference implementation's limit: 100,000,000).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

/// A validated, memory-mapped safetensors file. Construction throws wsb::Error naming the file and the field:
/// Format for malformed headers (bad JSON, non-UTF-8, duplicate keys at any depth, unknown or sub-byte dtype,
/// unknown/missing entry fields, shape/offset mismatch, begin > end, overlap, hole, trailing unused data bytes,
/// header length beyond kSafetensorsMaxHeaderBytes), Truncated when the file is shorter than it declares
/// (under 8 bytes, header or data end beyond EOF: "not yet published", retryable), Missing when the file does
/// not exist, Io when it cannot be opened or mapped. The mapping is read-only (MAP_PRIVATE): a file truncated
/// by someone else while mapped raises SIGBUS on access, so published files must be replaced, never rewritten.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// Entries in header order.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  /// nullptr when absent.
  const SafetensorsEntry* find(std::string_view name) const;
  /// Throws Error(Missing) naming file and tensor when absent.
  const SafetensorsEntry& at(std::string_view name) const;
  /// Bytes of one tensor, pointing into the mapping (valid while this object lives). Throws Error(Format) when
  /// `entry` (e.g. one taken from another file) does not fit this file.
  std::span<const uint8_t> data(const SafetensorsEntry& entry) const;
  std::span<const uint8_t> data(std::string_view name) const { return data(at(name)); }
  /// Drops the mapped pages of `name`'s bytes from this process (madvise MADV_DONTNEED on the read-only file
  /// mapping: the next access faults them back in from the page cache). Streaming loaders call it after a
  /// tensor is consumed so a full-model load never holds the whole checkpoint in its resident set. Best effort.
  void release(std::string_view name) const;
  /// Asks the kernel to start reading `name`'s pages now (madvise MADV_WILLNEED), so a loader can overlap the
  /// disk read of the next tensor with work on the current one. Best effort.
  void prefetch(std::string_view name) const;
  /// `__metadata__` (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Offset of the data buffer in the file (8 + header length).
  uint64_t data_start() const { return data_start_; }

 private:
  std::filesystem::path path_;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, std::string> metadata_;
  const uint8_t* map_ = nullptr;
  size_t map_size_ = 0;
  uint64_t data_start_ = 0;
};

/// Streaming writer: the tensor list is declared up front (so the header is written first), then each tensor's
/// bytes are appended in declaration order. Writes `path` + ".tmp" and renames on finish() (atomic publish);
/// destroying an unfinished writer deletes the .tmp file. The header is space padded so the data buffer starts
/// at a multiple of 8 (as the reference writer does); JSON keys are "__metadata__" (sorted keys, omitted when
/// empty) then the tensors in declaration (= data) order, so equal inputs give byte-identical files.
/// The constructor throws Error(Format) for duplicate/reserved ("__metadata__") names, negative dimensions or
/// invalid UTF-8, Error(Io/Missing) when the .tmp file cannot be created.
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorSpec> tensors,
                    const std::map<std::string, std::string>& metadata);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  /// Appends bytes of the current tensor; may be called several times per tensor. Throws Error(Format) when
  /// more bytes arrive than the declared tensors hold.
  void append(std::span<const uint8_t> bytes);
  /// Checks every declared byte arrived, optionally fsyncs (file, then directory after the rename), renames
  /// into place. Throws Error(Format) naming the incomplete tensor, Error(Io), Error(State) if called twice.
  void finish(bool fsync_file);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One tensor for write_safetensors.
struct TensorData {
  TensorSpec spec;
  std::span<const uint8_t> bytes;
};

/// Writes a whole file at once (tensors in the given order). Throws Error on size mismatch or I/O failure.
void write_safetensors(const std::filesystem::path& path, std::span<const TensorData> tensors,
                       const std::map<std::string, std::string>& metadata = {}, bool fsync_file = false);

}  // namespace wsb
