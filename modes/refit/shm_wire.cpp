#include "modes/refit/shm_wire.hpp"

#include <cstring>

#include <fmt/format.h>

#include "modes/refit/refit_error.hpp"

namespace wsb::refit {
namespace {

// Fixed-size part of one encoded entry: name length, dtype, shape rank, offset, bytes.
constexpr uint64_t kFixedEntryBytes = 4 + 1 + 4 + 8 + 8;

class Writer {
 public:
  explicit Writer(std::span<uint8_t> out) : out_(out) {}
  void put(const void* data, uint64_t n) {
    std::memcpy(out_.data() + at_, data, n);
    at_ += n;
  }
  template <class T>
  void put(T value) {
    put(&value, sizeof value);
  }
  uint64_t written() const { return at_; }

 private:
  std::span<uint8_t> out_;
  uint64_t at_ = 0;
};

class Reader {
 public:
  Reader(int rank, std::span<const uint8_t> in) : rank_(rank), in_(in) {}
  void get(void* data, uint64_t n) {
    if (n > in_.size() - at_) {
      fail_rank(ErrorKind::Format, rank_,
                fmt::format("corrupt slot header: entry data ends at byte {} of {}", at_, in_.size()));
    }
    std::memcpy(data, in_.data() + at_, n);
    at_ += n;
  }
  template <class T>
  T get() {
    T value{};
    get(&value, sizeof value);
    return value;
  }
  uint64_t left() const { return in_.size() - at_; }

 private:
  int rank_;
  std::span<const uint8_t> in_;
  uint64_t at_ = 0;
};

}  // namespace

uint64_t encoded_entry_bytes(const WireEntry& entry) {
  return kFixedEntryBytes + entry.spec.name.size() + 8 * entry.spec.shape.size();
}

uint64_t encode_entries(std::span<const WireEntry> entries, std::span<uint8_t> out) {
  Writer w(out);
  for (const auto& e : entries) {
    w.put(static_cast<uint32_t>(e.spec.name.size()));
    w.put(e.spec.name.data(), e.spec.name.size());
    w.put(static_cast<uint8_t>(e.spec.dtype));
    w.put(static_cast<uint32_t>(e.spec.shape.size()));
    for (int64_t d : e.spec.shape) w.put(d);
    w.put(e.offset);
    w.put(e.bytes);
  }
  return w.written();
}

std::vector<WireEntry> decode_entries(int rank, std::span<const uint8_t> in, uint64_t count) {
  // Every entry takes at least kFixedEntryBytes, so a count beyond that is corrupt (and must not size a vector).
  if (count > in.size() / kFixedEntryBytes) {
    fail_rank(ErrorKind::Format, rank,
              fmt::format("corrupt slot header: {} entries cannot fit in {} B", count, in.size()));
  }
  Reader r(rank, in);
  std::vector<WireEntry> entries(count);
  for (auto& e : entries) {
    const auto name_bytes = r.get<uint32_t>();
    if (name_bytes > r.left()) {
      fail_rank(ErrorKind::Format, rank, fmt::format("corrupt slot header: name of {} B in a {} B area", name_bytes,
                                                     in.size()));
    }
    e.spec.name.resize(name_bytes);
    r.get(e.spec.name.data(), name_bytes);
    const auto dtype = r.get<uint8_t>();
    if (dtype > static_cast<uint8_t>(DType::F8_E8M0)) {
      fail_rank(ErrorKind::Format, rank,
                fmt::format("corrupt slot header: weight '{}' has dtype code {}", e.spec.name, dtype));
    }
    e.spec.dtype = static_cast<DType>(dtype);
    const auto dims = r.get<uint32_t>();
    if (dims > r.left() / 8) {
      fail_rank(ErrorKind::Format, rank,
                fmt::format("corrupt slot header: weight '{}' has a shape of {} dimensions", e.spec.name, dims));
    }
    e.spec.shape.resize(dims);
    for (auto& d : e.spec.shape) d = r.get<int64_t>();
    e.offset = r.get<uint64_t>();
    e.bytes = r.get<uint64_t>();
  }
  if (r.left() != 0) {
    fail_rank(ErrorKind::Format, rank,
              fmt::format("corrupt slot header: {} B left after {} entries", r.left(), count));
  }
  return entries;
}

}  // namespace wsb::refit
