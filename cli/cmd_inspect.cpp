// `wsbench inspect CHECKPOINT [--json OUT] [--values] [--decode TENSOR=KIND ...]`: what is in a checkpoint.
//
// Table (stdout, unless --json -): one row per tensor, sorted by name: name, dtype, shape, file, bytes, sha256; with
// --values an indented line per tensor with its decode kind and first 8 values.
//
// JSON (format "wsbench-inspect/1"):
//   {"format", "path", "indexed": bool (read through model.safetensors.index.json), "index_metadata": {str: str},
//    "total_size": int, "value_encoding": str,
//    "files": [{"file": relative name, "size", "data_start": 8 + header length, "tensors": count,
//               "metadata": __metadata__}],
//    "tensors": [{"name", "dtype": safetensors spelling, "shape": [int], "file", "offset": absolute data offset in
//                 the file, "bytes", "sha256": hex of the stored bytes, "decode": kind applied by --values ("none"
//                 when the bytes are opaque), "decode_source": "auto" | "request",
//                 in a DELTA publication "payload": "zstd <encoding> delta payload (compressed; base version B)"
//                 (decoded only on request), with --values and decode != none: "values_count", "values": [...] }]}
// Values are exact: a float kind's values are JSON numbers that read as binary64 give the decoded value bit for bit
// (NaN and infinities are the strings "nan", "inf", "-inf"); int values are JSON integers. e2m1 gives 2 * numel
// values (low nibble first).
//
// Automatic decode (cli/inspect.hpp auto_decode_kind): F8_E4M3 e4m3, F8_E5M2 e5m2, F8_E8M0 e8m0, BF16/F16/F32/F64
// by width, integers and BOOL int; U8 by wsbench's quantization-role rule: "*_blocks" and "*weight" packed e2m1,
// "*_scales" e8m0, others int. --decode TENSOR=KIND (repeatable, exact names) overrides it per tensor; a kind must fit
// the dtype (its own dtype or raw codes in an integer of the same width), "none" drops the values.
#include <algorithm>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/inspect.hpp"
#include "core/errors.hpp"

namespace wsb {
namespace {

constexpr size_t kTableValues = 8;

std::string value_text(double v) {
  const nlohmann::json j = decoded_value_json(v);
  return j.is_string() ? j.get<std::string>() : fmt::format("{}", v);
}

std::string values_preview(const DecodedValues& values) {
  std::string out;
  std::visit(
      [&out](const auto& v) {
        for (size_t i = 0; i < std::min(v.size(), kTableValues); ++i) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v[i])>, double>) {
            out += fmt::format("{}{}", i ? ", " : "", value_text(v[i]));
          } else {
            out += fmt::format("{}{}", i ? ", " : "", v[i]);
          }
        }
        if (v.size() > kTableValues) out += ", ...";
      },
      values);
  return out;
}

void print_table(const Inspection& inspection) {
  size_t name_width = 6;
  for (const InspectedTensor& t : inspection.tensors) name_width = std::max(name_width, t.spec.name.size());
  std::cout << fmt::format("# {}: {} tensors in {} file(s){}, {} bytes\n", inspection.path.string(),
                           inspection.tensors.size(), inspection.files.size(),
                           inspection.indexed ? " (indexed)" : "", inspection.total_size);
  std::cout << fmt::format("# {:<{}} {:<8} {:<18} {:<32} {:>12}  {}\n", "tensor", name_width, "dtype", "shape", "file",
                           "bytes", "sha256");
  for (const InspectedTensor& t : inspection.tensors) {
    std::cout << fmt::format("  {:<{}} {:<8} {:<18} {:<32} {:>12}  {}\n", t.spec.name, name_width,
                             dtype_name(t.spec.dtype), shape_string(t.spec.shape), t.file, t.bytes, t.sha256);
    if (!t.payload.empty() && !t.values) std::cout << fmt::format("    {}\n", t.payload);
    if (t.values) {
      std::cout << fmt::format("    {}{} ({} values): [{}]\n", decode_kind_name(t.decode),
                               t.requested ? " (requested)" : "", decoded_count(*t.values), values_preview(*t.values));
    }
  }
}

}  // namespace

int cmd_inspect(const InspectArgs& args) {
  InspectOptions options;
  options.values = args.values;
  for (const std::string& text : args.decode) options.decode.push_back(parse_decode_request(text));
  const Inspection inspection = inspect_checkpoint(args.checkpoint, options);
  if (args.json_out == "-") {
    std::cout << inspection_json(inspection).dump(1) << "\n";
    return 0;
  }
  print_table(inspection);
  if (!args.json_out.empty()) {
    std::ofstream out(args.json_out);
    out << inspection_json(inspection).dump(1) << "\n";
    out.close();
    if (!out) throw Error(ErrorKind::Io, fmt::format("inspect: cannot write {}", args.json_out.string()));
  }
  return 0;
}

}  // namespace wsb
