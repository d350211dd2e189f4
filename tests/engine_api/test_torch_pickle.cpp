// The torch tensor pickle of SGLang's /update_weights_from_tensor: exact round trips for every dtype and rank, the
// golden payloads CPython's pickler wrote (byte for byte both ways), payloads real torch 2.11 wrote (plain pickles
// decoded, ForkingPickler's shared-memory references refused by name), exact refusals of malformed input, and base64.
// With WSBENCH_PICKLE_OUT / WSBENCH_PICKLE_IN set, two tests trade files with tests/interop/torch_pickle_check.py,
// which checks them against real torch.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine_api/protocols/torch_pickle.hpp"
#include "tests/support/error_checks.hpp"
#include "tests/support/file_bytes.hpp"

namespace wsb {
namespace {

using json = nlohmann::json;
using torch_pickle::NamedTensor;
namespace fs = std::filesystem;

// A subfolder: every *.json directly in protocols/sglang/ is an endpoint fixture (tests/support/protocol_fixtures.hpp).
const fs::path kFixtures = fs::path(WSBENCH_FIXTURES_DIR) / "protocols" / "sglang" / "tensor_payloads";

// The byte pattern of tests/interop/torch_pickle_fixtures.py: byte i = (i * 37 + seed * 11 + 5) & 0xFF, BOOL bit 0.
std::vector<uint8_t> pattern(size_t n, int seed, DType dtype) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) {
    b[i] = static_cast<uint8_t>((i * 37 + static_cast<size_t>(seed) * 11 + 5) & 0xff);
    if (dtype == DType::BOOL) b[i] &= 1;
  }
  return b;
}

size_t numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

NamedTensor tensor(std::string name, DType dtype, std::vector<int64_t> shape, int seed) {
  NamedTensor t{std::move(name), dtype, std::move(shape), {}};
  t.bytes = pattern(numel(t.shape) * dtype_size(dtype), seed, dtype);
  return t;
}

void expect_same(const std::vector<NamedTensor>& got, const std::vector<NamedTensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name) << i;
    EXPECT_EQ(got[i].dtype, want[i].dtype) << want[i].name;
    EXPECT_EQ(got[i].shape, want[i].shape) << want[i].name;
    EXPECT_EQ(got[i].bytes, want[i].bytes) << want[i].name;
  }
}

constexpr DType kAllDTypes[] = {DType::BOOL, DType::U8,      DType::I8,      DType::I16,    DType::I32, DType::I64,
                                DType::F16,  DType::BF16,    DType::F32,     DType::F64,    DType::U16, DType::U32,
                                DType::U64,  DType::F8_E4M3, DType::F8_E5M2, DType::F8_E8M0};

TEST(TorchPickle, RoundTripsEveryDtypeAndRankExactly) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {5}, {2, 3}, {2, 3, 4}, {0, 4}, {3, 0, 2}};
  int seed = 0;
  for (DType dtype : kAllDTypes) {
    std::vector<NamedTensor> ts;
    for (const auto& shape : shapes) {
      ts.push_back(
          tensor("w." + std::string(dtype_name(dtype)) + "." + std::to_string(ts.size()), dtype, shape, ++seed));
    }
    expect_same(torch_pickle::decode(torch_pickle::encode(ts)), ts);
  }
}

TEST(TorchPickle, EmptyListIsTheSmallestPickle) {
  // PROTO 4, EMPTY_LIST, MEMOIZE, STOP: three payload bytes get no FRAME (Modules/_pickle.c FRAME_SIZE_MIN 4).
  EXPECT_EQ(torch_pickle::encode({}), std::string("\x80\x04]\x94.", 5));
  EXPECT_TRUE(torch_pickle::decode(torch_pickle::encode({})).empty());
  EXPECT_EQ(test::read_bytes(kFixtures / "tensor_payload_empty_list.bin"), torch_pickle::encode({}));
}

