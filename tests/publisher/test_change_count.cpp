// Changed-element counts: one element per stored value of the dtype, packed E2M1 per 4-bit code; the class names;
// density and compression ratio of a publication's figures.
#include <gtest/gtest.h>

#include "publisher/publisher.hpp"
#include "tests/support/error_checks.hpp"

namespace wsb {
namespace {

TEST(ChangeCount, CountsStoredValuesOfEachDtype) {
  const TensorSpec bf16{"model.layers.0.mlp.up_proj.weight", DType::BF16, {2, 2}};
  std::vector<uint8_t> a(8, 0), b(8, 0);
  b[1] = 0x80;  // element 0, high byte
  b[6] = 0x01;  // element 3, low byte
  b[7] = 0x01;  // element 3 again
  EXPECT_EQ(count_changed(bf16, a, b), 2u);
  EXPECT_EQ(change_class(bf16), "BF16");
  EXPECT_EQ(change_elements(bf16), 4u);
  const TensorSpec f32{"model.layers.0.mlp.experts.e_score_correction_bias", DType::F32, {2}};
  EXPECT_EQ(count_changed(f32, a, b), 2u);
  EXPECT_EQ(change_class(f32), "F32");
  const TensorSpec fp8{"model.layers.0.mlp.experts.0.up_proj.weight", DType::F8_E4M3, {2, 4}};
  EXPECT_EQ(count_changed(fp8, a, b), 3u);
  EXPECT_EQ(change_class(fp8), "F8_E4M3");
  // MXFP4 scales are E8M0 codes stored as U8: one element per byte.
  const TensorSpec scales{"model.layers.0.mlp.experts.gate_up_proj_scales", DType::U8, {8}};
  EXPECT_EQ(count_changed(scales, a, b), 3u);
  EXPECT_EQ(change_class(scales), "U8");
}

TEST(ChangeCount, PackedFp4CountsEachFourBitCode) {
  // NVFP4 weight (U8 "*.weight") and MXFP4 blocks (U8 "*_blocks"): two E2M1 codes per byte, low nibble first.
  for (const char* name : {"model.layers.1.mlp.experts.0.down_proj.weight", "model.layers.0.mlp.experts.down_proj_blocks"}) {
    SCOPED_TRACE(name);
    const TensorSpec packed{name, DType::U8, {2, 2}};
    const std::vector<uint8_t> a{0x00, 0x00, 0x00, 0x00};
    const std::vector<uint8_t> b{0x01, 0x10, 0x11, 0x00};  // byte 0 low code, byte 1 high code, byte 2 both
    EXPECT_EQ(count_changed(packed, a, b), 4u);
    EXPECT_EQ(change_class(packed), "E2M1");
    EXPECT_EQ(change_elements(packed), 8u);
  }
}

TEST(ChangeCount, RefusesBuffersOfAnotherSize) {
  const TensorSpec t{"w", DType::BF16, {2}};
  const std::vector<uint8_t> four(4), three(3);
  EXPECT_EQ(test::error_message([&] { count_changed(t, four, three); }, ErrorKind::Mismatch),
            "tensor 'w' (BF16 [2]): 4 and 3 bytes compared, expected 4");
}

TEST(ChangeCount, DensityAndCompressionOfAPublication) {
  PublicationStats s;
  s.changes = {{"BF16", {100, 30}}, {"E2M1", {300, 10}}};
  s.changed_values = 40;
  s.canonical_bytes = 1000;
  s.stored_bytes = 250;
  EXPECT_DOUBLE_EQ(s.density(), 0.1);
  EXPECT_DOUBLE_EQ(s.compression_ratio(), 4.0);
  EXPECT_EQ(PublicationStats{}.density(), 0.0);
  EXPECT_EQ(PublicationStats{}.compression_ratio(), 0.0);
}

}  // namespace
}  // namespace wsb
