// `wsbench forward CHECKPOINT_DIR --tokens 1,17,42,... [--tp N] [--backend cpu|cuda] --json OUT`: the reference
// forward's teacher-forced float32 logits over a token sequence, to compare with transformers' forward of the same
// checkpoint.
//
// JSON: {"checkpoint": path, "model": profile id, "backend", "tp", "tokens": [int],
//        "logits": [[float, ... vocab], ... one row per position]}
// Row t holds the logits after tokens[0..t]. Each float is printed in its shortest form that reads back to the same
// float32 (fmt's shortest round trip), so a reader parsing it as binary64 and rounding to float32 gets the computed
// value bit for bit; NaN and infinities are the strings "nan", "inf", "-inf" (as `wsbench inspect --values`).
#include <charconv>
#include <cmath>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "engine/teacher_forced.hpp"

namespace wsb {
namespace {

std::string float_text(float v) {
  if (std::isnan(v)) return "\"nan\"";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  return fmt::format("{}", v);
}

void write_json(std::ostream& out, const ForwardArgs& args, const std::string& model, const std::vector<int32_t>& tokens,
                const std::vector<std::vector<float>>& logits) {
  out << "{\"checkpoint\": " << nlohmann::json(args.checkpoint.string()).dump()
      << ", \"model\": " << nlohmann::json(model).dump() << ", \"backend\": " << nlohmann::json(args.backend).dump()
      << ", \"tp\": " << args.tp << ", \"tokens\": " << nlohmann::json(tokens).dump() << ",\n\"logits\": [\n";
  for (size_t t = 0; t < logits.size(); ++t) {
    std::string row = "[";
    for (size_t v = 0; v < logits[t].size(); ++v) {
      if (v) row += ", ";
      row += float_text(logits[t][v]);
    }
    out << row << (t + 1 < logits.size() ? "],\n" : "]\n");
  }
  out << "]}\n";
}

}  // namespace

std::vector<int32_t> parse_token_list(std::string_view text) {
  std::vector<int32_t> tokens;
  size_t item = 0;
  while (true) {
    const size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    ++item;
    int32_t token = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), token);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size()) {
      throw Error(ErrorKind::Format,
                  fmt::format("--tokens: item {} '{}' is not a token id (a comma-separated list of integers, e.g. "
                              "1,17,42)",
                              item, part));
    }
    tokens.push_back(token);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return tokens;
}

int cmd_forward(const ForwardArgs& args) {
  const std::vector<int32_t> tokens = parse_token_list(args.tokens);
  const ModelProfile profile = profile_from_hf_dir(args.checkpoint);
  const auto logits = teacher_forced_logits(profile, args.checkpoint, args.tp, args.backend, tokens);
  if (args.json == "-") {
    write_json(std::cout, args, profile.id, tokens, logits);
    return 0;
  }
  const std::string tmp = args.json.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    write_json(out, args, profile.id, tokens, logits);
    if (!out) throw Error(ErrorKind::Io, fmt::format("cannot write {}", tmp));
  }
  std::filesystem::rename(tmp, args.json);
  std::cerr << fmt::format("{} positions x {} logits of {} ({} backend, tp {}) -> {}\n", logits.size(),
                           logits.empty() ? 0 : logits[0].size(), profile.id, args.backend, args.tp,
                           args.json.string());
  return 0;
}

}  // namespace wsb
