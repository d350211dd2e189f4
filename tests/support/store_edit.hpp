#pragma once
// Turning a good published store into a bad input in a few lines: edit a shard's tensors, checksum map or raw
// header bytes, the index JSON (as parsed, or as raw JSON where the writer would refuse the edit), the manifest
// fields and `latest`; plus hand-built zstd frames, because zstd's own encoder cannot produce the lying or
// malformed frames the decoders must refuse.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/checkpoint/checkpoint.hpp"
#include "publication/store.hpp"
#include "tests/support/file_bytes.hpp"
#include "tests/support/test_support.hpp"

namespace wsb::test {

inline std::string le_bytes(uint64_t value, int width) {
  std::string out(static_cast<size_t>(width), '\0');
  for (int i = 0; i < width; ++i) out[static_cast<size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

/// Mutations of the publications of one store. Every edit replaces the file (published files are mapped by readers,
/// never rewritten in place).
class StoreEditor {
 public:
  explicit StoreEditor(std::filesystem::path root) : root_(std::move(root)) {}

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path dir(uint32_t version) const { return Store(root_).update_dir(version); }
  std::filesystem::path index_path(uint32_t version) const { return dir(version) / kIndexFileName; }
  /// Name (relative path in the index) of the shard of `version` that holds `tensor`.
  std::string shard_name(uint32_t version, const std::string& tensor) const {
    return read_checkpoint_index(index_path(version)).weight_map.at(tensor);
  }
  std::filesystem::path shard_path(uint32_t version, const std::string& tensor) const {
    return dir(version) / shard_name(version, tensor);
  }

  /// Parsed index: metadata (the manifest fields) and weight_map.
  void edit_index(uint32_t version, const std::function<void(CheckpointIndex&)>& edit) const {
    CheckpointIndex index = read_checkpoint_index(index_path(version));
    edit(index);
    write_checkpoint_index(index_path(version), index);
  }
  /// One manifest field: set, or erased when `value` is nullopt.
  void set_manifest_field(uint32_t version, const std::string& key, std::optional<std::string> value) const {
    edit_index(version, [&](CheckpointIndex& index) {
      if (value) index.metadata[key] = *value;
      else index.metadata.erase(key);
    });
  }
  /// The index as raw JSON, for entries write_checkpoint_index refuses to write (bad shard paths).
  void edit_index_json(uint32_t version, const std::function<void(nlohmann::json&)>& edit) const {
    nlohmann::json doc = nlohmann::json::parse(read_bytes(index_path(version)));
    edit(doc);
    write_bytes(index_path(version), doc.dump(2));
  }

  /// Tensors and checksum map of the shard holding `tensor`.
  void edit_shard(uint32_t version, const std::string& tensor,
                  const std::function<void(std::vector<EditableTensor>&, std::map<std::string, std::string>&)>& edit)
      const {
    rewrite_shard(shard_path(version, tensor), edit);
  }
  std::vector<uint8_t> payload(uint32_t version, const std::string& tensor) const {
    SafetensorsFile file(shard_path(version, tensor));
    auto bytes = file.data(tensor);
    return {bytes.begin(), bytes.end()};
  }
  /// Replaces the stored bytes of `tensor` (a 1-D U8 delta payload: the shape follows the byte count).
  void set_payload(uint32_t version, const std::string& tensor, std::vector<uint8_t> payload) const {
    edit_shard(version, tensor, [&](std::vector<EditableTensor>& tensors, auto&) {
      for (auto& t : tensors) {
        if (t.spec.name != tensor) continue;
        t.spec.shape = {static_cast<int64_t>(payload.size())};
        t.bytes = payload;
      }
    });
  }
  void set_checksum(uint32_t version, const std::string& tensor, const std::string& checksum) const {
    edit_shard(version, tensor, [&](auto&, std::map<std::string, std::string>& metadata) {
      metadata[tensor] = checksum;
    });
  }

  /// Raw header of a safetensors file: `edit` gets the JSON text (changing its length is fine: the length field
  /// follows) and the data buffer stays byte for byte.
  static void edit_header_text(const std::filesystem::path& shard, const std::function<void(std::string&)>& edit) {
    const std::string bytes = read_bytes(shard);
    uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    std::string header = bytes.substr(8, length);
    edit(header);
    write_bytes(shard, le_bytes(header.size(), 8) + header + bytes.substr(8 + length));
  }
  static void edit_header_json(const std::filesystem::path& shard, const std::function<void(nlohmann::json&)>& edit) {
    edit_header_text(shard, [&](std::string& text) {
      nlohmann::json doc = nlohmann::json::parse(text);
      edit(doc);
      text = doc.dump();
    });
  }
  /// Overwrites the 8-byte header length field only.
  static void set_header_length(const std::filesystem::path& shard, uint64_t length) {
    std::string bytes = read_bytes(shard);
    bytes.replace(0, 8, le_bytes(length, 8));
    write_bytes(shard, bytes);
  }

  void set_latest(const std::string& text) const { write_bytes(root_ / "latest", text); }

 private:
  std::filesystem::path root_;
};

/// Hand-built zstd frames (RFC 8878): an 8-byte frame content size that may lie, a 128 KiB window (so blocks need
/// not fit the declared size), and raw or RLE blocks.
class ZstdFrameBuilder {
 public:
  static constexpr uint64_t kMaxBlock = 128 * 1024;

  explicit ZstdFrameBuilder(uint64_t declared_size) {
    frame_ = le_bytes(0xFD2FB528u, 4);
    frame_ += static_cast<char>(0xC0);  // FCS field of 8 bytes, windowed (not single segment), no checksum
    frame_ += static_cast<char>(0x38);  // window 2^17
    frame_ += le_bytes(declared_size, 8);
  }
  /// Raw blocks carrying `bytes` verbatim: a byte flipped in them flips exactly that byte of the content.
  ZstdFrameBuilder& raw(std::span<const uint8_t> bytes) {
    for (uint64_t at = 0; at < bytes.size(); at += kMaxBlock) {
      const uint64_t n = std::min<uint64_t>(kMaxBlock, bytes.size() - at);
      blocks_.push_back(le_bytes(n << 3, 3) + std::string(reinterpret_cast<const char*>(bytes.data() + at), n));
    }
    return *this;
  }
  /// RLE blocks: `count` copies of `byte` for 4 bytes per 128 KiB, the shape of a decompression bomb.
  ZstdFrameBuilder& rle(uint8_t byte, uint64_t count) {
    for (uint64_t at = 0; at < count; at += kMaxBlock) {
      const uint64_t n = std::min<uint64_t>(kMaxBlock, count - at);
      blocks_.push_back(le_bytes(n << 3 | 1u << 1, 3) + static_cast<char>(byte));
    }
    return *this;
  }
  std::vector<uint8_t> finish() const {
    std::string out = frame_;
    for (size_t i = 0; i < blocks_.size(); ++i) {
      std::string block = blocks_[i];
      if (i + 1 == blocks_.size()) block[0] = static_cast<char>(block[0] | 1);  // Last_Block
      out += block;
    }
    return {out.begin(), out.end()};
  }
  /// Offset in finish()'s output of content byte `k` of a frame made of raw blocks only.
  static uint64_t raw_offset(uint64_t k) { return 14 + (k / kMaxBlock + 1) * 3 + k; }

 private:
  std::string frame_;
  std::vector<std::string> blocks_;
};

}  // namespace wsb::test