TEST(TorchPickle, LargeAndManyTensorsRoundTrip) {
  // A payload past the 64 KiB frame target goes outside frames; 1500 entries take two APPENDS batches of 1000.
  std::vector<NamedTensor> ts{tensor("big", DType::BF16, {150000}, 3)};
  for (int i = 0; i < 1500; ++i) ts.push_back(tensor("t." + std::to_string(i), DType::I32, {i % 5}, i));
  ts.push_back(tensor("big.after", DType::F8_E4M3, {300, 300}, 4));
  expect_same(torch_pickle::decode(torch_pickle::encode(ts)), ts);
}

// Golden payloads: CPython's C pickler over stand-ins of torch's objects (tests/interop/torch_pickle_fixtures.py).
TEST(TorchPickle, GoldenPayloadsDecodeAndEncodeByteForByte) {
  const json expected = json::parse(test::read_bytes(kFixtures / "tensor_payload_expected.json"));
  ASSERT_EQ(expected["files"].size(), 4u);
  for (const auto& [file, list] : expected["files"].items()) {
    std::vector<NamedTensor> want;
    for (const auto& t : list) {
      const auto dtype = parse_dtype(t["dtype"].get<std::string>());
      ASSERT_TRUE(dtype) << t.dump();
      want.push_back(tensor(t["name"], *dtype, t["shape"].get<std::vector<int64_t>>(), t["seed"].get<int>()));
    }
    const std::string golden = test::read_bytes(kFixtures / file);
    ASSERT_FALSE(golden.empty()) << file;
    SCOPED_TRACE(file);
    expect_same(torch_pickle::decode(golden), want);
    EXPECT_TRUE(torch_pickle::encode(want) == golden) << file << ": encode differs from CPython's pickle";
  }
}

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    b.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return b;
}

// Payloads real torch 2.11 wrote (tests/interop/torch_pickle_check.py --write-real-fixtures): plain pickle.dumps of
// CPU tensors and views decode to torch's own bytes; ForkingPickler's references to the sender, torch's float8
// pickle and protocol 2 are refused naming the global (the exact messages are checked below).
TEST(TorchPickle, Torch211PayloadsDecodeOrAreRefusedByName) {
  const json expected = json::parse(test::read_bytes(kFixtures / "torch211_expected.json"));
  size_t decoded = 0, refused = 0;
  for (const auto& [file, want] : expected["files"].items()) {
    SCOPED_TRACE(file);
    const std::string payload = test::read_bytes(kFixtures / file);
    ASSERT_FALSE(payload.empty());
    if (want.contains("refused_global")) {
      const std::string msg = test::error_message([&] { torch_pickle::decode(payload); }, ErrorKind::Format);
      EXPECT_NE(msg.find("global " + want["refused_global"].get<std::string>()), std::string::npos) << msg;
      ++refused;
      continue;
    }
    std::vector<NamedTensor> ts;
    for (const auto& t : want["tensors"]) {
      const auto dtype = parse_dtype(t["dtype"].get<std::string>());
      ASSERT_TRUE(dtype);
      ts.push_back({t["name"], *dtype, t["shape"].get<std::vector<int64_t>>(), from_hex(t["hex"])});
    }
    expect_same(torch_pickle::decode(payload), ts);
    ++decoded;
  }
  EXPECT_GE(decoded, 4u);
  EXPECT_GE(refused, 5u);
}

TEST(TorchPickle, RefusesForkingPicklerSharedMemoryNamingTheGlobal) {
  const std::string tail =
      "; wsbench serve accepts only self-contained tensor payloads (plain pickle.dumps of CPU tensors, as "
      "wsb::torch_pickle::encode writes)";
  auto refusal = [](const std::string& file) {
    return test::error_message([&] { torch_pickle::decode(test::read_bytes(kFixtures / file)); }, ErrorKind::Format);
  };
  EXPECT_EQ(refusal("torch211_forking_fd.bin"),
            "torch pickle: offset 141: global torch.multiprocessing.reductions.rebuild_storage_fd refers to a file "
            "descriptor of the sending process" +
                tail);
  EXPECT_EQ(refusal("torch211_forking_file_system.bin"),
            "torch pickle: offset 147: global torch.multiprocessing.reductions.rebuild_storage_filename refers to a "
            "shared-memory file of the sending process" +
                tail);
  EXPECT_EQ(refusal("torch211_forking_cuda.bin"),
            "torch pickle: offset 74: global torch.multiprocessing.reductions.rebuild_cuda_tensor refers to a CUDA IPC "
            "handle of the sending process" +
                tail);
}

