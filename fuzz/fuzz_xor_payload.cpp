// Fuzzes the xor payload decoders: apply_xor_payload (the streaming prepare path) and decode_delta(Xor) (which
// materializes the mask). Payloads come from the publisher over disk or the network; a bomb, a truncated or
// concatenated frame, or a size lie must end in Error(Format) with the tensor untouched (failure kind 2).
// Input: u32 little-endian tensor size (taken modulo kMaxTensorBytes + 1, so memory stays bounded while a frame
// can still declare far more than the tensor), then the payload. Checked: only Error(Format); on refusal the
// tensor bytes are exactly as before; both decoders apply the same rules and agree on the result; progress is
// increasing and reaches the size; applying twice restores the tensor.
#include <sanitizer/asan_interface.h>

#include <cstring>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "publication/delta_codec.hpp"
#include "publication/xor_stream.hpp"
#include "publication/zstd_frame.hpp"

namespace {

/// zstd promises to survive corrupt blocks safely, not to detect them identically in its one-shot and buffered
/// streaming decoders (facebook/zstd#3151: e.g. a block decoding to more than 128 KiB passes one-shot). Such a
/// payload cannot commit garbage either way: prepare verifies the target checksum after applying. So the two
/// decoders may disagree when the refusal is zstd reporting corruption inside the frame; a disagreement on
/// wsbench's own rules (sizes, window, framing, trailing bytes) stays a finding.
bool zstd_reported_corruption(const std::string& message) {
  return message.find("corrupt zstd frame") != std::string::npos &&
         message.find("too much memory") == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  using wsb::fuzz::kMaxTensorBytes;
  using wsb::fuzz::only_documented_errors;
  using wsb::fuzz::require;
  const auto sized = wsb::fuzz::sized_payload(input, input_size, kMaxTensorBytes);
  if (!sized) return 0;
  const size_t size = sized->tensor_bytes;
  const std::span<const uint8_t> payload = sized->payload;
  // A frame header that does not declare exactly `size` must be refused before the tensor is touched (both
  // decoders check it first), which spares most inputs a pass over up to 1 MiB.
  uint64_t declared = 0;
  const bool header_matches =
      only_documented_errors({wsb::ErrorKind::Format}, [&] { declared = wsb::zstd_declared_size(payload, "t"); }) &&
      declared == size;
  const std::vector<uint8_t>& base = wsb::fuzz::base_pattern();
  // The tensor is the tail of one buffer allocated once: no per-input copy of up to 1 MiB, and a write past the
  // tensor's end still lands in the heap redzone that ASan watches. The head is poisoned for writes before it.
  static std::vector<uint8_t> buffer = base;
  const std::span<uint8_t> tensor(buffer.data() + kMaxTensorBytes - size, size);
  const std::span<const uint8_t> before(base.data() + kMaxTensorBytes - size, size);
  ASAN_POISON_MEMORY_REGION(buffer.data(), kMaxTensorBytes - size);

  size_t last_progress = 0;
  bool progress_ok = true;
  const wsb::XorProgress progress = [&](size_t upto) {
    progress_ok = progress_ok && upto > last_progress && upto <= size;
    last_progress = upto;
  };
  std::string apply_error;
  const bool applied = only_documented_errors(
      {wsb::ErrorKind::Format}, [&] { wsb::apply_xor_payload(payload, tensor, "t", progress); }, &apply_error);
  require(progress_ok, "progress not strictly increasing within the tensor");
  require(header_matches || !applied, "apply_xor_payload accepted a frame not declaring the tensor size");
  if (!applied) {
    require(!header_matches || std::memcmp(tensor.data(), before.data(), size) == 0,
            "refused xor payload left the tensor changed");
  } else {
    require(size == 0 || last_progress == size, "successful apply whose progress stops short of the tensor size");
  }

  wsb::DecodedDelta decoded;
  std::string decode_error;
  const bool decodes = only_documented_errors(
      {wsb::ErrorKind::Format}, [&] { decoded = wsb::decode_delta(wsb::DeltaEncoding::Xor, payload, size, "t"); },
      &decode_error);
  if (decodes != applied) {
    require(zstd_reported_corruption(applied ? decode_error : apply_error),
            applied ? "apply_xor_payload accepted a payload decode_delta refuses: " + decode_error
                    : "decode_delta accepted a payload apply_xor_payload refuses: " + apply_error);
  }
  if (applied) {
    if (decodes) {
      require(decoded.mask.size() == size, "decoded mask length differs from the tensor");
      require(wsb::fuzz::no_coverage::xor_relates(before, decoded.mask, tensor),
              "apply and decode disagree on the result");
    }
    // Also puts the shared buffer back to the base pattern for the next input.
    require(only_documented_errors({}, [&] { wsb::apply_xor_payload(payload, tensor, "t"); }),
            "a payload applied once is refused the second time");
    require(std::memcmp(tensor.data(), before.data(), size) == 0, "applying an xor payload twice is no identity");
  }
  ASAN_UNPOISON_MEMORY_REGION(buffer.data(), kMaxTensorBytes - size);
  return 0;
}
