// check_codes / find_invalid_code: NaN and infinity codes of every code format are found at the right element,
// counted, and reported with the tensor, dtype, shape, element coordinates and code; valid codes pass.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "checkpoint_test_util.hpp"
#include "models/quant/code_check.hpp"
#include "tests/support/cpu_forms.hpp"

namespace wsb {
namespace {

WSBENCH_BOTH_CPU_FORMS(QuantCodeCheckForms);

using Bytes = std::vector<uint8_t>;
using test::expect_error;

void put16(Bytes& b, size_t i, uint16_t v) {
  b[2 * i] = static_cast<uint8_t>(v);
  b[2 * i + 1] = static_cast<uint8_t>(v >> 8);
}

void put32(Bytes& b, size_t i, uint32_t v) { std::memcpy(&b[4 * i], &v, 4); }

TEST(QuantCodeCheck, E4M3NanNamedWithCoordinates) {
  const TensorSpec spec{"model.layers.0.mlp.down_proj.weight", DType::F8_E4M3, {4, 8}};
  Bytes b(spec.bytes());
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 37 % 256);  // every non-NaN code mix
  for (auto& x : b) {
    if ((x & 0x7F) == 0x7F) x = 0x7E;
  }
  b[5] = 0xFE;  // -448 and 0x7E are valid
  EXPECT_FALSE(find_invalid_code(spec, b));
  EXPECT_NO_THROW(check_codes(spec, b, "prepare 000001"));
  b[9] = 0x7F;
  b[30] = 0xFF;
  auto bad = find_invalid_code(spec, b);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->element, 9u);
  EXPECT_EQ(bad->code, 0x7Fu);
  EXPECT_EQ(bad->count, 2u);
  expect_error([&] { check_codes(spec, b, "prepare 000001"); }, ErrorKind::Format,
               {"prepare 000001: tensor 'model.layers.0.mlp.down_proj.weight' (F8_E4M3 [4, 8]): element 9 [1, 1] "
                "holds E4M3 code 0x7F, which is NaN (2 invalid codes in the tensor)"});
}

TEST(QuantCodeCheck, E8M0ScalesRejectFF) {
  const TensorSpec u8{"model.layers.0.mlp.experts.gate_up_proj_scales", DType::U8, {2, 3, 5}};
  Bytes b(u8.bytes(), 0xFE);
  EXPECT_FALSE(find_invalid_code(u8, b));
  b[29] = 0xFF;  // last element, in the short tail word
  expect_error([&] { check_codes(u8, b, "ctx"); }, ErrorKind::Format,
               {"tensor 'model.layers.0.mlp.experts.gate_up_proj_scales' (U8 [2, 3, 5]): element 29 [1, 2, 4] holds "
                "E8M0 code 0xFF, which is NaN (an E8M0 scale of 0xFF) (1 invalid code in the tensor)"});
  const TensorSpec f8{"w.scale", DType::F8_E8M0, {3}};
  Bytes c{0x00, 0xFF, 0x7F};
  expect_error([&] { check_codes(f8, c, "ctx"); }, ErrorKind::Format,
               {"'w.scale' (F8_E8M0 [3]): element 1 holds E8M0 code 0xFF"});
}

TEST(QuantCodeCheck, PackedE2M1AndOpaqueBytesHaveNoInvalidCode) {
  const TensorSpec packed{"model.layers.1.mlp.experts.0.up_proj.weight", DType::U8, {4, 16}};
  const TensorSpec blocks{"model.layers.0.mlp.experts.down_proj_blocks", DType::U8, {1, 2, 2, 16}};
  const TensorSpec ints{"position_ids", DType::I64, {8}};
  for (const TensorSpec& spec : {packed, blocks, ints}) {
    Bytes b(spec.bytes(), 0xFF);
    EXPECT_FALSE(find_invalid_code(spec, b)) << spec.name;
    EXPECT_NO_THROW(check_codes(spec, b, "ctx")) << spec.name;
  }
}

