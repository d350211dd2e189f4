// Writes the seed corpora of the fuzz targets: `fuzz_make_corpus DIR` replaces the files in DIR/<what>/ for each
// fuzz_<what> target. Valid seeds come from the project's own writers and encoders (build_safetensors_header,
// write_safetensors, write_checkpoint_index with manifest_metadata, encode_delta), plus the safetensors file the
// reference library wrote (tests/fixtures), so the fuzzer starts from real structure; near-valid seeds each break
// one rule, so the refusal paths are covered from the first run. Output is deterministic (fixed patterns, fixed
// zstd level): regenerating on the same zstd version gives the same bytes.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/checkpoint/checkpoint.hpp"
#include "models/checkpoint/file_io.hpp"
#include "models/checkpoint/safetensors.hpp"
#include "models/checkpoint/safetensors_header.hpp"
#include "publication/delta_codec.hpp"
#include "publication/zstd_frame.hpp"
#include "publication/publication.hpp"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

fs::path g_root;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Starts a target's directory afresh.
void clear(const std::string& what) {
  fs::create_directories(g_root / what);
  for (const auto& entry : fs::directory_iterator(g_root / what)) fs::remove(entry.path());
}

void put(const std::string& what, const std::string& name, std::string_view bytes) {
  std::ofstream out(g_root / what / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void put(const std::string& what, const std::string& name, const Bytes& bytes) {
  put(what, name, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::string le_u64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

Bytes le_u32(uint32_t v) { return {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)}; }

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// The fuzz targets' base tensor: the same pattern, so a seed's target bytes are meaningful.
Bytes pattern(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
  return b;
}

/// `base` with every `stride`-th byte changed: a sparse update, as a real delta is.
Bytes perturbed(const Bytes& base, size_t stride) {
  Bytes t = base;
  for (size_t i = 0; i < t.size(); i += stride) t[i] = static_cast<uint8_t>(t[i] + 1);
  return t;
}

// --- safetensors headers and files ---------------------------------------------------------------------------

std::vector<std::vector<wsb::TensorSpec>> header_specs() {
  using wsb::DType;
  return {
      {{"w", DType::F32, {2, 3}}},
      {{"scalar", DType::BF16, {}}},
      {{"empty", DType::I64, {0, 3}}, {"b", DType::U8, {5}}},
      {{"model.layers.0.mlp.experts.0.w1.weight", DType::F8_E4M3, {4, 8}},
       {"model.layers.0.mlp.experts.0.w1.weight_scale", DType::F32, {4, 1}},
       {"model.layers.0.mlp.experts.0.w1.blocks", DType::U8, {4, 2, 16}},
       {"model.layers.0.mlp.experts.0.w1.scales", DType::F8_E8M0, {4, 2}}},
      {{"a", DType::BOOL, {1}}, {"b", DType::I8, {1}}, {"c", DType::U16, {1}}, {"d", DType::I16, {1}},
       {"e", DType::U32, {1}}, {"f", DType::I32, {1}}, {"g", DType::U64, {1}}, {"h", DType::F16, {1}},
       {"i", DType::F64, {1}}, {"j", DType::F8_E5M2, {1}}},
      {{"delta.payload", DType::U8, {37}}},
  };
}

void safetensors_corpora(const fs::path& reference) {
  clear("safetensors_header");
  clear("safetensors_file");
  const std::map<std::string, std::string> checksums{{"w", "0123456789abcdef0123456789abcdef"}};
  int n = 0;
  for (const auto& specs : header_specs()) {
    for (bool with_metadata : {false, true}) {
      std::map<std::string, std::string> metadata;
      if (with_metadata) metadata = {{"format", "pt"}, {specs.front().name, std::string(32, 'a')}};
      const std::string header = wsb::build_safetensors_header(specs, metadata, "seed");
      const std::string name = "valid_" + std::to_string(n++);
      put("safetensors_header", name, header);
      uint64_t data_bytes = 0;
      for (const auto& spec : specs) data_bytes += spec.bytes();
      put("safetensors_file", name, le_u64(header.size()) + header + std::string(data_bytes, '\x5a'));
    }
  }
  // What the reference library (safetensors 0.8.0) writes: its header alone, and the whole file.
  const std::string file = read_file(reference);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | static_cast<uint8_t>(file[i]);
  put("safetensors_header", "reference_small", file.substr(8, length));
  put("safetensors_file", "reference_small", file);

  // One rule broken each.
  const std::map<std::string, std::string> bad_headers{
      {"near_hole", R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"y":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})"},
      {"near_overlap", R"({"x":{"dtype":"U8","shape":[12],"data_offsets":[0,12]},"y":{"dtype":"U8","shape":[12],"data_offsets":[8,20]}})"},
      {"near_zero_inside", R"({"x":{"dtype":"U8","shape":[12],"data_offsets":[0,12]},"z":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}})"},
      {"near_shape_bytes", R"({"x":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}})"},
      {"near_overflow", R"({"x":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"},
      {"near_negative", R"({"x":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})"},
      {"near_dtype", R"({"x":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})"},
      {"near_dup", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})"},
      {"near_dup_field", R"({"w":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})"},
      {"near_unknown_field", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":0}})"},
      {"near_metadata", R"({"__metadata__":{"k":1},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})"},
      {"near_begin_gt_end", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[2,1]}})"},
      {"near_float_offset", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1.0]}})"},
      {"near_number_range", R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1e400]}})"},
      {"near_deep", R"({"w":{"dtype":"U8","shape":[[[[[[[[1]]]]]]]],"data_offsets":[0,1]}})"},
      {"near_utf8", "{\"w\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}"},
      {"near_escape", R"({"w\u0000\ud83d\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})"},
      {"near_root", "[1,2]"},
  };
  for (const auto& [name, header] : bad_headers) {
    put("safetensors_header", name, header);
    put("safetensors_file", name, le_u64(header.size()) + header + std::string(12, '\0'));
  }
  const std::string ok = R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
  put("safetensors_file", "near_trailing", le_u64(ok.size()) + ok + "abcdef");
  put("safetensors_file", "near_truncated_data", le_u64(ok.size()) + ok + "ab");
  put("safetensors_file", "near_truncated_header", le_u64(ok.size() + 10) + ok);
  put("safetensors_file", "near_length_limit", le_u64(wsb::kSafetensorsMaxHeaderBytes + 1) + ok);
  put("safetensors_file", "near_short", std::string("\x02\x00\x00", 3));
}

