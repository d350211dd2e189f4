// safetensors reader/writer against a file written by the reference library (safetensors 0.8.0) and against one
// hand-made malformed file per validation rule.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint_test_util.hpp"
#include "models/checkpoint/safetensors.hpp"

namespace wsb {
namespace {

using test::expect_error;
using testutil::read_bytes;
using testutil::TempDir;
using testutil::write_raw_safetensors;

const std::filesystem::path kFixtures = WSBENCH_FIXTURES_DIR;
const std::filesystem::path kReference = kFixtures / "safetensors" / "reference_small.safetensors";

// reference_small.expected.json spells dtypes the torch way.
std::string safetensors_dtype(const std::string& torch_name) {
  static const std::map<std::string, std::string> names{
      {"torch.bfloat16", "BF16"},       {"torch.float16", "F16"},         {"torch.float32", "F32"},
      {"torch.float8_e4m3fn", "F8_E4M3"}, {"torch.float8_e8m0fnu", "F8_E8M0"}, {"torch.uint8", "U8"},
      {"torch.int64", "I64"}};
  return names.at(torch_name);
}

TEST(SafetensorsRead, ReferenceFileMatchesExpectedJson) {
  const nlohmann::json expected =
      nlohmann::json::parse(read_bytes(kFixtures / "safetensors" / "reference_small.expected.json"));
  SafetensorsFile file(kReference);
  ASSERT_EQ(file.entries().size(), expected.size());
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(name);
    const SafetensorsEntry* entry = file.find(name);
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(dtype_name(entry->dtype), safetensors_dtype(want.at("dtype").get<std::string>()));
    EXPECT_EQ(entry->shape, want.at("shape").get<Shape>());
    const auto head = want.at("bytes_hex_head").get<std::vector<uint8_t>>();
    std::span<const uint8_t> bytes = file.data(*entry);
    ASSERT_EQ(bytes.size(), entry->spec().bytes());
    ASSERT_GE(bytes.size(), head.size());
    EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(head.size())), head);
  }
}

TEST(SafetensorsRead, ReferenceFileLayoutMetadataScalarAndEmpty) {
  SafetensorsFile file(kReference);
  EXPECT_EQ(file.metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}, {"producer", "safetensors-reference"}}));
  // Header length 912 (space padded), so the data buffer starts 8-byte aligned.
  EXPECT_EQ(file.data_start(), 920u);
  EXPECT_EQ(file.entries().front().name, "empty_i64");
  EXPECT_EQ(file.entries().back().name, "model.layers.0.mlp.experts.0.gate_up_proj_blocks");
  EXPECT_EQ(file.entries().back().end, 5484u);

  const SafetensorsEntry& scalar = file.at("scalar_f32");
  EXPECT_EQ(scalar.shape, Shape{});
  EXPECT_EQ(scalar.begin, 96u);
  EXPECT_EQ(scalar.end, 100u);
  float value = 0;
  std::memcpy(&value, file.data(scalar).data(), 4);
  EXPECT_EQ(value, 3.5f);

  // Zero-size tensor at [0, 0]: it shares offset 0 with the next tensor, which is legal.
  const SafetensorsEntry& empty = file.at("empty_i64");
  EXPECT_EQ(empty.dtype, DType::I64);
  EXPECT_EQ(empty.shape, (Shape{0, 3}));
  EXPECT_EQ(empty.begin, 0u);
  EXPECT_EQ(empty.end, 0u);
  EXPECT_EQ(file.data(empty).size(), 0u);
  EXPECT_EQ(file.at("model.layers.0.mlp.experts.0.down_proj.weight_scale").begin, 0u);
}

TEST(SafetensorsRead, MissingTensorLookupIsMissing) {
  SafetensorsFile file(kReference);
  EXPECT_EQ(file.find("nope"), nullptr);
  expect_error([&] { file.at("nope"); }, ErrorKind::Missing, {kReference.string(), "tensor 'nope'"});
  expect_error([&] { file.data("nope"); }, ErrorKind::Missing, {"tensor 'nope'"});
}

TEST(SafetensorsRead, MissingFileIsMissing) {
  TempDir dir;
  expect_error([&] { SafetensorsFile f(dir / "absent.safetensors"); }, ErrorKind::Missing,
               {(dir / "absent.safetensors").string()});
}

// --- write -> read -----------------------------------------------------------------------------------------

std::vector<TensorData> tensors_of(const SafetensorsFile& file) {
  std::vector<TensorData> out;
  for (const SafetensorsEntry& entry : file.entries()) out.push_back({entry.spec(), file.data(entry)});
  return out;
}

