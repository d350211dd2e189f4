// Fuzzes the whole-file safetensors reader (SafetensorsFile): the 8-byte length prefix, its limit and EOF checks,
// the header parser, and the rule that the entries end exactly at EOF. Input: the file's bytes, served from a
// memfd so the production open/fstat/mmap path runs unchanged. A refusal must be Error(Format) or, for a file
// shorter than it declares, Error(Truncated); an accepted file must hand out only spans inside itself.
#include <cstring>
#include <memory>

#include "fuzz/fuzz_support.hpp"
#include "models/checkpoint/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static wsb::fuzz::MemFile file;
  file.assign(data, size);
  using wsb::fuzz::require;
  std::unique_ptr<wsb::SafetensorsFile> st;
  if (!wsb::fuzz::only_documented_errors({wsb::ErrorKind::Format, wsb::ErrorKind::Truncated},
                                         [&] { st = std::make_unique<wsb::SafetensorsFile>(file.path()); })) {
    return 0;
  }
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = header_length << 8 | data[i];
  require(st->data_start() == 8 + header_length, "data_start differs from the length prefix");
  uint64_t total = 0;
  for (const wsb::SafetensorsEntry& entry : st->entries()) {
    require(st->find(entry.name) == &entry, "find() misses entry '" + entry.name + "'");
    std::span<const uint8_t> bytes = st->data(entry);
    require(bytes.size() == entry.bytes(), "data() span size differs from the entry");
    if (!bytes.empty()) {
      // The mapping holds a copy of the input: the span must be the same bytes at the same offset.
      require(std::memcmp(bytes.data(), data + st->data_start() + entry.begin, bytes.size()) == 0,
              "data() of '" + entry.name + "' is not the file's bytes");
    }
    total += entry.bytes();
  }
  require(st->data_start() + total == size, "accepted file whose tensors do not end at EOF");
  return 0;
}
