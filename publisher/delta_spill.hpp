#pragma once
// Internal to the publisher: one version's DELTA payloads of one encoding, parked in an unnamed temporary file until
// the version is complete. A safetensors header lists every payload's length before the data, so a delta shard
// cannot be written while its payloads are still being compressed; spilling keeps them out of memory meanwhile.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/tensor_spec.hpp"
#include "publication/publication.hpp"

namespace wsb {

class DeltaSpill {
 public:
  /// An unnamed file in `dir` (O_TMPFILE; where the filesystem lacks it, a hidden file unlinked at once): it never
  /// shows in the folder and vanishes when closed. Throws Error(Io) naming `dir`.
  explicit DeltaSpill(const std::filesystem::path& dir);
  ~DeltaSpill();
  DeltaSpill(const DeltaSpill&) = delete;
  DeltaSpill& operator=(const DeltaSpill&) = delete;

  /// Parks the payload of tensor `name`, with the checksum of its target canonical bytes. Throws Error(Io).
  void add(const std::string& name, std::span<const uint8_t> payload, std::string checksum);
  /// Bytes of all payloads parked.
  uint64_t payload_bytes() const { return size_; }
  /// Writes the payloads, in the order added, as streamed shards of `writer` (each a 1-D U8 tensor, shards split
  /// at max_shard_bytes of payload), reading them back in bounded chunks. Throws Error(Io), the writer's errors.
  void write_shards(PublicationWriter& writer, uint64_t max_shard_bytes) const;

 private:
  struct Item {
    std::string name;
    uint64_t offset = 0;
    uint64_t bytes = 0;
    std::string checksum;
  };
  std::filesystem::path dir_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::vector<Item> items_;
};

}  // namespace wsb