// Small hand-made pickles: PROTO 4 then the opcodes.
std::string pk(const std::string& body) { return std::string("\x80\x04", 2) + body; }

std::string refusal_of(const std::string& payload) {
  return test::error_message([&] { torch_pickle::decode(payload); }, ErrorKind::Format);
}

TEST(TorchPickle, RefusesTruncatedInputAtEveryLength) {
  const std::string full = torch_pickle::encode({tensor("model.norm.weight", DType::BF16, {2, 3}, 1)});
  for (size_t n = 0; n < full.size(); ++n) EXPECT_FALSE(refusal_of(full.substr(0, n)).empty()) << n;
  EXPECT_EQ(refusal_of(full.substr(0, 20)), "torch pickle: offset 2: truncated: FRAME declares 401 bytes, 9 left");
  EXPECT_EQ(refusal_of(pk("\x8c\x11model.n")),
            "torch pickle: offset 2: truncated: SHORT_BINUNICODE declares 17 bytes, 7 left");
  EXPECT_EQ(refusal_of(pk("]\x94")), "torch pickle: offset 4: truncated: no STOP opcode");
  EXPECT_EQ(refusal_of(""), "torch pickle: offset 0: truncated: no STOP opcode");
  EXPECT_EQ(refusal_of(pk("J\x01\x02")), "torch pickle: offset 2: truncated: BININT needs 4 bytes, 2 left");
  // Inside a _load_from_bytes payload: its sys_info pickle cut short (inner offset 27 is a BINUNICODE whose
  // 4-byte length has 2 bytes left), wrapped in a well-formed outer pickle whose bytes start at offset 36.
  const size_t blob_at = full.find(std::string("\x80\x02\x8a\x0a", 4));
  ASSERT_NE(blob_at, std::string::npos);
  const std::string cut_blob = full.substr(blob_at, 30);
  const std::string outer = pk("ctorch.storage\n_load_from_bytes\nC" +
                               std::string(1, static_cast<char>(cut_blob.size())) + cut_blob + "\x85R.");
  EXPECT_EQ(refusal_of(outer),
            "torch pickle: _load_from_bytes payload at offset 36, inner offset 27: truncated: BINUNICODE needs 4 "
            "bytes, 2 left");
}

TEST(TorchPickle, RefusesUnknownAndUnsupportedOpcodes) {
  EXPECT_EQ(refusal_of(pk("\xff")), "torch pickle: offset 2: unknown opcode 0xff");
  EXPECT_EQ(refusal_of(pk("]\x94)b.")), "torch pickle: offset 5: unsupported opcode BUILD (0x62)");
  EXPECT_EQ(refusal_of(pk("N0.")), "torch pickle: offset 3: unsupported opcode POP (0x30)");
  EXPECT_EQ(refusal_of(std::string("\x80\x01]\x94.", 5)), "torch pickle: offset 0: pickle protocol 1 is not 2 to 5");
  EXPECT_EQ(refusal_of(std::string("]\x94.", 3)),
            "torch pickle: offset 0: the pickle starts with 0x5d, not PROTO (0x80)");
}

