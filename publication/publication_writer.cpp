// PublicationWriter: shards + index in the publication format, moved into place atomically.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "publication/publication.hpp"

namespace wsb {
namespace {

std::atomic<uint64_t> g_temp_counter{0};

[[noreturn]] void throw_errno(const std::string& action, const std::filesystem::path& path) {
  throw Error(ErrorKind::Io, fmt::format("{} {}: {}", action, path.string(), std::strerror(errno)));
}

void make_directories(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::Io, fmt::format("create directory {}: {}", dir.string(), ec.message()));
}

void rename_path(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw Error(ErrorKind::Io, fmt::format("rename {} -> {}: {}", from.string(), to.string(), std::strerror(errno)));
  }
}

void read_exact(int fd, uint8_t* out, size_t size, uint64_t offset, const std::filesystem::path& path) {
  while (size > 0) {
    ssize_t n = ::pread(fd, out, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      throw_errno("read", path);
    }
    out += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

void write_exact(int fd, const uint8_t* data, size_t size, uint64_t offset, const std::filesystem::path& path) {
  while (size > 0) {
    ssize_t n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("write", path);
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

/// Replaces each placeholder of `replacements` (exactly one occurrence each) in the safetensors header of `path`
/// by its final value of the same length. The header layout (8-byte little-endian length + JSON) is from the
/// safetensors spec; hex strings need no JSON escaping, so they appear verbatim.
void patch_header(const std::filesystem::path& path, const std::map<std::string, std::string>& replacements,
                  bool fsync_file) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw_errno("open", path);
  try {
    uint8_t length[8];
    read_exact(fd, length, 8, 0, path);
    uint64_t header_size = 0;
    for (int i = 7; i >= 0; --i) header_size = header_size << 8 | length[i];
    std::string header(header_size, '\0');
    read_exact(fd, reinterpret_cast<uint8_t*>(header.data()), header.size(), 8, path);
    for (const auto& [placeholder, value] : replacements) {
      size_t at = header.find(placeholder);
      if (at == std::string::npos || header.find(placeholder, at + 1) != std::string::npos ||
          value.size() != placeholder.size()) {
        throw Error(ErrorKind::Format,
                    fmt::format("{}: checksum placeholder {} not found exactly once in the header", path.string(),
                                placeholder));
      }
      header.replace(at, value.size(), value);
    }
    write_exact(fd, reinterpret_cast<const uint8_t*>(header.data()), header.size(), 8, path);
    if (fsync_file && ::fsync(fd) != 0) throw_errno("fsync", path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw_errno("close", path);
}

}  // namespace

struct PublicationWriter::Impl {
  std::filesystem::path dir;   // final location
  std::filesystem::path work;  // where files are written (a hidden sibling of `dir` when atomic)
  PublicationManifest manifest;
  uint64_t max_shard_bytes = 0;
  bool atomic = false;
  bool fsync = false;
  bool committed = false;

  std::vector<std::filesystem::path> parts;  // shard files in order, under provisional names
  std::vector<std::vector<std::string>> part_tensors;
  std::set<std::string, std::less<>> names;
  uint64_t total_size = 0;

  // Streamed shard: its writer, its tensors, their placeholders and the running hash of the current tensor.
  std::unique_ptr<SafetensorsWriter> streamed;
  std::filesystem::path streamed_path;
  std::vector<TensorSpec> streamed_specs;
  std::vector<std::string> placeholders;
  std::map<std::string, std::string> patches;  // placeholder -> checksum
  size_t current = 0;                          // tensor receiving the next byte
  uint64_t current_filled = 0;
  std::unique_ptr<ChecksumBuilder> hasher;
  bool checksums_given = false;  // begin_shard with checksums: nothing to hash or patch

  std::map<std::string, std::string> files;           // add_file: name -> content
  std::vector<std::filesystem::path> files_written;  // removed again when a non-atomic commit fails

  std::vector<TensorSpec> buffered_specs;
  std::vector<std::vector<uint8_t>> buffered_bytes;
  std::map<std::string, std::string> buffered_checksums;
  uint64_t buffered_total = 0;

  /// Registers a new shard of `tensors` and returns its provisional path. Names are provisional because the
  /// shard count is known only at commit.
  std::filesystem::path new_part(const std::vector<TensorSpec>& tensors) {
    for (const TensorSpec& spec : tensors) {
      if (!names.insert(spec.name).second) {
        throw Error(ErrorKind::Mismatch,
                    fmt::format("{}: tensor '{}' written twice", dir.string(), spec.name));
      }
      total_size += spec.bytes();
    }
    std::vector<std::string> list;
    for (const TensorSpec& spec : tensors) list.push_back(spec.name);
    part_tensors.push_back(std::move(list));
    parts.push_back(work / fmt::format(".wsb-part-{:05d}.safetensors", parts.size() + 1));
    return parts.back();
  }

  void flush_buffered() {
    if (buffered_specs.empty()) return;
    SafetensorsWriter writer(new_part(buffered_specs), buffered_specs, buffered_checksums);
    for (const auto& bytes : buffered_bytes) writer.append(bytes);
    writer.finish(fsync);
    buffered_specs.clear();
    buffered_bytes.clear();
    buffered_checksums.clear();
    buffered_total = 0;
  }

  /// Closes every complete tensor at the cursor (zero-byte tensors complete at once).
  void close_complete_tensors() {
    while (current < streamed_specs.size() && current_filled == streamed_specs[current].bytes()) {
      if (!checksums_given) patches[placeholders[current]] = hasher->text();
      ++current;
      current_filled = 0;
      hasher = std::make_unique<ChecksumBuilder>(manifest.checksum_range_bytes);
    }
  }

  /// A checksum given by the caller must have the manifest's form (its digest count is checked by readers, who
  /// know the target tensor's size).
  void require_checksum_text(const std::string& tensor, const std::string& checksum) const {
    if (manifest.checksum_range_bytes == 0 ? is_xxh3_128_hex(checksum) : is_xxh3_128_ranges_hex(checksum)) return;
    throw Error(ErrorKind::Format,
                fmt::format("{}: tensor '{}': checksum '{}' is not {}", dir.string(), tensor, checksum,
                            manifest.checksum_range_bytes == 0
                                ? "32 lowercase hex characters"
                                : "one or more xxh3-128 digests of 32 lowercase hex characters (xxh3-128-ranges)"));
  }

  void require_no_streamed(std::string_view action) const {
    if (streamed) {
      throw Error(ErrorKind::State, fmt::format("{}: {} while a streamed shard is open", dir.string(), action));
    }
  }
};

PublicationWriter::PublicationWriter(std::filesystem::path dir, const PublicationManifest& manifest,
                                     uint64_t max_shard_bytes, bool atomic, bool fsync)
    : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.dir = std::move(dir);
  w.manifest = manifest;
  w.max_shard_bytes = max_shard_bytes;
  w.atomic = atomic;
  w.fsync = fsync;
  // A manifest this writer could not read back: the format and the range size must agree.
  const bool ranged = manifest.checksum_format == kChecksumXxh3Ranges;
  if ((manifest.checksum_format != kChecksumXxh3 && !ranged) || ranged != (manifest.checksum_range_bytes != 0) ||
      !checksum_range_bytes_problem(manifest.checksum_range_bytes).empty()) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: checksum_format '{}' with checksum_range_bytes {} (xxh3-128 with 0, or "
                            "xxh3-128-ranges with a multiple of 1 MiB)",
                            w.dir.string(), manifest.checksum_format, manifest.checksum_range_bytes));
  }
  if (!atomic) {
    make_directories(w.dir);
    w.work = w.dir;
    return;
  }
  std::error_code ec;
  if (std::filesystem::exists(w.dir, ec)) {
    throw Error(ErrorKind::Lineage,
                fmt::format("{} already exists: a publication is written once and never changed", w.dir.string()));
  }
  std::filesystem::path parent = w.dir.parent_path();
  // Hidden name: Store::versions() and readers never take it for a publication.
  w.work = parent / fmt::format(".{}.tmp-{}-{}", w.dir.filename().string(), ::getpid(), g_temp_counter++);
  std::filesystem::remove_all(w.work, ec);  // a leftover of a crashed process with a recycled pid
  make_directories(w.work);
}

PublicationWriter::~PublicationWriter() {
  if (!impl_ || impl_->committed) return;
  impl_->streamed.reset();  // removes its temp file
  std::error_code ec;
  if (impl_->atomic) {
    std::filesystem::remove_all(impl_->work, ec);
  } else {
    for (const auto& part : impl_->parts) std::filesystem::remove(part, ec);
    for (const auto& file : impl_->files_written) std::filesystem::remove(file, ec);
  }
}

void PublicationWriter::begin_shard(std::vector<TensorSpec> tensors) {
  Impl& w = *impl_;
  w.require_no_streamed("begin_shard");
  w.flush_buffered();
  std::filesystem::path path = w.new_part(tensors);
  std::map<std::string, std::string> metadata;
  w.placeholders.clear();
  for (const TensorSpec& spec : tensors) {
    // Unique per shard and tensor, and of the final length: the header size never changes when patched.
    std::string seed = fmt::format("wsbench checksum placeholder\n{}\n{}", path.string(), spec.name);
    const std::string unique = xxh3_128_hex(std::span(reinterpret_cast<const uint8_t*>(seed.data()), seed.size()));
    std::string placeholder;
    for (size_t k = checksum_range_count(spec.bytes(), w.manifest.checksum_range_bytes); k > 0; --k) {
      placeholder += unique;
    }
    w.placeholders.push_back(std::move(placeholder));
    metadata[spec.name] = w.placeholders.back();
  }
  w.streamed = std::make_unique<SafetensorsWriter>(path, tensors, metadata);
  w.streamed_path = path;
  w.streamed_specs = std::move(tensors);
  w.patches.clear();
  w.checksums_given = false;
  w.current = 0;
  w.current_filled = 0;
  w.hasher = std::make_unique<ChecksumBuilder>(w.manifest.checksum_range_bytes);
  w.close_complete_tensors();
}

void PublicationWriter::begin_shard(std::vector<TensorSpec> tensors, std::vector<std::string> checksums) {
  Impl& w = *impl_;
  w.require_no_streamed("begin_shard");
  if (checksums.size() != tensors.size()) {
    throw Error(ErrorKind::Format, fmt::format("{}: shard of {} tensors given {} checksums", w.dir.string(),
                                               tensors.size(), checksums.size()));
  }
  std::map<std::string, std::string> metadata;
  for (size_t i = 0; i < tensors.size(); ++i) {
    w.require_checksum_text(tensors[i].name, checksums[i]);
    metadata[tensors[i].name] = checksums[i];
  }
  w.flush_buffered();
  std::filesystem::path path = w.new_part(tensors);
  w.streamed = std::make_unique<SafetensorsWriter>(path, tensors, metadata);
  w.streamed_path = path;
  w.streamed_specs = std::move(tensors);
  w.placeholders.clear();
  w.patches.clear();
  w.checksums_given = true;
  w.current = 0;
  w.current_filled = 0;
  w.hasher = std::make_unique<ChecksumBuilder>(w.manifest.checksum_range_bytes);
  w.close_complete_tensors();
}

void PublicationWriter::append(std::span<const uint8_t> bytes) {
  Impl& w = *impl_;
  if (!w.streamed) throw Error(ErrorKind::State, fmt::format("{}: append without begin_shard", w.dir.string()));
  w.streamed->append(bytes);  // refuses bytes beyond the declared tensors
  while (!bytes.empty()) {
    uint64_t room = w.streamed_specs[w.current].bytes() - w.current_filled;
    size_t take = static_cast<size_t>(std::min<uint64_t>(room, bytes.size()));
    w.hasher->update(bytes.first(take));
    w.current_filled += take;
    bytes = bytes.subspan(take);
    w.close_complete_tensors();
  }
}

void PublicationWriter::end_shard() {
  Impl& w = *impl_;
  if (!w.streamed) throw Error(ErrorKind::State, fmt::format("{}: end_shard without begin_shard", w.dir.string()));
  if (w.checksums_given) {
    w.streamed->finish(w.fsync);  // refuses a shard with missing bytes; nothing to patch
    w.streamed.reset();
    return;
  }
  w.streamed->finish(/*fsync_file=*/false);  // refuses a shard with missing bytes; fsynced after the patch
  w.streamed.reset();
  patch_header(w.streamed_path, w.patches, w.fsync);
}

void PublicationWriter::add(TensorSpec spec, std::vector<uint8_t> bytes, std::string checksum) {
  Impl& w = *impl_;
  w.require_no_streamed("add");
  if (bytes.size() != spec.bytes()) {
    throw Error(ErrorKind::Format, fmt::format("{}: tensor '{}' has {} bytes, {} {} needs {}", w.dir.string(),
                                               spec.name, bytes.size(), dtype_name(spec.dtype),
                                               shape_string(spec.shape), spec.bytes()));
  }
  if (!w.buffered_specs.empty() && w.buffered_total + bytes.size() > w.max_shard_bytes) w.flush_buffered();
  w.buffered_total += bytes.size();
  w.buffered_checksums[spec.name] = std::move(checksum);
  w.buffered_specs.push_back(std::move(spec));
  w.buffered_bytes.push_back(std::move(bytes));
}

void PublicationWriter::add_file(std::string name, std::string bytes) {
  Impl& w = *impl_;
  if (name.empty() || name.find('/') != std::string::npos || name.front() == '.' || name == kIndexFileName ||
      name.ends_with(".safetensors")) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: '{}' is not a plain file name beside the index and the shards", w.dir.string(), name));
  }
  w.files[std::move(name)] = std::move(bytes);
}

