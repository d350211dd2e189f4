#include "cli/inspect.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "models/checkpoint/checkpoint.hpp"
#include "core/numeric.hpp"
#include "models/quant/codecs.hpp"
#include "models/quant/quant_role.hpp"

namespace wsb {
namespace fs = std::filesystem;

namespace {

struct KindName {
  DecodeKind kind;
  std::string_view name;
};
constexpr std::array<KindName, 10> kKindNames{{{DecodeKind::None, "none"},
                                              {DecodeKind::Int, "int"},
                                              {DecodeKind::E4M3, "e4m3"},
                                              {DecodeKind::E5M2, "e5m2"},
                                              {DecodeKind::E8M0, "e8m0"},
                                              {DecodeKind::E2M1, "e2m1"},
                                              {DecodeKind::BF16, "bf16"},
                                              {DecodeKind::F16, "f16"},
                                              {DecodeKind::F32, "f32"},
                                              {DecodeKind::F64, "f64"}}};

bool is_integer(DType dtype) {
  switch (dtype) {
    case DType::U8:
    case DType::I8:
    case DType::U16:
    case DType::I16:
    case DType::U32:
    case DType::I32:
    case DType::U64:
    case DType::I64:
      return true;
    default:
      return false;
  }
}

template <typename T>
T load_le(const uint8_t* p) {  // safetensors data is little-endian, as is every host wsbench targets
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Int decode of one integer dtype into int64 values (everything but U64 fits).
template <typename T>
std::vector<int64_t> decode_ints(std::span<const uint8_t> bytes) {
  std::vector<int64_t> out(bytes.size() / sizeof(T));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(load_le<T>(bytes.data() + i * sizeof(T)));
  return out;
}

DecodedValues decode_int(DType dtype, std::span<const uint8_t> bytes) {
  switch (dtype) {
    case DType::BOOL:
    case DType::U8:
      return decode_ints<uint8_t>(bytes);
    case DType::I8:
      return decode_ints<int8_t>(bytes);
    case DType::U16:
      return decode_ints<uint16_t>(bytes);
    case DType::I16:
      return decode_ints<int16_t>(bytes);
    case DType::U32:
      return decode_ints<uint32_t>(bytes);
    case DType::I32:
      return decode_ints<int32_t>(bytes);
    case DType::I64:
      return decode_ints<int64_t>(bytes);
    default: {  // U64 (decode_fits admitted nothing else)
      std::vector<uint64_t> out(bytes.size() / 8);
      for (size_t i = 0; i < out.size(); ++i) out[i] = load_le<uint64_t>(bytes.data() + i * 8);
      return out;
    }
  }
}

// Float decode: `width` bytes per stored code, `decode` maps the code to its value.
template <typename Code, typename Fn>
std::vector<double> decode_codes(std::span<const uint8_t> bytes, Fn decode) {
  std::vector<double> out(bytes.size() / sizeof(Code));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(decode(load_le<Code>(bytes.data() + i * sizeof(Code))));
  return out;
}

}  // namespace

std::string_view decode_kind_name(DecodeKind kind) {
  for (const auto& k : kKindNames) {
    if (k.kind == kind) return k.name;
  }
  return "?";
}

std::optional<DecodeKind> parse_decode_kind(std::string_view name) {
  for (const auto& k : kKindNames) {
    if (k.name == name) return k.kind;
  }
  return std::nullopt;
}

bool decode_fits(DecodeKind kind, DType dtype) {
  // Raw codes may sit in an integer tensor of the code's width (MXFP4 checkpoints keep E8M0 scales in U8).
  const auto own_or_int = [dtype](DType own, DType u, DType i) { return dtype == own || dtype == u || dtype == i; };
  switch (kind) {
    case DecodeKind::None:
      return true;
    case DecodeKind::Int:
      return is_integer(dtype) || dtype == DType::BOOL;
    case DecodeKind::E4M3:
      return own_or_int(DType::F8_E4M3, DType::U8, DType::I8);
    case DecodeKind::E5M2:
      return own_or_int(DType::F8_E5M2, DType::U8, DType::I8);
    case DecodeKind::E8M0:
      return own_or_int(DType::F8_E8M0, DType::U8, DType::I8);
    case DecodeKind::E2M1:  // no stored FP4 dtype: two codes per byte of a U8/I8 tensor
      return dtype == DType::U8 || dtype == DType::I8;
    case DecodeKind::BF16:
      return own_or_int(DType::BF16, DType::U16, DType::I16);
    case DecodeKind::F16:
      return own_or_int(DType::F16, DType::U16, DType::I16);
    case DecodeKind::F32:
      return own_or_int(DType::F32, DType::U32, DType::I32);
    case DecodeKind::F64:
      return own_or_int(DType::F64, DType::U64, DType::I64);
  }
  return false;
}

DecodeKind auto_decode_kind(const TensorSpec& spec) {
  switch (quant_role(spec).format) {
    case CodeFormat::E4M3:
      return DecodeKind::E4M3;
    case CodeFormat::E5M2:
      return DecodeKind::E5M2;
    case CodeFormat::E8M0:
      return DecodeKind::E8M0;
    case CodeFormat::E2M1x2:
      return DecodeKind::E2M1;
    case CodeFormat::Ieee:
      switch (spec.dtype) {
        case DType::BF16:
          return DecodeKind::BF16;
        case DType::F16:
          return DecodeKind::F16;
        case DType::F32:
          return DecodeKind::F32;
        default:
          return DecodeKind::F64;
      }
    case CodeFormat::None:
      break;
  }
  return decode_fits(DecodeKind::Int, spec.dtype) ? DecodeKind::Int : DecodeKind::None;
}

DecodeRequest parse_decode_request(std::string_view text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw Error(ErrorKind::Format, fmt::format("--decode '{}': expected TENSOR=KIND", text));
  }
  const std::string_view kind_text = text.substr(eq + 1);
  const auto kind = parse_decode_kind(kind_text);
  if (!kind) {
    std::string known;
    for (const auto& k : kKindNames) known += fmt::format("{}{}", known.empty() ? "" : ", ", k.name);
    throw Error(ErrorKind::Format, fmt::format("--decode '{}': unknown decode kind '{}' (known: {})", text, kind_text, known));
  }
  return DecodeRequest{std::string(text.substr(0, eq)), *kind};
}

size_t decoded_count(const DecodedValues& values) {
  return std::visit([](const auto& v) { return v.size(); }, values);
}

DecodedValues decode_tensor(const TensorSpec& spec, std::span<const uint8_t> bytes, DecodeKind kind) {
  if (!decode_fits(kind, spec.dtype)) {
    throw Error(ErrorKind::Mismatch, fmt::format("tensor '{}' is {} {}: cannot decode it as {}", spec.name,
                                                 dtype_name(spec.dtype), shape_string(spec.shape), decode_kind_name(kind)));
  }
  if (bytes.size() != spec.bytes()) {
    throw Error(ErrorKind::Mismatch, fmt::format("tensor '{}' is {} {} ({} bytes) but {} bytes were given", spec.name,
                                                 dtype_name(spec.dtype), shape_string(spec.shape), spec.bytes(),
                                                 bytes.size()));
  }
  switch (kind) {
    case DecodeKind::None:
      return std::vector<double>{};
    case DecodeKind::Int:
      return decode_int(spec.dtype, bytes);
    case DecodeKind::E4M3:
      return decode_codes<uint8_t>(bytes, [](uint8_t c) { return e4m3_to_float(c); });
    case DecodeKind::E5M2:  // E5M2 is binary16 with the low mantissa byte dropped (OFP8 rev 1.0, section 5)
      return decode_codes<uint8_t>(bytes, [](uint8_t c) { return f16_to_float(static_cast<uint16_t>(c << 8)); });
    case DecodeKind::E8M0:
      return decode_codes<uint8_t>(bytes, [](uint8_t c) { return e8m0_to_float(c); });
    case DecodeKind::E2M1: {
      std::vector<double> out(bytes.size() * 2);
      for (size_t i = 0; i < out.size(); ++i) out[i] = e2m1_to_float(e2m1_packed_at(bytes.data(), i));
      return out;
    }
    case DecodeKind::BF16:
      return decode_codes<uint16_t>(bytes, [](uint16_t c) { return bf16_to_float(c); });
    case DecodeKind::F16:
      return decode_codes<uint16_t>(bytes, [](uint16_t c) { return f16_to_float(c); });
    case DecodeKind::F32:
      return decode_codes<uint32_t>(bytes, [](uint32_t c) { return std::bit_cast<float>(c); });
    case DecodeKind::F64:
      return decode_codes<uint64_t>(bytes, [](uint64_t c) { return std::bit_cast<double>(c); });
  }
  return std::vector<double>{};
}

std::string sha256_hex(std::span<const uint8_t> bytes) {
  struct Free {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw Error(ErrorKind::Io, "sha256: libcrypto could not start a SHA-256 digest");
  }
  // Fed in pieces: EVP_DigestUpdate takes size_t, but tensors of tens of GB stay well clear of any limit this way.
  constexpr size_t kChunk = size_t{1} << 30;
  for (size_t at = 0; at < bytes.size(); at += kChunk) {
    if (EVP_DigestUpdate(ctx.get(), bytes.data() + at, std::min(kChunk, bytes.size() - at)) != 1) {
      throw Error(ErrorKind::Io, "sha256: libcrypto digest update failed");
    }
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest.data(), &length) != 1) {
    throw Error(ErrorKind::Io, "sha256: libcrypto digest final failed");
  }
  std::string hex;
  hex.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

nlohmann::json decoded_value_json(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

Inspection inspect_checkpoint(const fs::path& path, const InspectOptions& options) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw Error(ErrorKind::Missing, fmt::format("inspect: {} does not exist", path.string()));
  }
  Inspection out;
  out.path = path;
  // Both forms end as (file name, SafetensorsFile) pairs; the reader keeps the mappings alive until we return.
  std::unique_ptr<CheckpointReader> reader;
  std::unique_ptr<SafetensorsFile> single;
  std::vector<std::pair<std::string, const SafetensorsFile*>> files;
  if (fs::is_directory(path, ec)) {
    reader = std::make_unique<CheckpointReader>(path);
    out.indexed = fs::exists(path / kIndexFileName, ec);
    out.index_metadata = reader->index().metadata;
    out.total_size = reader->index().total_size;
    for (const SafetensorsFile* shard : reader->shards()) {
      files.emplace_back(shard->path().lexically_relative(path).generic_string(), shard);
    }
  } else {
    single = std::make_unique<SafetensorsFile>(path);
    for (const SafetensorsEntry& e : single->entries()) out.total_size += e.bytes();
    files.emplace_back(path.filename().string(), single.get());
  }