// --- index / manifest ----------------------------------------------------------------------------------------

void index_corpus() {
  clear("index_manifest");
  char tmpl[] = "/tmp/wsb-fuzz-corpus-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  const fs::path dir = tmpl;
  auto write_index = [&](const std::string& name, const wsb::CheckpointIndex& index) {
    const fs::path path = dir / wsb::kIndexFileName;
    wsb::write_checkpoint_index(path, index);
    put("index_manifest", name, read_file(path));
  };
  // What PublicationWriter::commit writes: manifest_metadata + total_size + weight_map.
  wsb::PublicationManifest full;
  full.version = 0;
  wsb::CheckpointIndex index;
  index.metadata = wsb::manifest_metadata(full);
  index.total_size = 4096;
  index.weight_map = {{"model.embed_tokens.weight", wsb::shard_file_name(1, 2)},
                      {"model.layers.0.self_attn.q_proj.weight", wsb::shard_file_name(2, 2)}};
  write_index("valid_full", index);
  for (auto encoding : {wsb::DeltaEncoding::Xor, wsb::DeltaEncoding::Overwrite}) {
    wsb::PublicationManifest delta;
    delta.version = 3;
    delta.base_version = 2;
    delta.kind = wsb::PublicationKind::Delta;
    delta.encoding = encoding;
    delta.compression_format = "zstd";
    index.metadata = wsb::manifest_metadata(delta);
    index.weight_map = {{"a", "model-00001-of-00001.safetensors"}, {"b", "sub/dir/model.safetensors"}};
    write_index(std::string("valid_delta_") + std::string(wsb::delta_encoding_name(encoding)), index);
  }
  // wsbench's own formats: several frames per payload, one checksum per 32 MiB range.
  index.metadata = wsb::manifest_metadata(
      wsb::delta_manifest(4, wsb::DeltaEncoding::Xor, wsb::PayloadFraming::Frames, uint64_t{32} << 20));
  write_index("valid_delta_frames_ranges", index);
  // Hugging Face style: numbers among the metadata, no wsbench fields (parse_manifest refuses: no version).
  put("index_manifest", "valid_hf",
      R"({"metadata":{"total_size":250752,"total_parameters":125376,"scale":0.5},"weight_map":{"a":"s1.safetensors"}})");
  const std::map<std::string, std::string> near{
      {"near_version", R"({"metadata":{"version":"00001"},"weight_map":{}})"},
      {"near_version_alpha", R"({"metadata":{"version":"00000a"},"weight_map":{}})"},
      {"near_encoding", R"({"metadata":{"version":"000001","base_version":"000000","delta_encoding":"xz","compression_format":"zstd"},"weight_map":{}})"},
      {"near_no_base", R"({"metadata":{"version":"000001","delta_encoding":"xor","compression_format":"zstd"},"weight_map":{}})"},
      {"near_no_compression", R"({"metadata":{"version":"000001","base_version":"000000","delta_encoding":"overwrite"},"weight_map":{}})"},
      {"near_compression", R"({"metadata":{"version":"000001","base_version":"000000","delta_encoding":"xor","compression_format":"lz4"},"weight_map":{}})"},
      {"near_checksum", R"({"metadata":{"version":"000001","checksum_format":"sha256"},"weight_map":{}})"},
      {"near_range_bytes", R"({"metadata":{"version":"000001","checksum_format":"xxh3-128-ranges","checksum_range_bytes":"4096"},"weight_map":{}})"},
      {"near_total_string", R"({"metadata":{"version":"000001","total_size":"18446744073709551616"},"weight_map":{}})"},
      {"near_total_negative", R"({"metadata":{"total_size":-3},"weight_map":{}})"},
      {"near_metadata_bool", R"({"metadata":{"flag":true},"weight_map":{}})"},
      {"near_shard_dotdot", R"({"metadata":{"version":"000001"},"weight_map":{"a":"../s.safetensors"}})"},
      {"near_shard_dot", R"({"metadata":{"version":"000001"},"weight_map":{"a":"./s.safetensors"}})"},
      {"near_shard_abs", R"({"metadata":{"version":"000001"},"weight_map":{"a":"/etc/passwd"}})"},
      {"near_shard_empty_part", R"({"metadata":{"version":"000001"},"weight_map":{"a":"d//s.safetensors"}})"},
      {"near_shard_nul", R"({"metadata":{"version":"000001"},"weight_map":{"a":"s\u0000.safetensors"}})"},
      {"near_shard_type", R"({"weight_map":{"a":1}})"},
      {"near_no_weight_map", R"({"metadata":{"version":"000001"}})"},
      {"near_dup", R"({"weight_map":{"a":"s.safetensors","a":"t.safetensors"}})"},
      {"near_number_range", R"({"metadata":{"total_parameters":-1e999},"weight_map":{}})"},
      {"near_truncated", R"({"weight_map":)"},
  };
  for (const auto& [name, text] : near) put("index_manifest", name, text);
  fs::remove_all(dir);
}

// --- delta payloads ------------------------------------------------------------------------------------------

void payload_corpora() {
  clear("xor_payload");
  clear("overwrite_payload");
  for (auto encoding : {wsb::DeltaEncoding::Xor, wsb::DeltaEncoding::Overwrite}) {
    const std::string what = std::string(wsb::delta_encoding_name(encoding)) + "_payload";
    auto seed = [&](const std::string& name, uint32_t size, const Bytes& payload) {
      put(what, name, concat(le_u32(size), payload));
    };
    for (size_t size : {size_t{0}, size_t{1}, size_t{7}, size_t{64}, size_t{4096}, size_t{1} << 20}) {
      for (size_t stride : {size_t{1}, size_t{97}}) {
        const Bytes base = pattern(size);
        const Bytes payload = wsb::encode_delta(encoding, base, perturbed(base, stride), 3);
        if (payload.size() > 16384) continue;  // keep the corpus small; dense large masks add no structure
        const std::string name = "valid_" + std::to_string(size) + "_stride" + std::to_string(stride);
        seed(name, static_cast<uint32_t>(size), payload);
        if (size < 64 || stride != 97) continue;
        // Near-valid variants of one real payload.
        seed("near_" + std::to_string(size) + "_size_minus_1", static_cast<uint32_t>(size - 1), payload);
        seed("near_" + std::to_string(size) + "_truncated", static_cast<uint32_t>(size),
             Bytes(payload.begin(), payload.end() - 3));
        seed("near_" + std::to_string(size) + "_trailing", static_cast<uint32_t>(size), concat(payload, {0}));
        seed("near_" + std::to_string(size) + "_two_frames", static_cast<uint32_t>(size), concat(payload, payload));
        Bytes flipped = payload;
        flipped[flipped.size() / 2] ^= 0x40;
        seed("near_" + std::to_string(size) + "_corrupt", static_cast<uint32_t>(size), flipped);
        if (encoding == wsb::DeltaEncoding::Xor && size == (size_t{1} << 20) && payload.size() > 4215) {
          // Two bit flips fuzz_xor_payload found (with zstd 1.5.4): zstd's one-shot decoder accepts the frame,
          // its streaming decoder reports corruption. Another zstd version may encode differently.
          Bytes oneshot_only = payload;
          oneshot_only[1581] ^= 0x20;
          oneshot_only[4215] ^= 0x40;
          seed("near_" + std::to_string(size) + "_oneshot_only", static_cast<uint32_t>(size), oneshot_only);
        }
      }
    }
    // Hand-built frames of 3 RLE blocks (384 KiB) with a Window_Descriptor at and just beyond zstd's default
    // decoder limit of 2^27: the one-shot and streaming decoders once disagreed on the second.
    for (auto [name, window] : {std::pair{"valid_window_at_limit", uint8_t{17 << 3}},
                                std::pair{"near_window_beyond_limit", uint8_t{17 << 3 | 1}}}) {
      const uint32_t block = 128 * 1024;
      Bytes frame{0x28, 0xB5, 0x2F, 0xFD, 0x80, window};
      frame = concat(frame, le_u32(3 * block));
      for (uint32_t i = 0; i < 3; ++i) {
        Bytes header = le_u32(block << 3 | 1u << 1 | (i == 2 ? 1u : 0u));  // RLE block, Last_Block on the third
        header.back() = 'A';  // 3 header bytes, then the RLE byte
        frame = concat(frame, header);
      }
      seed(name, 3 * block, frame);
    }
    // A bomb: 64 MiB of zeros compress to a few KiB, declared to a small tensor.
    seed("near_bomb", 4096, wsb::zstd_compress(Bytes(size_t{64} << 20, 0), 3));
    seed("near_not_zstd", 16, Bytes{'n', 'o', 't', ' ', 'z', 's', 't', 'd'});
  }
  // Overwrite bodies that break one rule each (the xor format has no body structure beyond its length).
  auto body = [](std::initializer_list<uint32_t> positions, std::initializer_list<uint8_t> values, Bytes extra = {}) {
    Bytes raw = le_u32(static_cast<uint32_t>(positions.size()));
    for (uint32_t p : positions) raw = concat(raw, le_u32(p));
    raw.insert(raw.end(), values.begin(), values.end());
    return wsb::zstd_compress(concat(raw, extra), 3);
  };
  auto overwrite_seed = [](const std::string& name, uint32_t size, const Bytes& payload) {
    put("overwrite_payload", name, concat(le_u32(size), payload));
  };
  overwrite_seed("near_unsorted", 16, body({5, 3}, {1, 2}));
  overwrite_seed("near_duplicate", 16, body({3, 3}, {1, 2}));
  overwrite_seed("near_out_of_range", 16, body({1, 16}, {1, 2}));
  overwrite_seed("near_trailing", 16, body({1, 2}, {1, 2}, {0}));
  overwrite_seed("near_count_lie", 16, wsb::zstd_compress(concat(le_u32(1000), le_u32(1)), 3));
  overwrite_seed("near_short_count", 16, wsb::zstd_compress(Bytes{1, 0}, 3));
  overwrite_seed("valid_empty", 16, body({}, {}));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR   (e.g. fuzz/corpus)\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  try {
    safetensors_corpora(fs::path(WSBENCH_FIXTURES_DIR) / "safetensors" / "reference_small.safetensors");
    index_corpus();
    payload_corpora();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_corpus: %s\n", e.what());
    return 1;
  }
  return 0;
}