TEST(QuantCodeCheck, IeeeNanAndInfinity) {
  // BF16: 0x7F80 = +inf, 0xFFC0 = -NaN; 0x7F7F (largest finite) and 0xFF7F are valid.
  const TensorSpec bf16{"model.embed_tokens.weight", DType::BF16, {3, 700}};  // > 4096 bytes: two blocks
  Bytes b(bf16.bytes());
  for (size_t i = 0; i < bf16.numel(); ++i) put16(b, i, i % 2 ? 0x7F7F : 0xFF7F);
  EXPECT_FALSE(find_invalid_code(bf16, b));
  put16(b, 2099, 0xFFC0);
  put16(b, 2050, 0x7F80);
  expect_error([&] { check_codes(bf16, b, "disk prepare"); }, ErrorKind::Format,
               {"disk prepare: tensor 'model.embed_tokens.weight' (BF16 [3, 700]): element 2050 [2, 650] holds BF16 "
                "code 0x7F80, which is NaN or infinity (2 invalid codes in the tensor)"});
  // F16: 0x7C00 = +inf; 0x7BFF = 65504 is valid.
  const TensorSpec f16{"h", DType::F16, {3}};
  Bytes h(6);
  put16(h, 0, 0x7BFF);
  put16(h, 1, 0xFC00);
  put16(h, 2, 0x0001);
  expect_error([&] { check_codes(f16, h, "c"); }, ErrorKind::Format, {"element 1 holds F16 code 0xFC00"});
  // F32 scalar NaN (an input_scale).
  const TensorSpec f32{"model.layers.1.mlp.experts.0.down_proj.input_scale", DType::F32, {}};
  Bytes s(4);
  put32(s, 0, 0x7FC00000u);
  expect_error([&] { check_codes(f32, s, "c"); }, ErrorKind::Format,
               {"'model.layers.1.mlp.experts.0.down_proj.input_scale' (F32 []): element 0 holds F32 code 0x7FC00000"});
  put32(s, 0, 0x7F7FFFFFu);
  EXPECT_NO_THROW(check_codes(f32, s, "c"));
  const TensorSpec f64{"d", DType::F64, {2}};
  Bytes d(16, 0);
  d[15] = 0x7F;
  d[14] = 0xF0;  // element 1 = +inf
  auto bad = find_invalid_code(f64, d);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->element, 1u);
  EXPECT_EQ(bad->code, 0x7FF0000000000000ull);
  // E5M2: all-ones exponent.
  const TensorSpec e5{"e", DType::F8_E5M2, {2}};
  Bytes e{0x7B, 0xFD};
  expect_error([&] { check_codes(e5, e, "c"); }, ErrorKind::Format, {"element 1 holds E5M2 code 0xFD"});
}

TEST(QuantCodeCheck, SizeMismatch) {
  const TensorSpec spec{"model.layers.0.mlp.up_proj.weight", DType::F8_E4M3, {4, 8}};
  Bytes b(31);
  expect_error([&] { check_codes(spec, b, "c"); }, ErrorKind::Mismatch,
               {"tensor 'model.layers.0.mlp.up_proj.weight' (F8_E4M3 [4, 8]): 31 bytes to check, expected 32"});
}

// An E8M0 scale is invalid only as 0xFF: 0x7F (2^0) shares its low seven bits and is valid, in every lane of a
// tensor long enough to be scanned 64 bytes at a time as well as in its tail words.
TEST_P(QuantCodeCheckForms, E8M0SevenLowOnesAreValidOnlyFFIsNot) {
  const TensorSpec u8{"model.layers.0.mlp.experts.down_proj_scales", DType::U8, {300}};
  Bytes b(u8.bytes());
  for (size_t i = 0; i < b.size(); ++i) b[i] = i % 3 == 0 ? 0xFE : 0x7F;
  ASSERT_FALSE(find_invalid_code(u8, b));
  CodeScanner clean(u8);  // the fold's scan only suspects; a suspect tensor costs a whole second scan
  clean.advance(b, b.size());
  EXPECT_FALSE(clean.found());
  for (size_t i = 0; i < b.size(); ++i) {
    const uint8_t keep = b[i];
    b[i] = 0xFF;
    CodeScanner scanner(u8);
    scanner.advance(b, b.size());
    EXPECT_TRUE(scanner.found()) << "element " << i;
    const auto found = find_invalid_code(u8, b);
    ASSERT_TRUE(found) << "element " << i;
    EXPECT_EQ(found->element, i);
    EXPECT_EQ(found->count, 1u);
    b[i] = keep;
  }
}

