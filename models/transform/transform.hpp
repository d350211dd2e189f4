#pragma once
// Quantization post-load transforms: pure functions from the gathered raw shards of one runtime storage (its
// canonical fragments concatenated, see models/layout/tp_layout.hpp) to the runtime bytes the kernels read.
// One module per method: fp8_channel.hpp, nvfp4.hpp, mxfp4.hpp. This library does not depend on models/layout;
// load_storage (models/layout) calls apply_transform.
//
// Reload safety: every transform writes every byte of its output, padding included (zeros), and reads nothing but
// its input, so a fresh load, a second and a third reload into the same (dirty) buffer give identical bytes.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor_spec.hpp"

namespace wsb {

/// The transform that keeps the gathered bytes as they are (BF16 weights, norms, NVFP4 packed weights).
inline constexpr std::string_view kTransformNone = "none";

/// Input and output of one transform call. `dtype` is the element type of both gathered and runtime tensors.
struct TransformIo {
  std::string_view storage;              ///< runtime storage name, for error messages
  std::span<const std::string> sources;  ///< canonical tensor of each gathered fragment, in gathered order
  DType dtype = DType::U8;
  Shape gathered_shape;
  std::span<const uint8_t> gathered;  ///< numel(gathered_shape) * dtype size bytes
  Shape runtime_shape;
  std::span<uint8_t> out;  ///< numel(runtime_shape) * dtype size bytes, fully overwritten
};

/// True when transform `name` leaves the gathered bytes exactly as they are for these shapes and dtype (nothing to
/// pad, move or combine): "none" and "mxfp4_pad" with equal shapes, "fp8_channel_scale" (F32) whose N is already a
/// multiple of its padding. Such a storage is a plain gather of its fragments, which a producer of canonical bytes
/// can place directly (models/layout/fragment_runs.hpp).
bool transform_is_identity(std::string_view name, DType dtype, const Shape& gathered, const Shape& runtime);

/// True for "none" and every name apply_transform knows.
bool is_known_transform(std::string_view name);
/// Every known transform name, "none" first.
std::vector<std::string_view> transform_names();
/// Runs transform `name`. Throws Error(Format) "storage '<storage>': unknown post-load transform '<name>'" for an
/// unknown name; Error(Mismatch) naming the storage when a buffer size disagrees with its shape or the shapes and
/// dtype do not fit the transform; method-specific errors are listed in each module's header.
void apply_transform(std::string_view name, const TransformIo& io);

}  // namespace wsb