TEST(SafetensorsWrite, RoundTripIsByteExactAndMatchesReferenceLayout) {
  TempDir dir;
  SafetensorsFile reference(kReference);
  const auto tensors = tensors_of(reference);
  write_safetensors(dir / "a.safetensors", tensors, reference.metadata());
  write_safetensors(dir / "b.safetensors", tensors, reference.metadata(), /*fsync_file=*/true);
  const std::string a = read_bytes(dir / "a.safetensors");
  EXPECT_EQ(a, read_bytes(dir / "b.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "a.safetensors.tmp"));

  // Same writer rules as the reference (compact JSON, dtype/shape/data_offsets, space padding to 8, same data
  // order); only the __metadata__ key order differs because wsbench sorts keys.
  std::string expected = read_bytes(kReference);
  const std::string ref_meta = R"({"producer":"safetensors-reference","format":"pt"})";
  const std::string our_meta = R"({"format":"pt","producer":"safetensors-reference"})";
  const size_t at = expected.find(ref_meta);
  ASSERT_NE(at, std::string::npos);
  expected.replace(at, ref_meta.size(), our_meta);
  EXPECT_EQ(a, expected);

  SafetensorsFile back(dir / "a.safetensors");
  ASSERT_EQ(back.entries().size(), reference.entries().size());
  for (size_t i = 0; i < back.entries().size(); ++i) {
    const SafetensorsEntry& got = back.entries()[i];
    const SafetensorsEntry& want = reference.entries()[i];
    EXPECT_EQ(got.spec(), want.spec());
    EXPECT_EQ(got.begin, want.begin);
    EXPECT_EQ(got.end, want.end);
    auto got_bytes = back.data(got);
    auto want_bytes = reference.data(want);
    EXPECT_TRUE(std::equal(got_bytes.begin(), got_bytes.end(), want_bytes.begin(), want_bytes.end())) << got.name;
  }
  EXPECT_EQ(back.metadata(), reference.metadata());
}

TEST(SafetensorsWrite, HeaderPaddedWithSpacesToMultipleOf8) {
  TempDir dir;
  const std::vector<uint8_t> bytes{1, 2, 3};
  const std::vector<TensorData> tensors{{TensorSpec{"x", DType::U8, {3}}, bytes}};
  write_safetensors(dir / "x.safetensors", tensors);
  const std::string file = read_bytes(dir / "x.safetensors");
  const std::string json = R"({"x":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})";
  ASSERT_EQ(json.size(), 53u);  // padded by 3 spaces: 8 + 56 is a multiple of 8
  EXPECT_EQ(file, testutil::le_u64(56) + json + "   " + "\x01\x02\x03");
}

TEST(SafetensorsWrite, StreamingAppendsInPiecesAndPublishesOnFinish) {
  TempDir dir;
  const auto path = dir / "s.safetensors";
  // 1.5 MiB BF16 tensor: larger than the writer's buffer, so the direct write path runs too.
  std::vector<uint8_t> big(3 * 512 * 1024);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 + 3);
  std::vector<uint8_t> small{9, 8, 7, 6, 5, 4, 3, 2};
  {
    SafetensorsWriter writer(path,
                             {TensorSpec{"small", DType::F32, {2}}, TensorSpec{"empty", DType::BF16, {0}},
                              TensorSpec{"big", DType::BF16, {768, 1024}}},
                             {{"k", "v"}});
    for (uint8_t b : small) writer.append(std::span<const uint8_t>(&b, 1));
    writer.append(std::span<const uint8_t>(big).subspan(0, 100));
    writer.append(std::span<const uint8_t>(big).subspan(100));
    EXPECT_FALSE(std::filesystem::exists(path));  // not visible before finish
    EXPECT_TRUE(std::filesystem::exists(dir / "s.safetensors.tmp"));
    writer.finish(false);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "s.safetensors.tmp"));
  SafetensorsFile file(path);
  EXPECT_EQ(file.metadata().at("k"), "v");
  auto small_back = file.data("small");
  EXPECT_EQ(std::vector<uint8_t>(small_back.begin(), small_back.end()), small);
  EXPECT_EQ(file.at("empty").begin, 8u);
  EXPECT_EQ(file.at("empty").end, 8u);
  auto big_back = file.data("big");
  EXPECT_EQ(std::vector<uint8_t>(big_back.begin(), big_back.end()), big);
  EXPECT_EQ(file.data_start() % 8, 0u);
}

TEST(SafetensorsWrite, TooManyBytesNamesTensor) {
  TempDir dir;
  const auto path = dir / "t.safetensors";
  SafetensorsWriter writer(path, {TensorSpec{"a", DType::U8, {2}}, TensorSpec{"b", DType::U8, {2}}}, {});
  const std::vector<uint8_t> three{1, 2, 3};
  writer.append(three);
  expect_error([&] { writer.append(three); }, ErrorKind::Format, {path.string(), "tensor 'b'", "exceeds"});
}

