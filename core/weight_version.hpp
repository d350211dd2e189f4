#pragma once
// A weight version as engines report it: any string. wsbench's own versions are integers written as six digits
// ("000003"); servers report them as strings ("3", "000003"), as integers (a --weight-update-staging fork), or as
// "default" when started without --weight-version (upstream SGLang, python/sglang/srt/server_args.py:1112-1115 at
// modal-projects/sglang@8905cbd42). Versions compare by numeric value when both have one.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace wsb {

struct WeightVersion {
  std::string text;               ///< exactly as reported ("000003", "3", "default", "policy-7")
  std::optional<uint32_t> value;  ///< the number when `text` is all decimal digits (< 2^32), else nullopt

  /// The version an SGLang server reports when started without --weight-version.
  bool is_default() const { return text == "default"; }
  /// True when this version stands for wsbench version `version`: equal numeric value.
  bool is(uint32_t version) const { return value && *value == version; }

  /// Parses any string. Never throws.
  static WeightVersion parse(const std::string& text);
  /// wsbench's own form: the six-digit string of `version`.
  static WeightVersion of(uint32_t version);
  /// A JSON string or non-negative integer. Throws Error(Format) naming `where` for any other JSON type.
  static WeightVersion from_json(const nlohmann::json& j, const std::string& where);

  bool operator==(const WeightVersion& other) const { return text == other.text; }
};

/// "000003", or "default (the server's boot version)", or the text in quotes for a non-numeric version.
std::string describe(const WeightVersion& version);

}  // namespace wsb
