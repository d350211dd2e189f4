// Fuzzes parse_safetensors_header: the JSON header of every shard wsbench opens comes from a publisher it does not
// control, and a header that slips past validation decides which bytes become tensor data (failure kind 2).
// Input: the header JSON text. Beyond "only wsb::Error(Format)", an accepted header must tile its data buffer
// and survive a round trip through build_safetensors_header (the writer must accept what the reader accepts).
#include <algorithm>
#include <numeric>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "models/checkpoint/safetensors_header.hpp"

namespace {

using wsb::fuzz::require;

void check_accepted(const wsb::SafetensorsHeader& header) {
  std::vector<const wsb::SafetensorsEntry*> order;
  for (const auto& e : header.entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  uint64_t cursor = 0;
  std::vector<wsb::TensorSpec> specs;
  for (const auto* e : order) {
    require(e->begin == cursor, "accepted header does not tile its data buffer");
    require(e->bytes() == e->spec().bytes(), "accepted entry whose byte count differs from its shape");
    cursor = e->end;
    specs.push_back(e->spec());
  }
  require(cursor == header.data_size, "data_size differs from the tiled range");

  std::string rebuilt;
  bool built = wsb::fuzz::only_documented_errors({}, [&] {
    rebuilt = wsb::build_safetensors_header(specs, header.metadata, "fuzz-rebuilt");
  });
  require(built, "build_safetensors_header refused a header the parser accepted");
  wsb::SafetensorsHeader again;
  bool reparsed = wsb::fuzz::only_documented_errors({}, [&] { again = wsb::parse_safetensors_header(rebuilt, "r"); });
  require(reparsed, "the parser refused the writer's header");
  require(again.entries.size() == order.size() && again.metadata == header.metadata &&
              again.data_size == header.data_size,
          "round trip changed the header");
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& a = again.entries[i];
    const auto& b = *order[i];
    require(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.begin == b.begin && a.end == b.end,
            "round trip changed entry '" + b.name + "'");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  wsb::SafetensorsHeader header;
  if (wsb::fuzz::only_documented_errors({wsb::ErrorKind::Format},
                                        [&] { header = wsb::parse_safetensors_header(text, "fuzz.safetensors"); })) {
    check_accepted(header);
  }
  return 0;
}