TEST(TorchPickle, RefusesGlobalsOutsideTheAllowList) {
  const std::string tail =
      " is not allowed; wsbench serve accepts only self-contained tensor payloads (plain pickle.dumps of CPU tensors, "
      "as wsb::torch_pickle::encode writes)";
  EXPECT_EQ(refusal_of(pk("cos\nsystem\n.")), "torch pickle: offset 2: global os.system" + tail);
  EXPECT_EQ(refusal_of(pk("\x8c\x08"
                          "builtins\x8c\x04"
                          "eval\x93.")),
            "torch pickle: offset 18: global builtins.eval" + tail);
  // SafeUnpickler admits all of torch.*; decode admits only the rebuild functions it knows.
  EXPECT_EQ(refusal_of(pk("ctorch\nload\n.")), "torch pickle: offset 2: global torch.load" + tail);
  // Protocol 2 pickles bytes through _codecs.encode, which SafeUnpickler refuses too (plain pickle at protocol 2).
  EXPECT_EQ(refusal_of(test::read_bytes(kFixtures / "torch211_plain_p2.bin")),
            "torch pickle: offset 99: global _codecs.encode" + tail);
  // Inside a _load_from_bytes payload only the legacy storage classes.
  std::string inner = torch_pickle::encode({tensor("x", DType::I32, {3}, 1)});
  const size_t cls = inner.find("ctorch\nIntStorage\n");
  ASSERT_NE(cls, std::string::npos);
  inner.replace(cls, 18, "ctorch\nIntStorag\n\n");
  EXPECT_EQ(refusal_of(inner),
            "torch pickle: _load_from_bytes payload at offset 95, inner offset 154: global torch.IntStorag is not "
            "allowed in a _load_from_bytes payload (only torch.<Type>Storage)");
}

TEST(TorchPickle, RefusesMalformedStructures) {
  const std::string one = torch_pickle::encode({tensor("x", DType::I32, {3}, 1)});
  EXPECT_EQ(refusal_of(one + "."), "torch pickle: offset 386: 1 byte(s) after STOP");
  EXPECT_EQ(refusal_of(pk("K\x05.")), "torch pickle: the payload is of type int, not a list of (name, tensor) tuples");
  EXPECT_EQ(refusal_of(pk("]\x94K\x01\x85\x94"
                          "a.")),
            "torch pickle: entry 0 is of type tuple(int), not a (str, tensor) tuple");
  EXPECT_EQ(refusal_of(pk("]\x94h\x07.")), "torch pickle: offset 4: BINGET of memo 7, which was never stored");
  // The memo lets a list contain itself; the reader must neither loop nor keep the cycle alive (the sanitizer
  // builds check the latter).
  EXPECT_EQ(refusal_of(pk(std::string("]\x94h\x00"
                                      "a.",
                                      6))),
            "torch pickle: entry 0 is of type list, not a (str, tensor) tuple");
  EXPECT_EQ(refusal_of(pk("]\x94N.")), "torch pickle: offset 5: STOP with 2 values and 0 marks on the stack");
  // A size that reaches past the storage: [3] int32 declared as [4].
  std::string bigger = one;
  const size_t size_at = bigger.find(std::string("K\x03\x85", 3));
  ASSERT_NE(size_at, std::string::npos);
  bigger[size_at + 1] = 4;
  EXPECT_EQ(refusal_of(bigger),
            "torch pickle: offset 381: torch._utils._rebuild_tensor_v2: view (offset 0, size [4], stride [1]) of I32 "
            "reaches past its 12-byte storage");
  // A broadcast view (stride 0) would decode to more bytes than the payload holds.
  std::string broadcast = one;
  const size_t stride_at = broadcast.find(std::string("K\x01\x85", 3), size_at + 3);
  ASSERT_NE(stride_at, std::string::npos);
  broadcast[size_at + 1] = 100;
  broadcast[stride_at + 1] = 0;
  EXPECT_EQ(refusal_of(broadcast),
            "torch pickle: offset 381: torch._utils._rebuild_tensor_v2: view (offset 0, size [100], stride [0]) of "
            "I32 needs 400 bytes, more than its 12-byte storage holds (a broadcast view); send tensors contiguous");
  // The element count after the legacy pickles must match the persistent id's.
  std::string count = one;
  const size_t keys =
      count.find(std::string("q\x01"
                             "a.",
                             4));
  ASSERT_NE(keys, std::string::npos);
  count[keys + 4] = 2;
  EXPECT_EQ(refusal_of(count),
            "torch pickle: _load_from_bytes payload at offset 95, inner offset 215: the element count 2 differs from "
            "the persistent id's 3");
  // torch's own pickle of a float8 tensor names UntypedStorage, which torch 2.11 cannot load back.
  EXPECT_EQ(refusal_of(test::read_bytes(kFixtures / "torch211_plain_float8.bin")),
            "torch pickle: _load_from_bytes payload at offset 98, inner offset 154: global "
            "torch.storage.UntypedStorage: torch 2.11's _legacy_load reads the storage type's dtype, which "
            "UntypedStorage lacks, so torch (and SGLang) cannot load this payload (plain pickle.dumps of a float8 / "
            "uint16 / uint32 / uint64 tensor); send the storage as torch.ByteStorage, as wsb::torch_pickle::encode "
            "does");
}

