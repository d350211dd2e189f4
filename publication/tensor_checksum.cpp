#include "publication/tensor_checksum.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.hpp"

namespace wsb {

namespace {
constexpr uint64_t kRangeGranule = uint64_t{1} << 20;
}  // namespace

size_t checksum_range_count(uint64_t size, uint64_t range_bytes) {
  if (range_bytes == 0 || size <= range_bytes) return 1;
  return static_cast<size_t>((size + range_bytes - 1) / range_bytes);
}

std::string checksum_range_bytes_problem(uint64_t range_bytes) {
  if (range_bytes % kRangeGranule == 0) return "";
  return fmt::format("must be 0 (one xxh3-128 per tensor) or a multiple of 1 MiB (1048576), got {}", range_bytes);
}

bool is_xxh3_128_ranges_hex(std::string_view text) {
  if (text.empty() || text.size() % kXxh3HexChars != 0) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

void ChecksumBuilder::update(std::span<const uint8_t> bytes) {
  if (range_bytes_ == 0) {
    hasher_.update(bytes);
    return;
  }
  while (!bytes.empty()) {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(range_bytes_ - in_range_, bytes.size()));
    hasher_.update(bytes.first(take));
    in_range_ += take;
    bytes = bytes.subspan(take);
    if (in_range_ == range_bytes_) {
      done_ += hasher_.hex();
      hasher_.reset();
      in_range_ = 0;
    }
  }
}

std::string ChecksumBuilder::text() const {
  // A partial last range, or a tensor without a byte (one range, the digest of nothing).
  if (range_bytes_ == 0 || in_range_ > 0 || done_.empty()) return done_ + hasher_.hex();
  return done_;
}

std::string tensor_checksum_text(std::span<const uint8_t> bytes, uint64_t range_bytes) {
  ChecksumBuilder builder(range_bytes);
  builder.update(bytes);
  return builder.text();
}

ExpectedChecksum::ExpectedChecksum(std::string text, uint64_t range_bytes, uint64_t size, std::string_view what)
    : text_(std::move(text)), range_bytes_(range_bytes), size_(size), count_(checksum_range_count(size, range_bytes)) {
  if (text_.size() != count_ * kXxh3HexChars) {
    throw Error(ErrorKind::Format,
                fmt::format("{}: checksum holds {} hex characters, {} bytes need {} xxh3-128 digest{} ({} "
                            "characters{})",
                            what, text_.size(), size, count_, count_ == 1 ? "" : "s", count_ * kXxh3HexChars,
                            range_bytes == 0 ? "" : fmt::format(", ranges of {} bytes", range_bytes)));
  }
}

uint64_t ExpectedChecksum::range_begin(size_t k) const { return range_bytes_ == 0 ? 0 : k * range_bytes_; }

uint64_t ExpectedChecksum::range_end(size_t k) const {
  return range_bytes_ == 0 ? size_ : std::min<uint64_t>(size_, (k + 1) * range_bytes_);
}

size_t ExpectedChecksum::range_at(uint64_t offset) const {
  if (size_ == 0) return 0;  // its one range, of no byte, begins (and ends) at 0
  if (offset >= size_) return count_;
  return range_bytes_ == 0 ? 0 : static_cast<size_t>(offset / range_bytes_);
}

RangeVerifier::RangeVerifier(const ExpectedChecksum& expected, Xxh3Hasher& hasher, size_t first)
    : expected_(expected), hasher_(hasher), range_(first), position_(expected.range_begin(first)) {
  hasher_.reset();
  // A tensor without bytes has one range, complete before any byte.
  if (range_ < expected_.range_count() && expected_.range_end(range_) == position_) close_range();
}

void RangeVerifier::update(std::span<const uint8_t> bytes) {
  while (!bytes.empty() && !failed_ && range_ < expected_.range_count()) {
    const uint64_t end = expected_.range_end(range_);
    const size_t take = static_cast<size_t>(std::min<uint64_t>(end - position_, bytes.size()));
    hasher_.update(bytes.first(take));
    position_ += take;
    bytes = bytes.subspan(take);
    if (position_ == end) close_range();
  }
}

void RangeVerifier::close_range() {
  std::string actual = hasher_.hex();
  if (actual != expected_.digest(range_)) {
    failed_ = true;
    mismatch_ = ChecksumMismatch{range_, expected_.range_begin(range_), expected_.range_end(range_), std::move(actual)};
    return;
  }
  ++range_;
  hasher_.reset();
}

void throw_checksum_mismatch(std::string_view tensor, std::string_view version, const ExpectedChecksum& expected,
                             const ChecksumMismatch& mismatch) {
  if (!expected.ranged()) {
    throw Error(ErrorKind::Checksum, fmt::format("tensor '{}': xxh3-128 of version {} is {}, publication says {}",
                                                 tensor, version, mismatch.actual, expected.text()));
  }
  throw Error(ErrorKind::Checksum,
              fmt::format("tensor '{}': xxh3-128 of version {} bytes [{}, {}) (range {} of {}) is {}, publication "
                          "says {}",
                          tensor, version, mismatch.from, mismatch.to, mismatch.range + 1, expected.range_count(),
                          mismatch.actual, expected.digest(mismatch.range)));
}

void RangeVerifier::require_verified_to(uint64_t end, std::string_view tensor, std::string_view version) const {
  if (failed_) throw_checksum_mismatch(tensor, version, expected_, mismatch_);
  if (position_ != end) {
    throw Error(ErrorKind::State, fmt::format("tensor '{}': checksum verified to byte {} of {}", tensor, position_, end));
  }
}

}  // namespace wsb