  std::map<std::string, DecodeKind, std::less<>> requested;
  for (const DecodeRequest& r : options.decode) requested[r.tensor] = r.kind;  // the later request wins

  // A DELTA publication holds compressed payloads (1-D U8, zstd frames): not values, whatever the tensor's name.
  std::string payload;
  if (auto enc = out.index_metadata.find("delta_encoding"); enc != out.index_metadata.end()) {
    auto base = out.index_metadata.find("base_version");
    payload = fmt::format("zstd {} delta payload (compressed; base version {})", enc->second,
                          base == out.index_metadata.end() ? std::string("unknown") : base->second);
  }

  std::set<std::string, std::less<>> seen;
  for (const auto& [name, file] : files) {
    out.files.push_back(InspectedFile{name, fs::file_size(file->path()), file->data_start(), file->entries().size(),
                                      file->metadata()});
    for (const SafetensorsEntry& entry : file->entries()) {
      InspectedTensor t;
      t.spec = entry.spec();
      t.file = name;
      t.offset = file->data_start() + entry.begin;
      t.bytes = entry.bytes();
      const auto data = file->data(entry);
      t.sha256 = sha256_hex(data);
      auto req = requested.find(entry.name);
      t.requested = req != requested.end();
      t.payload = payload;
      t.decode = t.requested ? req->second : (payload.empty() ? auto_decode_kind(t.spec) : DecodeKind::None);
      if (t.requested && !decode_fits(t.decode, entry.dtype)) {
        throw Error(ErrorKind::Mismatch,
                    fmt::format("--decode {}={}: tensor '{}' is {} {} in {}, which {} cannot read", entry.name,
                                decode_kind_name(t.decode), entry.name, dtype_name(entry.dtype),
                                shape_string(entry.shape), file->path().string(), decode_kind_name(t.decode)));
      }
      if (options.values && t.decode != DecodeKind::None) t.values = decode_tensor(t.spec, data, t.decode);
      seen.insert(entry.name);
      out.tensors.push_back(std::move(t));
    }
  }
  for (const auto& [name, kind] : requested) {
    if (!seen.contains(name)) {
      throw Error(ErrorKind::Missing, fmt::format("--decode {}={}: no tensor '{}' in {}", name, decode_kind_name(kind),
                                                  name, path.string()));
    }
  }
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const InspectedTensor& a, const InspectedTensor& b) { return a.spec.name < b.spec.name; });
  return out;
}