TEST(TorchPickle, EncodeRefusesInconsistentTensors) {
  NamedTensor t = tensor("w", DType::BF16, {2, 3}, 1);
  t.bytes.pop_back();
  EXPECT_EQ(test::error_message([&] { torch_pickle::encode({t}); }, ErrorKind::Mismatch),
            "torch pickle: tensor 'w' has 11 bytes; BF16 [2, 3] needs 12");
  EXPECT_EQ(test::error_message(
                [&] {
                  torch_pickle::encode({{"n", DType::U8, {-1}, {}}});
                },
                ErrorKind::Mismatch),
            "torch pickle: tensor 'n' has an invalid shape [-1]");
  EXPECT_EQ(test::error_message(
                [&] {
                  torch_pickle::encode({{"bad\xff", DType::U8, {0}, {}}});
                },
                ErrorKind::Format),
            "torch pickle: tensor name 'bad\xff' is not valid UTF-8");
  // Non-ASCII names travel as UTF-8.
  const std::vector<NamedTensor> ts{tensor("layers.0.\xc3\xbc\xe2\x82\xac", DType::U8, {2}, 1)};
  expect_same(torch_pickle::decode(torch_pickle::encode(ts)), ts);
}

TEST(TorchPickle, Base64MatchesRfc4648AndIsStrict) {
  // RFC 4648 section 10 test vectors.
  const std::pair<std::string, std::string> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    const std::vector<uint8_t> bytes(plain.begin(), plain.end());
    EXPECT_EQ(torch_pickle::base64_encode(bytes), coded);
    EXPECT_EQ(torch_pickle::base64_decode(coded), bytes);
  }
  std::vector<uint8_t> all(70001);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint8_t>(i * 131 + 7);
  EXPECT_EQ(torch_pickle::base64_decode(torch_pickle::base64_encode(all)), all);
  EXPECT_EQ(test::error_message([] { torch_pickle::base64_decode("Zm9"); }, ErrorKind::Format),
            "base64: length 3 is not a multiple of 4");
  EXPECT_EQ(test::error_message([] { torch_pickle::base64_decode("Zm 9"); }, ErrorKind::Format),
            "base64: byte 0x20 at offset 2 is not in the base64 alphabet");
  EXPECT_EQ(test::error_message([] { torch_pickle::base64_decode("Zm9v\nZg="); }, ErrorKind::Format),
            "base64: byte 0x0a at offset 4 is not in the base64 alphabet");
  EXPECT_EQ(test::error_message([] { torch_pickle::base64_decode("Zg==Zm9v"); }, ErrorKind::Format),
            "base64: '=' at offset 2 before the end");
  EXPECT_EQ(test::error_message([] { torch_pickle::base64_decode("Z==="); }, ErrorKind::Format),
            "base64: '=' at offset 1 before the end");
}

