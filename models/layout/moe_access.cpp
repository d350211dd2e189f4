#include "models/layout/moe_access.hpp"

#include <fmt/format.h>

#include "core/errors.hpp"
#include "models/transform/fp8_channel.hpp"
#include "models/transform/mxfp4.hpp"
#include "models/transform/nvfp4.hpp"

namespace wsb {

namespace {

[[noreturn]] void unsupported(const RuntimeStorageSpec& s, std::string_view what) {
  throw Error(ErrorKind::Format, fmt::format("storage '{}' ({} {}, transform '{}') has no {} accessor", s.name,
                                             dtype_name(s.dtype), shape_string(s.shape), s.transform, what));
}

}  // namespace

ElementPos weight_element(const RuntimeStorageSpec& w, int64_t expert, int64_t n, int64_t k) {
  const size_t rank = w.shape.size();
  if (w.transform == kTransformNone && w.dtype == DType::U8 && rank == 3)
    return {nvfp4_weight_offset(w.shape, expert, n, k), static_cast<int>(k % 2)};
  if (w.transform == kTransformNone && w.dtype != DType::U8 && (rank == 2 || rank == 3)) {
    const int64_t rows = w.shape[rank - 2], cols = w.shape[rank - 1], e = rank == 3 ? expert : 0;
    return {static_cast<uint64_t>((e * rows + n) * cols + k) * dtype_size(w.dtype), -1};
  }
  if (w.transform == kFp8ChannelWeight) return {fp8_channel_weight_offset(w.shape, expert, n, k), -1};
  if (w.transform == kMxfp4Pad && w.dtype == DType::U8 && rank == 4)
    return {mxfp4_value_offset(w.shape, expert, n, k), static_cast<int>(k % 2)};
  unsupported(w, "weight element");
}

uint64_t scale_element(const RuntimeStorageSpec& s, int64_t expert, int64_t n, int64_t k, int64_t k_phase) {
  if (s.transform == kFp8ChannelScale) return fp8_channel_scale_offset(s.shape, expert, n);
  if (s.transform == kNvfp4ScaleSwizzle) return nvfp4_scale_offset(s.shape, expert, n, (k_phase + k) / 16);
  if (s.transform == kMxfp4ScaleSwizzle) return mxfp4_scale_offset(s.shape, expert, n, k / 32);
  unsupported(s, "scale element");
}

}  // namespace wsb