nlohmann::json inspection_json(const Inspection& inspection) {
  using nlohmann::json;
  json files = json::array();
  for (const InspectedFile& f : inspection.files) {
    files.push_back({{"file", f.file},
                     {"size", f.size},
                     {"data_start", f.data_start},
                     {"tensors", f.tensors},
                     {"metadata", f.metadata}});
  }
  json tensors = json::array();
  for (const InspectedTensor& t : inspection.tensors) {
    json j = {{"name", t.spec.name},
              {"dtype", dtype_name(t.spec.dtype)},
              {"shape", t.spec.shape},
              {"file", t.file},
              {"offset", t.offset},
              {"bytes", t.bytes},
              {"sha256", t.sha256},
              {"decode", decode_kind_name(t.decode)},
              {"decode_source", t.requested ? "request" : "auto"}};
    if (!t.payload.empty()) j["payload"] = t.payload;
    if (t.values) {
      j["values_count"] = decoded_count(*t.values);
      json values = json::array();
      std::visit(
          [&values](const auto& v) {
            for (const auto& x : v) {
              if constexpr (std::is_same_v<std::decay_t<decltype(x)>, double>) {
                values.push_back(decoded_value_json(x));
              } else {
                values.push_back(x);
              }
            }
          },
          *t.values);
      j["values"] = std::move(values);
    }
    tensors.push_back(std::move(j));
  }
  return json{{"format", "wsbench-inspect/1"},
              {"path", inspection.path.string()},
              {"indexed", inspection.indexed},
              {"index_metadata", inspection.index_metadata},
              {"total_size", inspection.total_size},
              {"value_encoding",
               "values are exact: JSON numbers read as binary64 give the decoded value bit for bit; NaN and "
               "infinities are the strings \"nan\", \"inf\", \"-inf\"; e2m1 gives 2 values per byte, low nibble first"},
              {"files", std::move(files)},
              {"tensors", std::move(tensors)}};
}

}  // namespace wsb
