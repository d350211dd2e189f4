#pragma once
// `wsbench inspect`: what is in a checkpoint, tensor by tensor (name, dtype, shape, file, bytes, sha256) and, on
// request, every stored code decoded to a number by wsbench's own codecs (models/quant/codecs.hpp,
// core/numeric.hpp). The interop check (tests/interop/) compares this output with the reference
// safetensors library and torch's dtypes, so it must say exactly what wsbench reads.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/checkpoint/safetensors.hpp"

namespace wsb {

/// How the stored bytes of a tensor are read as numbers.
enum class DecodeKind : uint8_t {
  None,  ///< no values (opaque bytes)
  Int,   ///< integer dtypes and BOOL: the stored little-endian integer
  E4M3,  ///< one OFP8 E4M3 code per byte (F8_E4M3, or raw U8/I8 codes)
  E5M2,  ///< one OFP8 E5M2 code per byte: the upper byte of an IEEE binary16 (OFP8 spec rev 1.0, table 1)
  E8M0,  ///< one MX E8M0 scale per byte: 2^(code - 127), 0xFF NaN (F8_E8M0, or U8 as MXFP4 checkpoints store it)
  E2M1,  ///< two MX E2M1 codes per byte, element 2k in the low nibble of byte k (U8/I8 packed): 2 * numel values
  BF16,  ///< bfloat16 (BF16, or raw U16/I16 codes)
  F16,   ///< IEEE binary16 (F16, or raw U16/I16 codes)
  F32,   ///< IEEE binary32 (F32, or raw U32/I32 codes)
  F64,   ///< IEEE binary64 (F64, or raw U64/I64 codes)
};

/// "none", "int", "e4m3", "e5m2", "e8m0", "e2m1", "bf16", "f16", "f32", "f64" (the --decode spelling).
std::string_view decode_kind_name(DecodeKind kind);
/// Parses the --decode spelling; nullopt when unknown.
std::optional<DecodeKind> parse_decode_kind(std::string_view name);
/// True when a tensor of `dtype` can be read as `kind`: the kind's own dtype, or an integer dtype of the same
/// element width holding raw codes (E2M1 packs two codes per U8/I8 byte); None fits every dtype, Int every integer
/// dtype and BOOL.
bool decode_fits(DecodeKind kind, DType dtype);
/// The automatic decode of a tensor: by its dtype (F8_E4M3, F8_E5M2, F8_E8M0, BF16, F16, F32, F64; integers and BOOL
/// as Int), and for U8 by wsbench's quantization-role rule (models/quant/quant_role.hpp), the same rule the publisher
/// and the prepare-time code checks apply: "*_blocks" and NVFP4 "*weight" U8 are packed E2M1, "*_scales" U8 are
/// E8M0, any other U8 is Int.
DecodeKind auto_decode_kind(const TensorSpec& spec);

/// One `--decode NAME=KIND` request.
struct DecodeRequest {
  std::string tensor;  ///< exact tensor name
  DecodeKind kind = DecodeKind::None;
};
/// Parses "NAME=KIND" (the last '=' splits, so names may contain '='). Throws Error(Format) naming the argument
/// for a missing '=' or an empty name, and naming the kind and the accepted kinds for an unknown kind.
DecodeRequest parse_decode_request(std::string_view text);

/// The values of one tensor, in element order (row-major; E2M1: 2 * numel values, low nibble first). Float kinds
/// give binary64 values, exact because every E4M3/E5M2/E8M0/E2M1/BF16/F16/F32 value widens exactly; Int gives
/// int64 (every integer dtype but U64) or uint64 (U64), so no integer is rounded.
using DecodedValues = std::variant<std::vector<double>, std::vector<int64_t>, std::vector<uint64_t>>;
/// Number of values held.
size_t decoded_count(const DecodedValues& values);
/// Decodes `bytes` (the tensor's stored little-endian bytes, spec.bytes() long) as `kind`. Throws
/// Error(Mismatch) naming the tensor when the kind does not fit the dtype or the byte count is wrong.
DecodedValues decode_tensor(const TensorSpec& spec, std::span<const uint8_t> bytes, DecodeKind kind);

/// Lowercase hex SHA-256 (OpenSSL libcrypto EVP) of `bytes`. Throws Error(Io) when libcrypto fails.
std::string sha256_hex(std::span<const uint8_t> bytes);

/// A decoded value as JSON: a number (exact binary64; integers as JSON integers), or the strings "nan", "inf",
/// "-inf". A JSON parser that reads numbers as binary64 (Python's json, nlohmann) recovers the exact value.
nlohmann::json decoded_value_json(double value);

struct InspectOptions {
  bool values = false;                  ///< decode values (automatic decode, overridden per tensor by `decode`)
  std::vector<DecodeRequest> decode;    ///< later requests for the same tensor win
};

/// One tensor of an inspected checkpoint.
struct InspectedTensor {
  TensorSpec spec;
  std::string file;          ///< shard file name relative to the checkpoint directory (or the file's name)
  uint64_t offset = 0;       ///< absolute byte offset of the tensor's data in `file`
  uint64_t bytes = 0;
  std::string sha256;        ///< hex of the stored bytes
  DecodeKind decode = DecodeKind::None;  ///< what --values applies (auto or requested)
  bool requested = false;    ///< decode came from a --decode request
  std::optional<DecodedValues> values;   ///< with InspectOptions::values and decode != None
  /// In a DELTA publication (index metadata delta_encoding; DESIGN "Publication format"): "zstd <encoding> delta
  /// payload (compressed; base version <base_version>)", and decode is None unless requested; else "".
  std::string payload;
};

/// One safetensors file of the checkpoint.
struct InspectedFile {
  std::string file;
  uint64_t size = 0;         ///< file bytes
  uint64_t data_start = 0;   ///< 8 + header length
  size_t tensors = 0;
  std::map<std::string, std::string> metadata;  ///< `__metadata__`
};

struct Inspection {
  std::filesystem::path path;                   ///< the inspected directory or file
  bool indexed = false;                         ///< read through model.safetensors.index.json
  std::map<std::string, std::string> index_metadata;  ///< index "metadata" (without total_size)
  uint64_t total_size = 0;                      ///< index total_size (sum of tensor bytes when not indexed)
  std::vector<InspectedFile> files;             ///< in file-name order
  std::vector<InspectedTensor> tensors;         ///< sorted by name
};

/// Inspects a checkpoint directory (model.safetensors.index.json + shards, or model.safetensors; read with
/// CheckpointReader, so every cross-check of the loader applies) or a single .safetensors file. Throws
/// Error(Missing) naming the path when it does not exist, Error(Missing) naming the tensor for a --decode request
/// of a tensor the checkpoint lacks, Error(Mismatch) naming the tensor, its dtype and the kind when a request does
/// not fit the tensor's dtype, and every error of CheckpointReader / SafetensorsFile.
Inspection inspect_checkpoint(const std::filesystem::path& path, const InspectOptions& options);

/// The JSON form of an inspection (format "wsbench-inspect/1"; see cli/cmd_inspect.cpp for the schema).
nlohmann::json inspection_json(const Inspection& inspection);

/// The JSON of `wsbench codecs` (format "wsbench-codecs/1"): every code of E4M3 (256), E8M0 (256), E2M1 (16), a
/// fixed list of BF16 and F16 codes, each with its value (decoded_value_json) and float32 bit pattern, and the
/// encoders (float32 -> code) over a fixed list of probe values.
nlohmann::json codecs_json();

}  // namespace wsb
