// PublicationWriter: shards + index in the publication format, moved into place atomically.
#include <unistd.h>

#include <atomic>
#include <set>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "models/core/errors.hpp"
#include "modes/store/publication.hpp"

namespace wsb {
namespace {

std::atomic<uint64_t> g_temp_counter{0};

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

  std::unique_ptr<SafetensorsWriter> streamed;

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
  if (!atomic) {
    std::filesystem::create_directories(w.dir);
    w.work = w.dir;
    return;
  }
  std::error_code ec;
  if (std::filesystem::exists(w.dir, ec)) {
    throw Error(ErrorKind::Lineage,
                fmt::format("{} already exists: a publication is written once and never changed", w.dir.string()));
  }
  std::filesystem::path parent = w.dir.parent_path();
  std::filesystem::create_directories(parent);
  // Hidden name: Store::versions() and readers never take it for a publication.
  w.work = parent / fmt::format(".{}.tmp-{}-{}", w.dir.filename().string(), ::getpid(), g_temp_counter++);
  std::filesystem::remove_all(w.work);
  std::filesystem::create_directory(w.work);
}

PublicationWriter::~PublicationWriter() {
  if (!impl_ || impl_->committed) return;
  impl_->streamed.reset();  // removes its temp file
  std::error_code ec;
  if (impl_->atomic) {
    std::filesystem::remove_all(impl_->work, ec);
  } else {
    for (const auto& part : impl_->parts) std::filesystem::remove(part, ec);
  }
}

void PublicationWriter::begin_shard(std::vector<TensorSpec> tensors,
                                    const std::map<std::string, std::string>& checksums) {
  Impl& w = *impl_;
  w.require_no_streamed("begin_shard");
  for (const TensorSpec& spec : tensors) {
    if (checksums.find(spec.name) == checksums.end()) {
      throw Error(ErrorKind::Mismatch,
                  fmt::format("{}: tensor '{}' has no checksum for its shard", w.dir.string(), spec.name));
    }
  }
  if (checksums.size() != tensors.size()) {
    throw Error(ErrorKind::Mismatch, fmt::format("{}: {} checksums given for a shard of {} tensors", w.dir.string(),
                                                 checksums.size(), tensors.size()));
  }
  w.flush_buffered();
  std::filesystem::path path = w.new_part(tensors);
  w.streamed = std::make_unique<SafetensorsWriter>(path, std::move(tensors), checksums);
}

void PublicationWriter::append(std::span<const uint8_t> bytes) {
  Impl& w = *impl_;
  if (!w.streamed) throw Error(ErrorKind::State, fmt::format("{}: append without begin_shard", w.dir.string()));
  w.streamed->append(bytes);
}

void PublicationWriter::end_shard() {
  Impl& w = *impl_;
  if (!w.streamed) throw Error(ErrorKind::State, fmt::format("{}: end_shard without begin_shard", w.dir.string()));
  w.streamed->finish(w.fsync);
  w.streamed.reset();
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
    std::filesystem::rename(w.parts[i], final_path);
    w.parts[i] = final_path;
    stored += std::filesystem::file_size(final_path);
    for (const std::string& tensor : w.part_tensors[i]) index.weight_map[tensor] = name;
  }
  write_checkpoint_index(w.work / kIndexFileName, index);
  if (w.fsync) fsync_directory(w.work);
  if (w.atomic) {
    // rename(2) of a directory: readers see no publication or the complete one.
    if (::rename(w.work.c_str(), w.dir.c_str()) != 0) {
      throw Error(ErrorKind::Io, fmt::format("rename {} -> {}: {}", w.work.string(), w.dir.string(),
                                             std::strerror(errno)));
    }
    if (w.fsync) fsync_directory(w.dir.parent_path());
  }
  w.committed = true;
  return stored;
}

}  // namespace wsb