uint64_t PublicationWriter::commit() {
  Impl& w = *impl_;
  w.require_no_streamed("commit");
  w.flush_buffered();
  CheckpointIndex index;
  index.metadata = manifest_metadata(w.manifest);
  index.total_size = w.total_size;
  uint64_t stored = 0;
  for (size_t i = 0; i < w.parts.size(); ++i) {
    std::string name = shard_file_name(i + 1, w.parts.size());
    std::filesystem::path final_path = w.work / name;
    rename_path(w.parts[i], final_path);
    w.parts[i] = final_path;
    std::error_code ec;
    uint64_t size = std::filesystem::file_size(final_path, ec);
    if (ec) throw Error(ErrorKind::Io, fmt::format("stat {}: {}", final_path.string(), ec.message()));
    stored += size;
    for (const std::string& tensor : w.part_tensors[i]) index.weight_map[tensor] = name;
  }
  for (const auto& [name, bytes] : w.files) {
    const std::filesystem::path path = w.work / name;
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw_errno("create", path);
    w.files_written.push_back(path);
    try {
      write_exact(fd, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0, path);
      if (w.fsync && ::fsync(fd) != 0) throw_errno("fsync", path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (::close(fd) != 0) throw_errno("close", path);
  }
  write_checkpoint_index(w.work / kIndexFileName, index);
  if (w.fsync) fsync_directory(w.work);
  if (w.atomic) {
    // rename(2) of a directory: readers see no publication or the complete one.
    rename_path(w.work, w.dir);
    if (w.fsync) fsync_directory(w.dir.parent_path());
  }
  w.committed = true;
  return stored;
}

}  // namespace wsb
