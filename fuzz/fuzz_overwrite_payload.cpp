// Fuzzes decode_delta(Overwrite): zstd of u32 count | count u32 positions | count values. A count that lies,
// unsorted or out-of-range positions, trailing bytes or a decompression bomb must end in Error(Format) before
// any tensor byte is written (failure kind 2). Input: u32 little-endian tensor size (modulo kMaxTensorBytes + 1:
// bounded memory, while the frame may still declare more than the 4 + 5 * size bound), then the payload.
// Checked on accepted payloads: positions strictly increasing and in range, one value per position,
// apply_delta_swap twice is the identity, and encode_delta of the resulting change decodes to the same bytes.
#include <cstring>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "publication/delta_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  using wsb::fuzz::kMaxTensorBytes;
  using wsb::fuzz::only_documented_errors;
  using wsb::fuzz::require;
  const auto sized = wsb::fuzz::sized_payload(input, input_size, kMaxTensorBytes);
  if (!sized) return 0;
  const size_t size = sized->tensor_bytes;
  const std::span<const uint8_t> payload = sized->payload;
  wsb::DecodedDelta delta;
  if (!only_documented_errors({wsb::ErrorKind::Format}, [&] {
        delta = wsb::decode_delta(wsb::DeltaEncoding::Overwrite, payload, size, "t");
      })) {
    return 0;
  }
  require(delta.encoding == wsb::DeltaEncoding::Overwrite && delta.tensor_bytes == size, "wrong delta header");
  require(delta.values.size() == delta.positions.size(), "values and positions differ in count");
  for (size_t k = 0; k < delta.positions.size(); ++k) {
    require(delta.positions[k] < size, "position out of range accepted");
    require(k == 0 || delta.positions[k] > delta.positions[k - 1], "positions not strictly increasing accepted");
  }

  // Exactly `size` bytes on the heap, so an out-of-range write is an ASan report.
  const std::vector<uint8_t>& pattern = wsb::fuzz::base_pattern();
  const std::vector<uint8_t> base(pattern.begin(), pattern.begin() + static_cast<std::ptrdiff_t>(size));
  std::vector<uint8_t> tensor = base;
  const std::vector<uint8_t> values = delta.values;
  require(only_documented_errors({}, [&] { wsb::apply_delta_swap(delta, tensor); }), "apply_delta_swap refused");
  for (size_t k = 0; k < delta.positions.size(); ++k) {
    require(tensor[delta.positions[k]] == values[k], "overwrite did not write the value");
  }
  const std::vector<uint8_t> target = tensor;
  require(only_documented_errors({}, [&] { wsb::apply_delta_swap(delta, tensor); }), "second swap refused");
  require(tensor == base, "applying the swapped delta does not restore the tensor");

  std::vector<uint8_t> encoded;
  wsb::DecodedDelta redecoded;
  require(only_documented_errors({}, [&] {
            encoded = wsb::encode_delta(wsb::DeltaEncoding::Overwrite, base, target, 1);
            redecoded = wsb::decode_delta(wsb::DeltaEncoding::Overwrite, encoded, size, "t");
            wsb::apply_delta_swap(redecoded, tensor);
          }),
          "encode_delta's own payload refused");
  require(tensor == target, "re-encoded overwrite delta gives other bytes");
  return 0;
}