/// Scalar reference: is element i of `spec` an invalid code?
bool naive_invalid(DType dtype, const Bytes& b, size_t i) {
  switch (dtype) {
    case DType::F8_E4M3:
      return (b[i] & 0x7F) == 0x7F;
    case DType::U8:  // named *_scales: E8M0
      return b[i] == 0xFF;
    case DType::BF16:
      return ((b[2 * i] | b[2 * i + 1] << 8) & 0x7F80) == 0x7F80;
    case DType::F16:
      return ((b[2 * i] | b[2 * i + 1] << 8) & 0x7C00) == 0x7C00;
    default: {  // F32
      uint32_t v;
      std::memcpy(&v, &b[4 * i], 4);
      return (v & 0x7F800000u) == 0x7F800000u;
    }
  }
}

/// Random codes of 1-D `spec` from `rng` (one draw per byte), each element's top byte with bit 0x40 cleared, so no
/// element is NaN, infinity or an E8M0 0xFF.
Bytes valid_random_codes(const TensorSpec& spec, std::mt19937_64& rng) {
  Bytes b(spec.bytes());
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  const size_t width = dtype_size(spec.dtype);
  for (int64_t i = 0; i < spec.shape[0]; ++i) {
    uint8_t& high = b[static_cast<size_t>(i) * width + width - 1];
    high = static_cast<uint8_t>(high & ~0x40);
  }
  return b;
}

TEST_P(QuantCodeCheckForms, WordScanAgreesWithAScalarScan) {
  std::mt19937_64 rng(42);
  for (DType dtype : {DType::F8_E4M3, DType::U8, DType::BF16, DType::F16, DType::F32}) {
    for (int trial = 0; trial < 40; ++trial) {
      const int64_t n = static_cast<int64_t>(rng() % 9000) + 1;  // odd sizes, one to several 4 KiB blocks
      const TensorSpec spec{"t_scales", dtype, {n}};
      // Mostly valid random codes, then a few invalid ones at random elements.
      Bytes b = valid_random_codes(spec, rng);
      const size_t width = dtype_size(dtype);
      const int bad = static_cast<int>(rng() % 4);
      for (int k = 0; k < bad; ++k) {
        const size_t i = rng() % static_cast<size_t>(n);
        for (size_t j = 0; j < width; ++j) b[i * width + j] = 0xFF;
      }
      uint64_t count = 0;
      std::optional<uint64_t> first;
      for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
        if (naive_invalid(dtype, b, i)) {
          ++count;
          if (!first) first = i;
        }
      }
      auto found = find_invalid_code(spec, b);
      ASSERT_EQ(found.has_value(), first.has_value()) << dtype_name(dtype) << " n " << n;
      if (found) {
        EXPECT_EQ(found->element, *first);
        EXPECT_EQ(found->count, count);
      }
    }
  }
}

// The streamed form (fused into the delta fold) must flag exactly the tensors the whole-tensor scan flags, for any
// split into pieces, including pieces that end mid-word and a tail shorter than a word.
TEST_P(QuantCodeCheckForms, CodeScannerAgreesWithTheWholeTensorScan) {
  std::mt19937_64 rng(7);
  int flagged = 0;
  for (DType dtype : {DType::F8_E4M3, DType::U8, DType::BF16, DType::F16, DType::F32}) {
    for (int trial = 0; trial < 60; ++trial) {
      const int64_t n = static_cast<int64_t>(rng() % 9000) + 1;
      const TensorSpec spec{"t_scales", dtype, {n}};
      Bytes b = valid_random_codes(spec, rng);
      const size_t width = dtype_size(dtype);
      if (rng() % 2 == 0) {  // one invalid element, often in the last (partial) word
        const size_t i = rng() % 3 == 0 ? static_cast<size_t>(n) - 1 : rng() % static_cast<size_t>(n);
        for (size_t j = 0; j < width; ++j) b[i * width + j] = 0xFF;
      }
      CodeScanner scanner(spec);
      size_t upto = 0;
      while (upto < b.size()) {
        upto = std::min(b.size(), upto + 1 + static_cast<size_t>(rng() % 700));
        scanner.advance(b, upto);
      }
      const bool whole = find_invalid_code(spec, b).has_value();
      ASSERT_EQ(scanner.found(), whole) << dtype_name(dtype) << " n " << n;
      flagged += whole ? 1 : 0;
    }
  }
  EXPECT_GT(flagged, 50);  // both outcomes were exercised
}

}  // namespace
}  // namespace wsb