TEST(SafetensorsWrite, IncompleteFinishNamesTensorAndLeavesNoFile) {
  TempDir dir;
  const auto path = dir / "t.safetensors";
  {
    SafetensorsWriter writer(path, {TensorSpec{"a", DType::U8, {2}}, TensorSpec{"b", DType::U8, {2}}}, {});
    const std::vector<uint8_t> three{1, 2, 3};
    writer.append(three);
    expect_error([&] { writer.finish(false); }, ErrorKind::Format, {path.string(), "tensor 'b' is incomplete"});
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(dir / "t.safetensors.tmp"));
}

TEST(SafetensorsWrite, WrongByteCountAndBadSpecsRejected) {
  TempDir dir;
  const auto path = dir / "w.safetensors";
  const std::vector<uint8_t> five(5, 0);
  const std::vector<TensorData> wrong{{TensorSpec{"w", DType::F32, {2}}, five}};
  expect_error([&] { write_safetensors(path, wrong); }, ErrorKind::Format,
               {path.string(), "tensor 'w' has 5 bytes", "needs 8"});
  expect_error([&] { SafetensorsWriter w(path, {TensorSpec{"n", DType::U8, {-1}}}, {}); }, ErrorKind::Format,
               {"tensor 'n'", "negative"});
  expect_error([&] { SafetensorsWriter w(path, {TensorSpec{"d", DType::U8, {1}}, TensorSpec{"d", DType::U8, {1}}},
                                         {}); },
               ErrorKind::Format, {"tensor 'd' declared twice"});
  expect_error([&] { SafetensorsWriter w(path, {TensorSpec{"__metadata__", DType::U8, {1}}}, {}); },
               ErrorKind::Format, {"'__metadata__' is reserved"});
  EXPECT_FALSE(std::filesystem::exists(path));
}

// --- malformed files: one per rule --------------------------------------------------------------------------

class SafetensorsMalformed : public ::testing::Test {
 protected:
  std::filesystem::path write(const std::string& header, size_t data_bytes) {
    write_raw_safetensors(path_, header, data_bytes);
    return path_;
  }
  void expect(ErrorKind kind, std::initializer_list<std::string> parts) {
    auto open = [&] { SafetensorsFile f(path_); };
    expect_error(open, kind, parts);
    expect_error(open, kind, {path_.string()});
  }
  TempDir dir_;
  std::filesystem::path path_ = dir_ / "bad.safetensors";
};

TEST_F(SafetensorsMalformed, HeaderLengthBeyondLimitIsFormat) {
  testutil::write_bytes(path_, testutil::le_u64(100'000'001) + "{}");
  expect(ErrorKind::Format, {"header length 100000001", "limit"});
}

TEST_F(SafetensorsMalformed, HeaderLengthBeyondFileIsTruncated) {
  testutil::write_bytes(path_, testutil::le_u64(100) + "{}");
  expect(ErrorKind::Truncated, {"header length 100", "beyond end of file"});
  try {
    SafetensorsFile f(path_);
  } catch (const Error& e) {
    EXPECT_TRUE(e.retryable());
  }
}

TEST_F(SafetensorsMalformed, ShorterThanLengthFieldIsTruncated) {
  testutil::write_bytes(path_, std::string("\x02\x00\x00", 3));
  expect(ErrorKind::Truncated, {"3 bytes", "header length"});
}

TEST_F(SafetensorsMalformed, DataEndBeyondFileIsTruncated) {
  write(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  expect(ErrorKind::Truncated, {"data end 16", "beyond end of file", "holds 8"});
}

TEST_F(SafetensorsMalformed, BadJson) {
  write(R"({"w":{"dtype":"F32",)", 0);
  expect(ErrorKind::Format, {"header: invalid JSON"});
}

// Regression (fuzz/fuzz_safetensors_header): nlohmann refuses such a number with out_of_range, not parse_error,
// which escaped as a non-wsb exception.
TEST_F(SafetensorsMalformed, NumberBeyondDoubleRangeIsFormat) {
  write(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1e400]}})", 1);
  EXPECT_EQ(test::error_message([&] { SafetensorsFile f(path_); }, ErrorKind::Format),
            path_.string() + ": header: invalid JSON: [json.exception.out_of_range.406] number overflow parsing "
                             "'1e400'");
}

TEST_F(SafetensorsMalformed, RootNotObject) {
  write("[1, 2]", 0);
  expect(ErrorKind::Format, {"header: root is not a JSON object"});
}

