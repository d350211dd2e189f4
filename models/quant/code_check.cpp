#include "models/quant/code_check.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/cpu_features.hpp"
#include "core/errors.hpp"

namespace wsb {
namespace {

static_assert(std::endian::native == std::endian::little, "lanes of a loaded word must follow element order");

/// Word-parallel test of up to 8 codes at once (SWAR): for lanes of `lane_bytes`, a lane is invalid when its bits
/// under `mask` are all ones. Adding the lowest mask bit then carries into the lane's top bit, which lies above
/// the mask, and no carry crosses a lane. E8M0 also needs the top bit itself set (0xFF), hence `and_word`.
struct LaneRule {
  uint64_t mask = 0;
  uint64_t add = 0;
  uint64_t top = 0;
  bool and_word = false;
  size_t lane_bytes = 1;
  const char* meaning = "";

  uint64_t invalid_lanes(uint64_t word) const {
    const uint64_t keep = and_word ? word : ~uint64_t{0};
    return ((word & mask) + add) & top & keep;
  }
};

constexpr uint64_t rep8(uint64_t byte) { return byte * 0x0101010101010101ull; }
constexpr uint64_t rep16(uint64_t half) { return half * 0x0001000100010001ull; }
constexpr uint64_t rep32(uint64_t word) { return word * 0x0000000100000001ull; }

std::optional<LaneRule> lane_rule(const TensorSpec& spec, const QuantRole& role) {
  switch (role.format) {
    case CodeFormat::E4M3:  // S.1111.111 (OFP8 spec: E4M3 has NaN only, no infinity)
      return LaneRule{rep8(0x7F), rep8(0x01), rep8(0x80), false, 1, "which is NaN"};
    case CodeFormat::E5M2:  // S.11111.xx (OFP8 spec: infinity and NaN, as IEEE)
      return LaneRule{rep8(0x7C), rep8(0x04), rep8(0x80), false, 1, "which is NaN or infinity"};
    case CodeFormat::E8M0:  // 0xFF (MX spec 5.4.1)
      return LaneRule{rep8(0x7F), rep8(0x01), rep8(0x80), true, 1, "which is NaN (an E8M0 scale of 0xFF)"};
    case CodeFormat::Ieee:
      switch (spec.dtype) {
        case DType::BF16:
          return LaneRule{rep16(0x7F80), rep16(0x0080), rep16(0x8000), false, 2, "which is NaN or infinity"};
        case DType::F16:
          return LaneRule{rep16(0x7C00), rep16(0x0400), rep16(0x8000), false, 2, "which is NaN or infinity"};
        case DType::F32:
          return LaneRule{rep32(0x7F800000), rep32(0x00800000), rep32(0x80000000), false, 4,
                          "which is NaN or infinity"};
        case DType::F64:
          return LaneRule{0x7FF0000000000000ull, 0x0010000000000000ull, 0x8000000000000000ull, false, 8,
                          "which is NaN or infinity"};
        default:
          return std::nullopt;
      }
    case CodeFormat::None:
    case CodeFormat::E2M1x2:
      return std::nullopt;
  }
  return std::nullopt;
}

uint64_t load_word(const uint8_t* p) {
  uint64_t word;
  std::memcpy(&word, p, 8);  // fixed size: one unaligned load
  return word;
}

/// OR of invalid_lanes over the whole words of [begin, end), branch-free so the common (valid) case runs at
/// memory speed; the rule's fields are hoisted into locals for the compiler.
uint64_t any_invalid_words(const LaneRule& rule, const uint8_t* begin, const uint8_t* end) {
  const uint64_t mask = rule.mask, add = rule.add, top = rule.top;
  const uint64_t keep_all = rule.and_word ? 0 : ~uint64_t{0};
  auto lanes = [&](const uint8_t* p) {
    const uint64_t word = load_word(p);
    return ((word & mask) + add) & top & (word | keep_all);
  };
  const size_t n = static_cast<size_t>(end - begin);
  uint64_t a = 0, b = 0, c = 0, d = 0;  // independent chains: four words per iteration
  size_t at = 0;
  for (; at + 32 <= n; at += 32) {
    a |= lanes(begin + at);
    b |= lanes(begin + at + 8);
    c |= lanes(begin + at + 16);
    d |= lanes(begin + at + 24);
  }
  for (; at + 8 <= n; at += 8) a |= lanes(begin + at);
  return a | b | c | d;
}

#ifdef WSBENCH_AVX512_DISPATCH
using Lanes = uint64_t __attribute__((vector_size(64)));

/// The same, eight words per step: the scalar form spends about six instructions per 8-byte word, which bounds a
/// fold's code scan (it runs on every byte of every BF16, FP8 and E8M0 tensor) at about 10 GB/s per core. A lane
/// never carries into the next (the mask leaves its top bit clear), so 64-bit adds serve every lane width.
__attribute__((target("avx512f"))) uint64_t any_invalid_avx512(const LaneRule& rule, const uint8_t* begin,
                                                                const uint8_t* end) {
  const size_t n = static_cast<size_t>(end - begin);
  const uint64_t keep_all = rule.and_word ? 0 : ~uint64_t{0};
  Lanes acc = {};
  size_t at = 0;
  for (; at + 64 <= n; at += 64) {
    Lanes word;
    std::memcpy(&word, begin + at, sizeof word);
    acc |= ((word & rule.mask) + rule.add) & rule.top & (word | keep_all);
  }
  uint64_t any = 0;
  for (int k = 0; k < 8; ++k) any |= acc[k];
  return any | any_invalid_words(rule, begin + at, end);
}

uint64_t any_invalid(const LaneRule& rule, const uint8_t* begin, const uint8_t* end) {
  return cpu_has_avx512() ? any_invalid_avx512(rule, begin, end) : any_invalid_words(rule, begin, end);
}
#else
uint64_t any_invalid(const LaneRule& rule, const uint8_t* begin, const uint8_t* end) {
  return any_invalid_words(rule, begin, end);
}
#endif

std::string coordinates(const Shape& shape, uint64_t flat) {
  if (shape.size() < 2) return "";
  std::string out = "]";
  for (size_t d = shape.size(); d-- > 0;) {
    const uint64_t extent = static_cast<uint64_t>(shape[d]);
    out.insert(0, fmt::format("{}{}", d == 0 ? "" : ", ", flat % extent));
    flat /= extent;
  }
  return " [" + out;
}

}  // namespace

CodeScanner::CodeScanner(const TensorSpec& spec) {
  const std::optional<LaneRule> rule = lane_rule(spec, quant_role(spec));
  if (!rule) return;
  active_ = true;
  and_word_ = rule->and_word;
  mask_ = rule->mask;
  add_ = rule->add;
  top_ = rule->top;
}

void CodeScanner::advance(std::span<const uint8_t> tensor, size_t upto) {
  if (!active_ || found_) return;
  const LaneRule rule{mask_, add_, top_, and_word_, 1, ""};
  const size_t whole = upto / 8 * 8;  // a partial word waits for the next call (or the tensor's end)
  if (whole > cursor_) {
    found_ = any_invalid(rule, tensor.data() + cursor_, tensor.data() + whole) != 0;
    cursor_ = whole;
  }
  if (upto == tensor.size() && cursor_ < upto && !found_) {
    uint8_t tail[8] = {};  // zero lanes are never invalid
    std::memcpy(tail, tensor.data() + cursor_, upto - cursor_);
    found_ = rule.invalid_lanes(load_word(tail)) != 0;
    cursor_ = upto;
  }
}

std::optional<InvalidCode> find_invalid_code(const TensorSpec& spec, std::span<const uint8_t> bytes) {
  if (bytes.size() != spec.bytes()) {
    throw Error(ErrorKind::Mismatch, fmt::format("tensor '{}' ({} {}): {} bytes to check, expected {}", spec.name,
                                                 dtype_name(spec.dtype), shape_string(spec.shape), bytes.size(),
                                                 spec.bytes()));
  }
  const std::optional<LaneRule> rule = lane_rule(spec, quant_role(spec));
  if (!rule) return std::nullopt;
  // Whole 64-bit words are scanned block by block; only a block with a hit is examined word by word. A short
  // tail is copied into a zero word: zero lanes are never invalid.
  constexpr size_t kBlock = 4096;
  const size_t size = bytes.size();
  const size_t whole = size / 8 * 8;
  uint8_t tail[8] = {};
  if (size > whole) std::memcpy(tail, bytes.data() + whole, size - whole);
  auto word_at = [&](size_t at) { return at < whole ? load_word(bytes.data() + at) : load_word(tail); };
  std::optional<InvalidCode> found;
  for (size_t begin = 0; begin < size; begin += kBlock) {
    const size_t end = begin + kBlock < size ? begin + kBlock : size;
    uint64_t any = any_invalid(*rule, bytes.data() + begin, bytes.data() + std::min(end, whole));
    if (end > whole) any |= rule->invalid_lanes(load_word(tail));
    if (any == 0) continue;
    for (size_t at = begin; at < end; at += 8) {
      const uint64_t lanes = rule->invalid_lanes(word_at(at));
      if (lanes == 0) continue;
      if (!found) {
        const size_t lane_byte = static_cast<size_t>(std::countr_zero(lanes)) / 8 / rule->lane_bytes * rule->lane_bytes;
        uint64_t code = 0;
        std::memcpy(&code, at < whole ? bytes.data() + at + lane_byte : tail + lane_byte, rule->lane_bytes);
        found = InvalidCode{(at + lane_byte) / rule->lane_bytes, code, 0};
      }
      found->count += static_cast<uint64_t>(std::popcount(lanes));
    }
  }
  return found;
}

void check_codes(const TensorSpec& spec, std::span<const uint8_t> bytes, std::string_view context) {
  const std::optional<InvalidCode> bad = find_invalid_code(spec, bytes);
  if (!bad) return;
  const QuantRole role = quant_role(spec);
  const std::optional<LaneRule> rule = lane_rule(spec, role);
  throw Error(ErrorKind::Format,
              fmt::format("{}: tensor '{}' ({} {}): element {}{} holds {} code 0x{:0{}X}, {} ({} invalid code{} in "
                          "the tensor)",
                          context, spec.name, dtype_name(spec.dtype), shape_string(spec.shape), bad->element,
                          coordinates(spec.shape, bad->element),
                          role.format == CodeFormat::Ieee ? dtype_name(spec.dtype) : code_format_name(role.format),
                          bad->code, 2 * rule->lane_bytes, rule->meaning, bad->count, bad->count == 1 ? "" : "s"));
}

}  // namespace wsb
