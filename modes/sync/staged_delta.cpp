#include "modes/sync/staged_delta.hpp"

#include <fmt/format.h>

#include <cstring>

#include "core/errors.hpp"

namespace wsb {
namespace {

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

Error bad_pack(std::span<const uint8_t> pack, const std::string& why) {
  return Error(ErrorKind::Mismatch, fmt::format("staged delta pack of {} bytes: {}", pack.size(), why));
}

}  // namespace

PackCounts pack_counts(std::span<const uint8_t> pack) {
  if (pack.size() < kPackHeaderBytes) throw bad_pack(pack, "shorter than its header");
  PackCounts c{load64(pack.data()), load64(pack.data() + 8)};
  const uint64_t room = pack.size() - kPackHeaderBytes;
  if (c.segments > room / kPackSegmentBytes || c.slots > (room - kPackSegmentBytes * c.segments) / 8 ||
      pack_bytes(c.segments, c.slots) != pack.size()) {
    throw bad_pack(pack, fmt::format("{} segments and {} entry slots do not fill it", c.segments, c.slots));
  }
  return c;
}

void apply_pack_on_host(std::span<const uint8_t> pack) {
  const PackCounts c = pack_counts(pack);
  const uint8_t* slots = pack.data() + kPackHeaderBytes;
  const uint8_t* table = slots + 8 * c.slots;
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 checks everything, pass 1 writes
    for (uint64_t s = 0; s < c.segments; ++s) {
      const uint8_t* seg = table + kPackSegmentBytes * s;
      auto* base = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(load64(seg)));
      const uint64_t first = load64(seg + 8), count = load64(seg + 16), bytes = load64(seg + 24);
      if (pass == 0 && (first > c.slots || count > c.slots - first || count > kSegmentEntries)) {
        throw bad_pack(pack, fmt::format("segment {}: {} entries from slot {} do not fit its {} slots (at most {} "
                                         "per segment)",
                                         s, count, first, c.slots, kSegmentEntries));
      }
      for (uint64_t e = first; e < first + count; ++e) {
        const uint64_t entry = load64(slots + 8 * e);
        const auto word = static_cast<uint32_t>(entry);
        const auto value = static_cast<uint32_t>(entry >> 32);
        if (pass == 0 && 4ull * word + 4 > bytes) {
          throw bad_pack(pack, fmt::format("segment {}: word {} beyond its {} bytes", s, word, bytes));
        }
        if (pass == 1) std::memcpy(base + 4ull * word, &value, 4);
      }
    }
  }
}

}  // namespace wsb