TEST_F(SafetensorsMalformed, NonUtf8Key) {
  write("{\"w\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
  expect(ErrorKind::Format, {"header: invalid UTF-8"});
}

TEST_F(SafetensorsMalformed, DuplicateKey) {
  write(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
        2);
  expect(ErrorKind::Format, {"header: duplicate key 'a'"});
}

TEST_F(SafetensorsMalformed, DuplicateFieldInsideEntry) {
  write(R"({"w":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})", 1);
  expect(ErrorKind::Format, {"header: duplicate key 'dtype' in 'w'"});
}

TEST_F(SafetensorsMalformed, UnknownAndSubByteDtypes) {
  for (const std::string dtype : {"F4", "F6_E2M3", "F6_E3M2", "Q8", "bf16"}) {
    write(R"({"w":{"dtype":")" + dtype + R"(","shape":[2],"data_offsets":[0,1]}})", 1);
    expect(ErrorKind::Format, {"tensor 'w' dtype '" + dtype + "' unknown"});
  }
}

TEST_F(SafetensorsMalformed, ShapeBytesMismatch) {
  write(R"({"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}})", 12);
  expect(ErrorKind::Format, {"tensor 'x' dtype F32 shape [2, 3] needs 24 bytes but data_offsets [0, 12] hold 12"});
}

TEST_F(SafetensorsMalformed, NegativeDimension) {
  write(R"({"x":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", 0);
  expect(ErrorKind::Format, {"tensor 'x' shape [-1]", "not a non-negative integer"});
}

TEST_F(SafetensorsMalformed, OverlappingOffsets) {
  write(R"({"x":{"dtype":"U8","shape":[12],"data_offsets":[0,12]},"y":{"dtype":"U8","shape":[12],"data_offsets":[8,20]}})",
        20);
  expect(ErrorKind::Format, {"tensor 'y' data_offsets [8, 20] overlap tensor 'x' data_offsets [0, 12]"});
}

TEST_F(SafetensorsMalformed, ZeroSizeTensorInsideAnotherOverlaps) {
  write(R"({"x":{"dtype":"U8","shape":[12],"data_offsets":[0,12]},"z":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})",
        12);
  expect(ErrorKind::Format, {"tensor 'z' data_offsets [4, 4] overlap tensor 'x'"});
}

TEST_F(SafetensorsMalformed, HoleBetweenTensors) {
  write(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"y":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})",
        12);
  expect(ErrorKind::Format, {"tensor 'y' data_offsets [8, 12] leave a hole of 4 bytes after tensor 'x'"});
}

TEST_F(SafetensorsMalformed, HoleAtStartOfBuffer) {
  write(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", 6);
  expect(ErrorKind::Format, {"tensor 'x' data_offsets [2, 6] leave a hole", "[0, 2)"});
}

TEST_F(SafetensorsMalformed, TrailingUnusedBytes) {
  write(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 6);
  expect(ErrorKind::Format, {"2 trailing bytes", "data_offsets end 4"});
}

TEST_F(SafetensorsMalformed, BeginAfterEnd) {
  write(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[8,4]}})", 8);
  expect(ErrorKind::Format, {"tensor 'x' data_offsets [8, 4] begin > end"});
}

TEST_F(SafetensorsMalformed, OffsetsNotIntegers) {
  for (const std::string offsets : {"[0.0,4]", "[\"0\",\"4\"]", "[-1,3]", "[0]", "[0,4,4]", "{}"}) {
    write(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":)" + offsets + "}}", 4);
    expect(ErrorKind::Format, {"tensor 'x' data_offsets", "not two non-negative integers"});
  }
}

TEST_F(SafetensorsMalformed, MissingAndUnknownEntryFields) {
  write(R"({"x":{"dtype":"U8","shape":[4]}})", 0);
  expect(ErrorKind::Format, {"tensor 'x' has no data_offsets"});
  write(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4],"extra":1}})", 4);
  expect(ErrorKind::Format, {"tensor 'x' has unknown field 'extra'"});
}

TEST_F(SafetensorsMalformed, MetadataValueNotString) {
  write(R"({"__metadata__":{"k":1},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
  expect(ErrorKind::Format, {"__metadata__ 'k' value is not a string"});
  write(R"({"__metadata__":["k"]})", 0);
  expect(ErrorKind::Format, {"__metadata__ is not a JSON object"});
}

TEST_F(SafetensorsMalformed, EmptyHeaderObjectIsValid) {
  // Not malformed: a file with no tensors is legal and has an empty data buffer.
  write("{}      ", 0);
  SafetensorsFile file(path_);
  EXPECT_TRUE(file.entries().empty());
  EXPECT_EQ(file.data_start(), 16u);
}

}  // namespace
}  // namespace wsb
