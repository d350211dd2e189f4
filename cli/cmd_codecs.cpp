// `wsbench codecs`: wsbench's decode tables and encoder results, for comparison with other implementations
// (tests/interop/interop_check.py compares them with torch's float8/float4 dtypes).
//
// JSON (format "wsbench-codecs/1"):
//   {"format", "value_encoding",
//    "decode": {KIND: {"codes": [int], "values": [number|"nan"|"inf"|"-inf"], "f32_bits": ["0x3f800000", ...]}},
//    "encode": {KIND: {"inputs": [number|"nan"|...], "input_bits": ["0x..."], "codes": [int|null],
//                      "errors": [null|"message"]}}}
// KIND: e4m3 (all 256 codes), e5m2 (256), e8m0 (256), e2m1 (16), bf16 and f16 (a fixed list of codes). Decoded values
// are float32 (f32_bits is their exact bit pattern, NaN payload included); "values" spells them as exact JSON
// numbers. Encoders (e4m3, e8m0, e2m1, bf16) take float32 inputs, given exactly by "input_bits"; an input the
// encoder refuses (NaN for E2M1) has code null and the error message.
#include <array>
#include <bit>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/inspect.hpp"
#include "core/errors.hpp"
#include "core/numeric.hpp"
#include "models/quant/codecs.hpp"

