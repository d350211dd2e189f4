#include "modes/sync/staged_delta.hpp"

#include <fmt/format.h>

#include <cstring>

#include "core/digest64.hpp"
#include "core/errors.hpp"

namespace wsb {
namespace {

constexpr uint64_t kHeaderBytes = 16;
constexpr uint64_t kSegmentBytes = 32;

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void store64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

}  // namespace

uint64_t diff_storage(std::span<const uint8_t> live, std::span<const uint8_t> next, uint64_t max_entries,
                      StorageDelta& out, uint64_t* changed) {
  if (live.size() != next.size() || live.size() % 4 != 0 || live.size() / 4 > UINT32_MAX) {
    throw Error(ErrorKind::Mismatch, fmt::format("staged delta of rank {} storage {}: {} live and {} new bytes (equal "
                                                 "sizes, a multiple of 4, below 16 GiB needed)",
                                                 out.rank, out.index, live.size(), next.size()));
  }
  out.storage_bytes = live.size();
  out.positions.clear();
  out.values.clear();
  uint64_t sum = 0;
  uint64_t count = 0;
  const size_t words64 = live.size() / 8;
  for (size_t i = 0; i < words64; ++i) {
    uint64_t a, b;
    std::memcpy(&a, live.data() + 8 * i, 8);
    std::memcpy(&b, next.data() + 8 * i, 8);
    sum += digest64_term(a, i);
    const uint64_t x = a ^ b;
    if (x == 0) continue;  // the common case: both halves unchanged
    for (uint32_t half = 0; half < 2; ++half) {
      if (((x >> (32 * half)) & 0xFFFFFFFFu) == 0) continue;
      if (++count <= max_entries) {
        out.positions.push_back(static_cast<uint32_t>(2 * i + half));
        out.values.push_back(static_cast<uint32_t>(b >> (32 * half)));
      }
    }
  }
  if (live.size() % 8 != 0) {  // one trailing 32-bit word
    uint32_t a, b;
    std::memcpy(&a, live.data() + 8 * words64, 4);
    std::memcpy(&b, next.data() + 8 * words64, 4);
    sum += digest64_term(a, words64);
    if (a != b && ++count <= max_entries) {
      out.positions.push_back(static_cast<uint32_t>(2 * words64));
      out.values.push_back(b);
    }
  }
  if (count > max_entries) {
    out.positions.clear();
    out.values.clear();
  }
  *changed = count;
  return digest64_close(sum, live.size());
}

uint64_t pack_bytes(std::span<const StorageDelta* const> deltas) {
  uint64_t bytes = kHeaderBytes;
  for (const StorageDelta* d : deltas) bytes += d->staged_bytes();
  return bytes;
}

uint64_t pack_deltas(std::span<const StorageDelta* const> deltas, std::span<const uint64_t> addresses,
                     std::span<uint8_t> out) {
  if (addresses.size() != deltas.size() || out.size() != pack_bytes(deltas)) {
    throw Error(ErrorKind::Mismatch, fmt::format("staged delta pack: {} storages, {} addresses, {} bytes for a pack of "
                                                 "{}",
                                                 deltas.size(), addresses.size(), out.size(), pack_bytes(deltas)));
  }
  uint64_t total = 0;
  for (const StorageDelta* d : deltas) total += d->positions.size();
  uint8_t* p = out.data();
  store64(p, deltas.size());
  store64(p + 8, total);
  uint8_t* table = p + kHeaderBytes;
  uint8_t* positions = table + kSegmentBytes * deltas.size();
  uint8_t* values = positions + 4 * total;
  uint64_t first = 0;
  for (size_t i = 0; i < deltas.size(); ++i) {
    const StorageDelta& d = *deltas[i];
    store64(table + kSegmentBytes * i, addresses[i]);
    store64(table + kSegmentBytes * i + 8, first);
    store64(table + kSegmentBytes * i + 16, d.positions.size());
    store64(table + kSegmentBytes * i + 24, d.storage_bytes);
    // An unchanged storage has no positions: memcpy from the empty vectors' null data() is undefined even for
    // 0 bytes (UBSan reports it).
    if (!d.positions.empty()) std::memcpy(positions + 4 * first, d.positions.data(), 4 * d.positions.size());
    if (!d.values.empty()) std::memcpy(values + 4 * first, d.values.data(), 4 * d.values.size());
    first += d.positions.size();
  }
  return digest64(out);
}

void apply_pack_on_host(std::span<const uint8_t> pack) {
  auto bad = [&](const std::string& why) {
    return Error(ErrorKind::Mismatch, fmt::format("staged delta pack of {} bytes: {}", pack.size(), why));
  };
  if (pack.size() < kHeaderBytes) throw bad("shorter than its header");
  const uint64_t segments = load64(pack.data());
  const uint64_t total = load64(pack.data() + 8);
  if (segments > (pack.size() - kHeaderBytes) / kSegmentBytes ||
      kHeaderBytes + kSegmentBytes * segments + 8 * total != pack.size()) {
    throw bad(fmt::format("{} segments and {} entries do not fill it", segments, total));
  }
  const uint8_t* table = pack.data() + kHeaderBytes;
  const uint8_t* positions = table + kSegmentBytes * segments;
  const uint8_t* values = positions + 4 * total;
  for (uint64_t s = 0; s < segments; ++s) {
    auto* base = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(load64(table + kSegmentBytes * s)));
    const uint64_t first = load64(table + kSegmentBytes * s + 8);
    const uint64_t count = load64(table + kSegmentBytes * s + 16);
    const uint64_t bytes = load64(table + kSegmentBytes * s + 24);
    if (first > total || count > total - first) throw bad(fmt::format("segment {} entries beyond the pack", s));
    for (uint64_t e = first; e < first + count; ++e) {
      uint32_t word, value;
      std::memcpy(&word, positions + 4 * e, 4);
      std::memcpy(&value, values + 4 * e, 4);
      if (4ull * word + 4 > bytes) throw bad(fmt::format("segment {}: word {} beyond its {} bytes", s, word, bytes));
      std::memcpy(base + 4ull * word, &value, 4);
    }
  }
}

}  // namespace wsb
