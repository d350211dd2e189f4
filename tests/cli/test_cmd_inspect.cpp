// `wsbench inspect` / `wsbench codecs`: sha256 and decoded values of tensors written by the reference safetensors
// library (tests/fixtures, torch 2.11 + safetensors 0.8.0; hashes computed with Python's hashlib over the fixture
// bytes), shard bookkeeping of a Hugging Face checkpoint, decode requests and their errors, the JSON forms.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <fstream>
#include <limits>

#include "cli/commands.hpp"
#include "cli/inspect.hpp"
#include "models/checkpoint/safetensors.hpp"
#include "core/errors.hpp"
#include "tests/support/test_support.hpp"

namespace wsb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::expect_error;
using test::TempDir;

const fs::path kSmall = fs::path(WSBENCH_FIXTURES_DIR) / "safetensors" / "reference_small.safetensors";
const fs::path kLlama = fs::path(WSBENCH_FIXTURES_DIR) / "hf-llama-tiny";
const std::string kBlocks = "model.layers.0.mlp.experts.0.gate_up_proj_blocks";
const std::string kScales = "model.layers.0.mlp.experts.0.gate_up_proj_scales";
const std::string kFp8 = "model.layers.0.mlp.experts.0.down_proj.weight";

const InspectedTensor& find(const Inspection& inspection, const std::string& name) {
  for (const InspectedTensor& t : inspection.tensors) {
    if (t.spec.name == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

const std::vector<double>& floats(const InspectedTensor& t) { return std::get<std::vector<double>>(t.values.value()); }

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(Inspect, ReferenceFileSha256OffsetsAndDtypes) {
  const Inspection in = inspect_checkpoint(kSmall, {});
  EXPECT_FALSE(in.indexed);
  ASSERT_EQ(in.files.size(), 1u);
  EXPECT_EQ(in.files[0].file, "reference_small.safetensors");
  EXPECT_EQ(in.files[0].data_start, 920u);
  EXPECT_EQ(in.files[0].metadata.at("producer"), "safetensors-reference");
  ASSERT_EQ(in.tensors.size(), 9u);
  EXPECT_EQ(in.tensors.front().spec.name, "empty_i64");  // sorted by name
  EXPECT_EQ(in.total_size, 5484u);
  const InspectedTensor& scalar = find(in, "scalar_f32");
  EXPECT_EQ(scalar.sha256, "e21712a06022eecab9f5bd25414b4af9adeb316bb03947134cea060c78afd2d9");
  EXPECT_EQ(scalar.offset, 1016u);
  EXPECT_EQ(scalar.bytes, 4u);
  EXPECT_EQ(find(in, "empty_i64").sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(find(in, "model.layers.0.self_attn.q_proj.weight").sha256,
            "ac263d4ec2c09f70b9d5e4e4f81b4a406cf733471a8ceba443bbf0d8e8c18ea4");
  EXPECT_EQ(find(in, kFp8).sha256, "f2f17c55ccce7118f1ab77580a0ad999bb7eef4d37c7480a525505d9624060cd");
  EXPECT_EQ(find(in, kFp8).offset, 5764u);
  EXPECT_EQ(find(in, kBlocks).sha256, "8dc644501cfc1473ae896c2d9ab37bb296f8520ac22e487b14ad7684ddf1214c");
  EXPECT_EQ(find(in, kScales).spec.dtype, DType::F8_E8M0);
  EXPECT_FALSE(scalar.values.has_value());  // no --values: nothing decoded
  EXPECT_EQ(scalar.decode, DecodeKind::F32);
}

TEST(Inspect, AutomaticDecodeGivesExactValues) {
  const Inspection in = inspect_checkpoint(kSmall, {.values = true, .decode = {}});
  // E4M3 0xBA = -1.25 (exp 7, mantissa 2/8), 0x35 = 0.8125 (exp 6, mantissa 5/8), 0xA9 = -0.28125 (exp 5, 1/8).
  const auto& fp8 = floats(find(in, kFp8));
  ASSERT_EQ(fp8.size(), 512u);
  EXPECT_EQ(fp8[0], -1.25);
  EXPECT_EQ(fp8[1], 0.8125);
  EXPECT_EQ(fp8[2], -0.28125);
  // F8_E8M0 121, 101, 112, 133 = 2^-6, 2^-26, 2^-15, 2^6.
  const auto& scales = floats(find(in, kScales));
  ASSERT_EQ(scales.size(), 8u);
  EXPECT_EQ(scales[0], 0x1p-6);
  EXPECT_EQ(scales[1], 0x1p-26);
  EXPECT_EQ(scales[2], 0x1p-15);
  EXPECT_EQ(scales[3], 64.0);
  // U8 *_blocks: packed E2M1, low nibble first: 0xF9 -> -0.5, -6; 0x38 -> -0, 1.5.
  const InspectedTensor& blocks = find(in, kBlocks);
  EXPECT_EQ(blocks.decode, DecodeKind::E2M1);
  const auto& e2m1 = floats(blocks);
  ASSERT_EQ(e2m1.size(), 256u);
  EXPECT_EQ(e2m1[0], -0.5);
  EXPECT_EQ(e2m1[1], -6.0);
  EXPECT_EQ(e2m1[2], 0.0);
  EXPECT_TRUE(std::signbit(e2m1[2]));
  EXPECT_EQ(e2m1[3], 1.5);
  // BF16 0xBF52 = -0.8203125; F16 0xBCFC = -1.24609375; F32 0x3CC78D00; scalar 3.5; I64 [0, 3] has no values.
  EXPECT_EQ(floats(find(in, "model.layers.0.self_attn.q_proj.weight"))[0], -0.8203125);
  EXPECT_EQ(floats(find(in, "lm_head.weight"))[0], -1.24609375);
  EXPECT_EQ(floats(find(in, "model.layers.0.mlp.experts.0.down_proj.weight_scale"))[0],
            static_cast<double>(std::bit_cast<float>(0x3CC78D00u)));
  EXPECT_EQ(floats(find(in, "scalar_f32")), std::vector<double>{3.5});
  EXPECT_TRUE(std::get<std::vector<int64_t>>(find(in, "empty_i64").values.value()).empty());
}

TEST(Inspect, DecodeRequestsOverrideAndMustFit) {
  InspectOptions options{.values = true, .decode = {parse_decode_request(kBlocks + "=int"),
                                                    parse_decode_request(kFp8 + "=none")}};
  const Inspection in = inspect_checkpoint(kSmall, options);
  const InspectedTensor& blocks = find(in, kBlocks);
  EXPECT_TRUE(blocks.requested);
  const auto& bytes = std::get<std::vector<int64_t>>(blocks.values.value());
  ASSERT_EQ(bytes.size(), 128u);
  EXPECT_EQ(bytes[0], 249);
  EXPECT_EQ(bytes[1], 56);
  EXPECT_FALSE(find(in, kFp8).values.has_value());
  // Raw codes in U8 read as E8M0: byte 249 = 2^122.
  const Inspection as_e8m0 = inspect_checkpoint(kSmall, {.values = true, .decode = {{kBlocks, DecodeKind::E8M0}}});
  EXPECT_EQ(floats(find(as_e8m0, kBlocks))[0], 0x1p122);

  expect_error([] { inspect_checkpoint(kSmall, {.values = true, .decode = {{"lm_head.weight", DecodeKind::BF16}}}); },
               ErrorKind::Mismatch, {"tensor 'lm_head.weight' is F16 [10, 32]", "bf16"});
  expect_error([] { inspect_checkpoint(kSmall, {.values = false, .decode = {{kFp8, DecodeKind::E2M1}}}); },
               ErrorKind::Mismatch, {"tensor '" + kFp8 + "' is F8_E4M3 [16, 32]", "e2m1"});
  expect_error([] { inspect_checkpoint(kSmall, {.values = true, .decode = {{"model.norm.weight", DecodeKind::F32}}}); },
               ErrorKind::Missing, {"no tensor 'model.norm.weight'", "reference_small.safetensors"});
}

TEST(Inspect, ParseDecodeRequest) {
  const DecodeRequest r = parse_decode_request("a.b=c=e2m1");  // the last '=' splits
  EXPECT_EQ(r.tensor, "a.b=c");
  EXPECT_EQ(r.kind, DecodeKind::E2M1);
  expect_error([] { parse_decode_request("x.weight=fp4"); }, ErrorKind::Format,
               {"--decode 'x.weight=fp4'", "unknown decode kind 'fp4'", "e2m1"});
  expect_error([] { parse_decode_request("x.weight"); }, ErrorKind::Format, {"--decode 'x.weight'", "TENSOR=KIND"});
  expect_error([] { parse_decode_request("=e4m3"); }, ErrorKind::Format, {"'=e4m3'"});
}

TEST(Inspect, FitsAndAutomaticKinds) {
  EXPECT_TRUE(decode_fits(DecodeKind::E8M0, DType::U8));
  EXPECT_TRUE(decode_fits(DecodeKind::BF16, DType::I16));
  EXPECT_TRUE(decode_fits(DecodeKind::F32, DType::I32));
  EXPECT_FALSE(decode_fits(DecodeKind::E4M3, DType::F8_E8M0));
  EXPECT_FALSE(decode_fits(DecodeKind::E2M1, DType::F8_E4M3));
  EXPECT_FALSE(decode_fits(DecodeKind::Int, DType::F32));
  EXPECT_EQ(auto_decode_kind({"x_scales", DType::U8, {2}}), DecodeKind::E8M0);
  EXPECT_EQ(auto_decode_kind({"x.weight", DType::U8, {2}}), DecodeKind::E2M1);  // NVFP4 packed weight
  EXPECT_EQ(auto_decode_kind({"x.codes", DType::U8, {2}}), DecodeKind::Int);
  EXPECT_EQ(auto_decode_kind({"x", DType::F8_E5M2, {2}}), DecodeKind::E5M2);
  EXPECT_EQ(auto_decode_kind({"x", DType::BOOL, {2}}), DecodeKind::Int);
}

TEST(Inspect, MissingPathIsNamed) {
  TempDir tmp;
  const fs::path missing = tmp / "no-such-checkpoint";
  expect_error([&] { inspect_checkpoint(missing, {}); }, ErrorKind::Missing, {missing.string(), "does not exist"});
  InspectArgs args;
  args.checkpoint = missing;
  expect_error([&] { cmd_inspect(args); }, ErrorKind::Missing, {missing.string()});
  args.checkpoint = kSmall;
  args.decode = {"scalar_f32=f8"};
  expect_error([&] { cmd_inspect(args); }, ErrorKind::Format, {"unknown decode kind 'f8'"});
}

TEST(Inspect, ShardedCheckpointFilesAndIndex) {
  const Inspection in = inspect_checkpoint(kLlama, {});
  EXPECT_TRUE(in.indexed);
  EXPECT_EQ(in.total_size, 250752u);
  EXPECT_EQ(in.index_metadata.at("total_parameters"), "125376");
  ASSERT_EQ(in.files.size(), 2u);
  EXPECT_EQ(in.files[0].file, "model-00001-of-00002.safetensors");
  EXPECT_EQ(in.files[0].tensors, 16u);
  EXPECT_EQ(in.files[1].tensors, 14u);
  EXPECT_EQ(in.tensors.size(), 30u);
  const InspectedTensor& head = find(in, "lm_head.weight");
  EXPECT_EQ(head.file, "model-00002-of-00002.safetensors");
  EXPECT_EQ(head.offset, 1424u);
  EXPECT_EQ(head.sha256, "bd6ef1f87dfdf122849e4e61ae5913de1f9ef0100dbd1ac1841120ff09d60c9d");
  EXPECT_EQ(find(in, "model.layers.1.mlp.down_proj.weight").sha256,
            "58ac729f2c1ecb997f2b35dc0d7191bb3ff7f1f75b5fef341a71a1008ea00e0b");
}

TEST(Inspect, PublishedFullCheckpointWithAnyConfigJsonListsItsShards) {
  // FULL publications carry config.json for engine forks; inspect reads index and shards only, so neither the
  // written config nor a broken one changes what it reports.
  TempDir tmp;
  test::publish_tiny(tmp / "store", /*last=*/0);
  const fs::path full = Store(tmp / "store").update_dir(0);
  ASSERT_TRUE(fs::is_regular_file(full / "config.json"));
  for (const bool broken : {false, true}) {
    SCOPED_TRACE(broken ? "broken config.json" : "config.json as published");
    if (broken) std::ofstream(full / "config.json", std::ios::trunc) << "{\"model_type\": 7,";
    InspectArgs args;
    args.checkpoint = full;
    args.json_out = tmp / "out.json";
    ASSERT_EQ(cmd_inspect(args), 0);
    const json j = read_json(tmp / "out.json");
    EXPECT_EQ(j["indexed"], true);
    ASSERT_EQ(j["files"].size(), 1u);
    EXPECT_EQ(j["files"][0]["file"], "model-00001-of-00001.safetensors");
    EXPECT_EQ(j["tensors"].size(), 21u);  // llama-tiny-bf16: embed, 2 layers x 9, final norm, lm_head
    EXPECT_EQ(j["index_metadata"]["version"], "000000");
  }
}

// A DELTA publication's tensors are zstd-compressed delta payloads (U8), not values: they are labelled as such and
// never decoded (a "*weight" U8 would otherwise read as packed FP4).
TEST(Inspect, DeltaPayloadsAreLabelledNotDecoded) {
  TempDir tmp;
  test::publish_tiny(tmp / "store", /*last=*/1);
  InspectOptions options;
  options.values = true;
  const Inspection inspection = inspect_checkpoint(Store(tmp / "store").update_dir(1), options);
  ASSERT_EQ(inspection.tensors.size(), 21u);
  for (const InspectedTensor& t : inspection.tensors) {
    EXPECT_EQ(t.decode, DecodeKind::None) << t.spec.name;
    EXPECT_FALSE(t.values.has_value()) << t.spec.name;
    EXPECT_EQ(t.payload, "zstd xor delta payload (compressed; base version 000000)") << t.spec.name;
  }
  const json j = inspection_json(inspection);
  EXPECT_EQ(j["tensors"][0]["payload"], "zstd xor delta payload (compressed; base version 000000)");
  EXPECT_EQ(j["tensors"][0]["decode"], "none");
  EXPECT_FALSE(j["tensors"][0].contains("values"));
  // An explicit request still decodes the payload bytes as asked.
  options.decode = {DecodeRequest{inspection.tensors[0].spec.name, DecodeKind::Int}};
  const Inspection requested = inspect_checkpoint(Store(tmp / "store").update_dir(1), options);
  EXPECT_EQ(requested.tensors[0].decode, DecodeKind::Int);
  EXPECT_TRUE(requested.tensors[0].values.has_value());
}

TEST(Inspect, JsonSpellsNanInfinityAndNegativeZero) {
  TempDir tmp;
  const std::vector<uint8_t> fp8{0x7F, 0xFF, 0x00, 0x80, 0x7E};
  const float f32[3] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 0.1f};
  const std::vector<uint8_t> i32{0xFF, 0xFF, 0xFF, 0xFF, 0x07, 0x00, 0x00, 0x00};
  const std::vector<TensorData> tensors{
      {{"codes", DType::F8_E4M3, {5}}, fp8},
      {{"wide", DType::F32, {3}}, {reinterpret_cast<const uint8_t*>(f32), sizeof f32}},
      {{"ints", DType::I32, {2, 1}}, i32}};
  write_safetensors(tmp / "model.safetensors", tensors);
  InspectArgs args;
  args.checkpoint = tmp.path();
  args.values = true;
  args.json_out = tmp / "out.json";
  ASSERT_EQ(cmd_inspect(args), 0);
  const json j = read_json(tmp / "out.json");
  EXPECT_EQ(j["format"], "wsbench-inspect/1");
  EXPECT_EQ(j["indexed"], false);
  ASSERT_EQ(j["tensors"].size(), 3u);
  const json& codes = j["tensors"][0];
  EXPECT_EQ(codes["name"], "codes");
  EXPECT_EQ(codes["dtype"], "F8_E4M3");
  EXPECT_EQ(codes["file"], "model.safetensors");
  EXPECT_EQ(codes["decode"], "e4m3");
  EXPECT_EQ(codes["decode_source"], "auto");
  EXPECT_EQ(codes["values"].dump(), R"(["nan","nan",0.0,-0.0,448.0])");
  EXPECT_EQ(j["tensors"][1]["name"], "ints");
  EXPECT_EQ(j["tensors"][1]["values"].dump(), "[-1,7]");
  EXPECT_EQ(j["tensors"][1]["shape"].dump(), "[2,1]");
  EXPECT_EQ(j["tensors"][2]["values"][0], "inf");
  EXPECT_EQ(j["tensors"][2]["values"][1], "-inf");
  EXPECT_EQ(j["tensors"][2]["values"][2].get<double>(), static_cast<double>(0.1f));  // exact, not 0.1
}

TEST(Codecs, TablesMatchTorchFixtureAndEncoders) {
  const json c = codecs_json();
  const json torch = read_json(fs::path(WSBENCH_FIXTURES_DIR) / "dtypes" / "dtype_tables.json");
  const json& e4m3 = c["decode"]["e4m3"];
  ASSERT_EQ(e4m3["values"].size(), 256u);
  for (int code = 0; code < 256; ++code) {
    EXPECT_EQ(e4m3["f32_bits"][code], fmt::format("0x{:08x}", torch["float8_e4m3fn_to_f32_bits"][code].get<uint32_t>()))
        << code;
    EXPECT_EQ(c["decode"]["e8m0"]["f32_bits"][code],
              fmt::format("0x{:08x}", torch["float8_e8m0fnu_to_f32_bits"][code].get<uint32_t>()))
        << code;
  }
  EXPECT_EQ(e4m3["values"][0x7E], 448.0);
  EXPECT_EQ(e4m3["values"][0x7F], "nan");
  EXPECT_EQ(e4m3["values"][0x01], 0x1p-9);
  EXPECT_EQ(c["decode"]["e8m0"]["values"][0xFF], "nan");
  EXPECT_EQ(c["decode"]["e8m0"]["values"][0], 0x1p-127);
  EXPECT_EQ(c["decode"]["e2m1"]["values"].dump(), "[0.0,0.5,1.0,1.5,2.0,3.0,4.0,6.0,-0.0,-0.5,-1.0,-1.5,-2.0,-3.0,-4.0,-6.0]");
  EXPECT_EQ(c["decode"]["e5m2"]["values"][0x7C], "inf");  // E5M2 keeps binary16's infinity
  EXPECT_EQ(c["decode"]["e5m2"]["values"][0x3C], 1.0);
  EXPECT_EQ(c["decode"]["bf16"]["values"][0], 0.0);

  // Encoders: look up a probe by its float32 bits.
  const auto code_of = [&c](const char* kind, float v) -> json {
    const json& e = c["encode"][kind];
    const std::string bits = fmt::format("0x{:08x}", std::bit_cast<uint32_t>(v));
    for (size_t i = 0; i < e["input_bits"].size(); ++i) {
      if (e["input_bits"][i] == bits) return e["codes"][i];
    }
    ADD_FAILURE() << kind << " has no probe " << v;
    return nullptr;
  };
  EXPECT_EQ(code_of("e4m3", 464.0f), 0x7E);  // the tie rounds down to 448
  EXPECT_EQ(code_of("e4m3", 480.0f), 0x7F);  // beyond it: NaN
  EXPECT_EQ(code_of("e4m3", -0.0f), 0x80);
  EXPECT_EQ(code_of("e8m0", 1.5f), 128);     // 1.5 rounds up to 2
  EXPECT_EQ(code_of("e2m1", 0.25f), 0);      // tie to even: 0
  EXPECT_EQ(code_of("e2m1", 7.0f), 7);       // saturates at 6
  EXPECT_EQ(code_of("bf16", 1.0f + 0x1p-8f), 0x3F80);
  const json& e2m1 = c["encode"]["e2m1"];
  const size_t last = e2m1["inputs"].size() - 1;
  EXPECT_EQ(e2m1["inputs"][last], "nan");
  EXPECT_TRUE(e2m1["codes"][last].is_null());
  EXPECT_TRUE(e2m1["errors"][last].is_string());
}

TEST(Codecs, CommandWritesJson) {
  TempDir tmp;
  ASSERT_EQ(cmd_codecs(tmp / "codecs.json"), 0);
  const json j = read_json(tmp / "codecs.json");
  EXPECT_EQ(j["format"], "wsbench-codecs/1");
  EXPECT_EQ(j["decode"]["e2m1"]["codes"].size(), 16u);
  EXPECT_EQ(j, codecs_json());
}

}  // namespace
}  // namespace wsb