namespace wsb {
namespace {

using nlohmann::json;

std::string bits_hex(float value) { return fmt::format("0x{:08x}", std::bit_cast<uint32_t>(value)); }

template <typename Decode>
json decode_table(const std::vector<uint32_t>& codes, Decode decode) {
  json values = json::array(), bits = json::array();
  for (uint32_t c : codes) {
    const float v = decode(c);
    values.push_back(decoded_value_json(v));
    bits.push_back(bits_hex(v));
  }
  return json{{"codes", codes}, {"values", std::move(values)}, {"f32_bits", std::move(bits)}};
}

std::vector<uint32_t> all_codes(uint32_t n) {
  std::vector<uint32_t> codes(n);
  for (uint32_t i = 0; i < n; ++i) codes[i] = i;
  return codes;
}

// 16-bit codes: the special ones (zeros, smallest/largest subnormal and normal, infinities, quiet and signalling
// NaNs of both signs) plus every 257th code, which walks every high byte with a varying low byte.
std::vector<uint32_t> sixteen_bit_codes(bool bf16) {
  std::set<uint32_t> codes = bf16 ? std::set<uint32_t>{0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80,
                                                       0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFFF}
                                  : std::set<uint32_t>{0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00,
                                                       0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFFFF};
  for (uint32_t c = 0; c < 0x10000; c += 257) codes.insert(c);
  return {codes.begin(), codes.end()};
}

// Probe inputs around every representable value of a code table: the value, the midpoint to the next one (a
// round-to-nearest-even tie), one float32 ulp either side of it, both signs; plus zeros, infinities, NaN, tiny and
// huge values. Midpoints of E4M3/E2M1/E8M0 neighbours are exact in float32 (few significant bits).
std::vector<float> probes_around(const std::vector<float>& finite_ascending, const std::vector<float>& extra) {
  std::vector<float> out;
  for (size_t i = 0; i < finite_ascending.size(); ++i) {
    const float v = finite_ascending[i];
    out.push_back(v);
    if (i + 1 < finite_ascending.size()) {
      const float mid = v + (finite_ascending[i + 1] - v) / 2;
      out.push_back(mid);
      out.push_back(std::nextafter(mid, 0.0f));
      out.push_back(std::nextafter(mid, std::numeric_limits<float>::infinity()));
    }
  }
  const size_t positive = out.size();
  for (size_t i = 0; i < positive; ++i) out.push_back(-out[i]);
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(), 1e-30f, 1e30f}) {
    out.push_back(v);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

template <typename Encode>
json encode_table(const std::vector<float>& inputs, Encode encode) {
  json in = json::array(), bits = json::array(), codes = json::array(), errors = json::array();
  for (float v : inputs) {
    in.push_back(decoded_value_json(v));
    bits.push_back(bits_hex(v));
    try {
      codes.push_back(encode(v));
      errors.push_back(nullptr);
    } catch (const Error& e) {
      codes.push_back(nullptr);
      errors.push_back(e.what());
    }
  }
  return json{{"inputs", std::move(in)}, {"input_bits", std::move(bits)}, {"codes", std::move(codes)},
              {"errors", std::move(errors)}};
}

std::vector<float> finite_positive(const std::array<float, 256>& table, uint32_t first, uint32_t last) {
  std::vector<float> out;
  for (uint32_t c = first; c <= last; ++c) out.push_back(table[c]);
  return out;
}

// Deterministic float32 bit patterns (64-bit LCG, Knuth's MMIX constants) spread over every exponent.
std::vector<float> pseudo_random_floats(size_t n) {
  std::vector<float> out;
  uint64_t state = 0x5EEDu;
  while (out.size() < n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float v = std::bit_cast<float>(static_cast<uint32_t>(state >> 32));
    if (!std::isnan(v)) out.push_back(v);
  }
  return out;
}

}  // namespace

json codecs_json() {
  json decode = {
      {"e4m3", decode_table(all_codes(256), [](uint32_t c) { return e4m3_to_float(static_cast<uint8_t>(c)); })},
      {"e5m2", decode_table(all_codes(256), [](uint32_t c) { return f16_to_float(static_cast<uint16_t>(c << 8)); })},
      {"e8m0", decode_table(all_codes(256), [](uint32_t c) { return e8m0_to_float(static_cast<uint8_t>(c)); })},
      {"e2m1", decode_table(all_codes(16), [](uint32_t c) { return e2m1_to_float(static_cast<uint8_t>(c)); })},
      {"bf16", decode_table(sixteen_bit_codes(true), [](uint32_t c) { return bf16_to_float(static_cast<uint16_t>(c)); })},
      {"f16", decode_table(sixteen_bit_codes(false), [](uint32_t c) { return f16_to_float(static_cast<uint16_t>(c)); })},
  };
  // E4M3: every finite magnitude 0..448 (codes 0x00..0x7E) and the overflow boundary (464 ties down to 448, above
  // it NaN). E8M0: every scale 2^-127..2^127 and the 1.5 * 2^k rounding boundary. E2M1: its eight magnitudes and
  // saturation. BF16: pseudo-random bit patterns and round-to-nearest-even ties.
  std::vector<float> e4m3_extra{464.0f, std::nextafter(464.0f, 0.0f), std::nextafter(464.0f, 1e9f), 480.0f, 1e6f,
                                0x1p-10f, std::nextafter(0x1p-10f, 1.0f), 0x1p-11f};
  std::vector<float> e8m0_extra;
  for (int k = -127; k <= 127; k += 7) {
    for (float m : {1.25f, 1.5f, std::nextafter(1.5f, 0.0f), 1.75f}) e8m0_extra.push_back(std::ldexp(m, k));
  }
  e8m0_extra.push_back(0x1p-149f);
  std::vector<float> e2m1_extra{6.5f, 7.0f, 100.0f, 0.25f, std::nextafter(0.25f, 1.0f), 0.1f};
  std::vector<float> bf16_inputs = pseudo_random_floats(256);
  for (float v : {1.0f + 0x1p-8f, 1.0f + 0x1p-8f * 3, -1.0f - 0x1p-8f, 0x1.fffffep127f, 0x1.ffp127f, 0x1.fep127f, 0x1p-133f,
                  0x1.01p-126f, 0.0f, -0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    bf16_inputs.push_back(v);
  }
  std::vector<float> e2m1_finite;
  for (uint8_t c = 0; c < 8; ++c) e2m1_finite.push_back(e2m1_to_float(c));
  std::vector<float> e2m1_inputs;
  for (float v : probes_around(e2m1_finite, e2m1_extra)) {
    if (!std::isnan(v)) e2m1_inputs.push_back(v);  // E2M1 has no NaN code: the encoder's error is tested elsewhere
  }
  e2m1_inputs.push_back(std::numeric_limits<float>::quiet_NaN());  // kept once, so the error path shows up
  json encode = {
      {"e4m3", encode_table(probes_around(finite_positive(e4m3_table(), 0x00, 0x7E), e4m3_extra),
                            [](float v) { return float_to_e4m3(v); })},
      {"e8m0", encode_table(probes_around(finite_positive(e8m0_table(), 0x00, 0xFE), e8m0_extra),
                            [](float v) { return float_to_e8m0(v); })},
      {"e2m1", encode_table(e2m1_inputs, [](float v) { return float_to_e2m1(v); })},
      {"bf16", encode_table(bf16_inputs, [](float v) { return float_to_bf16(v); })},
  };
  return json{{"format", "wsbench-codecs/1"},
              {"value_encoding",
               "values are exact float32 values as JSON numbers (read as binary64 they are exact); NaN and infinities "
               "are the strings \"nan\", \"inf\", \"-inf\"; f32_bits / input_bits are the float32 bit patterns"},
              {"decode", std::move(decode)},
              {"encode", std::move(encode)}};
}

int cmd_codecs(const std::filesystem::path& json_out) {
  const json j = codecs_json();
  if (json_out.empty() || json_out == "-") {
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  std::ofstream out(json_out);
  out << j.dump(1) << "\n";
  out.close();
  if (!out) throw Error(ErrorKind::Io, fmt::format("codecs: cannot write {}", json_out.string()));
  std::cout << fmt::format("codecs: e4m3 256, e5m2 256, e8m0 256, e2m1 16, bf16 {}, f16 {} codes; {} encoder probes -> {}\n",
                           j["decode"]["bf16"]["codes"].size(), j["decode"]["f16"]["codes"].size(),
                           j["encode"]["e4m3"]["inputs"].size() + j["encode"]["e8m0"]["inputs"].size() +
                               j["encode"]["e2m1"]["inputs"].size() + j["encode"]["bf16"]["inputs"].size(),
                           json_out.string());
  return 0;
}

}  // namespace wsb
