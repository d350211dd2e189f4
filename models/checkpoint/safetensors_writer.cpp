#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "models/checkpoint/file_io.hpp"
#include "models/checkpoint/safetensors.hpp"
#include "models/checkpoint/safetensors_header.hpp"

namespace wsb {
namespace {

// Small appends are gathered so a caller streaming many small pieces does not pay one syscall each.
constexpr size_t kBufferBytes = size_t{1} << 20;

}  // namespace

struct SafetensorsWriter::Impl {
  std::filesystem::path path;
  std::filesystem::path tmp;
  std::vector<TensorSpec> tensors;
  std::vector<uint64_t> ends;  // cumulative data end of each tensor, in declaration order
  uint64_t total = 0;
  uint64_t written = 0;  // data bytes received so far
  int fd = -1;
  bool finished = false;
  std::vector<uint8_t> buffer;

  // Name of the tensor the next byte belongs to (for messages).
  std::string current_tensor() const {
    for (size_t i = 0; i < ends.size(); ++i) {
      if (written < ends[i]) return tensors[i].name;
    }
    return tensors.empty() ? std::string("<none>") : tensors.back().name;
  }

  void flush() {
    write_all(fd, buffer.data(), buffer.size(), tmp);
    buffer.clear();
  }

  void abandon() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    ::unlink(tmp.c_str());
  }
};

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.path = path;
  w.tmp = tmp_path_for(path);
  const std::string header = build_safetensors_header(tensors, metadata, path);
  for (const TensorSpec& spec : tensors) {
    w.total += spec.bytes();  // cannot wrap: the header builder checked every byte count
    w.ends.push_back(w.total);
  }
  w.tensors = std::move(tensors);
  w.fd = ::open(w.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd < 0) {
    throw Error(errno == ENOENT ? ErrorKind::Missing : ErrorKind::Io,
                fmt::format("{}: open for writing: {}", w.tmp.string(), std::strerror(errno)));
  }
  try {
    uint8_t length[8];
    uint64_t n = header.size();
    for (uint8_t& byte : length) {  // little-endian length field (safetensors spec)
      byte = static_cast<uint8_t>(n & 0xFF);
      n >>= 8;
    }
    w.buffer.reserve(kBufferBytes);
    w.buffer.insert(w.buffer.end(), length, length + 8);
    w.buffer.insert(w.buffer.end(), header.begin(), header.end());
    if (w.buffer.size() >= kBufferBytes) w.flush();
  } catch (...) {
    w.abandon();
    throw;
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (impl_ && !impl_->finished) impl_->abandon();
}

void SafetensorsWriter::append(std::span<const uint8_t> bytes) {
  Impl& w = *impl_;
  if (w.finished || w.fd < 0) {
    throw Error(ErrorKind::State, fmt::format("{}: append after finish", w.path.string()));
  }
  if (bytes.size() > w.total - w.written) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: append of {} bytes at tensor '{}' exceeds the declared data size {} ({} written)",
                            w.path.string(), bytes.size(), w.current_tensor(), w.total, w.written));
  }
  if (bytes.size() >= kBufferBytes) {
    w.flush();
    write_all(w.fd, bytes.data(), bytes.size(), w.tmp);
  } else {
    if (w.buffer.size() + bytes.size() > kBufferBytes) w.flush();
    w.buffer.insert(w.buffer.end(), bytes.begin(), bytes.end());
  }
  w.written += bytes.size();
}

void SafetensorsWriter::finish(bool fsync_file) {
  Impl& w = *impl_;
  if (w.finished || w.fd < 0) {
    throw Error(ErrorKind::State, fmt::format("{}: finish called twice", w.path.string()));
  }
  if (w.written != w.total) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: finish after {} of {} data bytes; tensor '{}' is incomplete", w.path.string(),
                            w.written, w.total, w.current_tensor()));
  }
  w.flush();
  if (fsync_file && ::fsync(w.fd) != 0) {
    throw Error(ErrorKind::Io, fmt::format("{}: fsync: {}", w.tmp.string(), std::strerror(errno)));
  }
  const int fd = w.fd;
  w.fd = -1;
  if (::close(fd) != 0) {
    throw Error(ErrorKind::Io, fmt::format("{}: close: {}", w.tmp.string(), std::strerror(errno)));
  }
  if (::rename(w.tmp.c_str(), w.path.c_str()) != 0) {
    throw Error(ErrorKind::Io, fmt::format("{}: rename from {}: {}", w.path.string(), w.tmp.string(),
                                           std::strerror(errno)));
  }
  w.finished = true;
  if (fsync_file) fsync_parent_dir(w.path);
}

void write_safetensors(const std::filesystem::path& path, std::span<const TensorData> tensors,
                       const std::map<std::string, std::string>& metadata, bool fsync_file) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const TensorData& t : tensors) specs.push_back(t.spec);
  SafetensorsWriter writer(path, std::move(specs), metadata);
  for (const TensorData& t : tensors) {
    if (t.bytes.size() != t.spec.bytes()) {
      throw Error(ErrorKind::Format,
                  fmt::format("{}: tensor '{}' has {} bytes but dtype {} shape {} needs {}", path.string(),
                              t.spec.name, t.bytes.size(), dtype_name(t.spec.dtype), shape_string(t.spec.shape),
                              t.spec.bytes()));
    }
    writer.append(t.bytes);
  }
  writer.finish(fsync_file);
}

}  // namespace wsb