// ---------------------------------------------------------------------------------------------------------------
// Files traded with tests/interop/torch_pickle_check.py on a host with torch.

std::vector<std::pair<std::string, std::vector<NamedTensor>>> interop_cases() {
  std::vector<std::pair<std::string, std::vector<NamedTensor>>> cases;
  std::vector<NamedTensor> dtypes;
  int seed = 100;
  for (DType dtype : kAllDTypes) {
    const std::string base = "model.layers.0." + std::string(dtype_name(dtype));
    dtypes.push_back(tensor(base + ".weight", dtype, {3, 4}, ++seed));
    dtypes.push_back(tensor(base + ".scalar", dtype, {}, ++seed));
    dtypes.push_back(tensor(base + ".cube", dtype, {2, 3, 2}, ++seed));
    dtypes.push_back(tensor(base + ".empty", dtype, {0, 5}, ++seed));
  }
  dtypes.push_back(tensor("model.layers.0.mlp.experts.w13_weight_packed.\xc3\xbc", DType::U8, {4, 16}, ++seed));
  cases.emplace_back("dtypes", std::move(dtypes));
  cases.emplace_back("big", std::vector<NamedTensor>{tensor("lm_head.weight", DType::BF16, {512, 300}, 1),
                                                     tensor("after", DType::F8_E4M3, {3, 3}, 2)});
  std::vector<NamedTensor> many;
  for (int i = 0; i < 1200; ++i) many.push_back(tensor("layer." + std::to_string(i), DType::F32, {i % 3 + 1}, i));
  cases.emplace_back("many", std::move(many));
  cases.emplace_back("empty_list", std::vector<NamedTensor>{});
  return cases;
}

TEST(TorchPickleInterop, WritesPayloadsForTheTorchCheck) {
  const char* out = std::getenv("WSBENCH_PICKLE_OUT");
  if (!out) GTEST_SKIP() << "WSBENCH_PICKLE_OUT is not set (tests/interop/torch_pickle_check.py sets it)";
  fs::create_directories(out);
  json manifest = json::array();
  for (const auto& [name, tensors] : interop_cases()) {
    const std::string payload = torch_pickle::encode(tensors);
    test::write_bytes(fs::path(out) / ("encode_" + name + ".bin"), payload);
    test::write_bytes(
        fs::path(out) / ("encode_" + name + ".b64"),
        torch_pickle::base64_encode(std::span(reinterpret_cast<const uint8_t*>(payload.data()), payload.size())));
    json list = json::array();
    for (const auto& t : tensors) {
      list.push_back({{"name", t.name},
                      {"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"b64", torch_pickle::base64_encode(t.bytes)}});
    }
    manifest.push_back(
        {{"case", name}, {"bin", "encode_" + name + ".bin"}, {"b64", "encode_" + name + ".b64"}, {"tensors", list}});
  }
  test::write_bytes(fs::path(out) / "manifest.json", manifest.dump(1));
}

TEST(TorchPickleInterop, DecodesPayloadsForTheTorchCheck) {
  const char* in = std::getenv("WSBENCH_PICKLE_IN");
  if (!in) GTEST_SKIP() << "WSBENCH_PICKLE_IN is not set (tests/interop/torch_pickle_check.py sets it)";
  for (const auto& entry : fs::directory_iterator(in)) {
    if (entry.path().extension() != ".bin") continue;
    json result;
    try {
      json list = json::array();
      for (const auto& t : torch_pickle::decode(test::read_bytes(entry.path()))) {
        list.push_back({{"name", t.name},
                        {"dtype", dtype_name(t.dtype)},
                        {"shape", t.shape},
                        {"b64", torch_pickle::base64_encode(t.bytes)}});
      }
      result["tensors"] = list;
    } catch (const Error& e) {
      result["error"] = e.what();
    }
    test::write_bytes(fs::path(entry.path()).replace_extension(".result.json"), result.dump(1));
  }
}

}  // namespace
}  // namespace wsb
