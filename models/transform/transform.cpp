#include "models/transform/transform.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.hpp"
#include "models/transform/fp8_channel.hpp"
#include "models/transform/mxfp4.hpp"
#include "models/transform/nvfp4.hpp"
#include "models/transform/transform_util.hpp"

namespace wsb {

namespace {

struct Entry {
  std::string_view name;
  void (*run)(const TransformIo&);
};

void copy_as_is(const TransformIo& io) {
  if (io.gathered_shape != io.runtime_shape)
    transform_mismatch(io, kTransformNone,
                       fmt::format("gathered {} differs from runtime {}", shape_string(io.gathered_shape),
                                   shape_string(io.runtime_shape)));
  std::copy(io.gathered.begin(), io.gathered.end(), io.out.begin());
}

constexpr Entry kTransforms[] = {
    {kTransformNone, copy_as_is},
    {kFp8ChannelWeight, fp8_channel_weight_transform},
    {kFp8ChannelScale, fp8_channel_scale_transform},
    {kNvfp4ScaleSwizzle, nvfp4_scale_swizzle_transform},
    {kNvfp4W13Scale2, nvfp4_w13_scale_2_transform},
    {kNvfp4W13InputScale, nvfp4_w13_input_scale_transform},
    {kNvfp4W13Alpha, nvfp4_w13_alpha_transform},
    {kNvfp4W2Alpha, nvfp4_w2_alpha_transform},
    {kMxfp4Pad, mxfp4_pad_transform},
    {kMxfp4ScaleSwizzle, mxfp4_scale_swizzle_transform},
};

const Entry* find(std::string_view name) {
  for (const Entry& e : kTransforms)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace

bool is_known_transform(std::string_view name) { return find(name) != nullptr; }

bool transform_is_identity(std::string_view name, DType dtype, const Shape& gathered, const Shape& runtime) {
  if (name == kTransformNone || name == kMxfp4Pad) return gathered == runtime;
  if (name == kFp8ChannelScale) {
    return dtype == DType::F32 && !runtime.empty() && runtime == fp8_channel_scale_shape(gathered) &&
           shape_numel(runtime) == shape_numel(gathered);
  }
  return false;
}

std::vector<std::string_view> transform_names() {
  std::vector<std::string_view> out;
  for (const Entry& e : kTransforms) out.push_back(e.name);
  return out;
}

void apply_transform(std::string_view name, const TransformIo& io) {
  const Entry* entry = find(name);
  if (entry == nullptr)
    throw Error(ErrorKind::Format, fmt::format("storage '{}': unknown post-load transform '{}' (supported: {})",
                                               io.storage, name, fmt::join(transform_names(), ", ")));
  const uint64_t esize = dtype_size(io.dtype);
  if (io.gathered.size() != shape_numel(io.gathered_shape) * esize ||
      io.out.size() != shape_numel(io.runtime_shape) * esize)
    transform_mismatch(
        io, name,
        fmt::format("buffers of {} / {} bytes do not hold {} {} / {}", io.gathered.size(), io.out.size(),
                    dtype_name(io.dtype), shape_string(io.gathered_shape), shape_string(io.runtime_shape)));
  entry->run(io);
}

}  // namespace wsb
